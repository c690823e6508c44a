// The reduce CPU reference, shared by the checker and the C++ tests.
#pragma once

// The sum of x[0..n), compensated, so the truth is more accurate than any plain FP64 order.
double reduce_cpu(long long n, const double* x);
