// The reduce CPU reference, shared by the checker and the C++ tests,
// and the sequential loop that defines the answer (quoted by the handout).
#pragma once

// The sum of x[0..n), compensated, so the truth is more accurate than any plain FP64 order.
double reduce_cpu(long long n, const double* x);

// handout: begin
// The entry point writes this value to *sum.
inline double reduce_sequential(long long n, const double* x) {
    double s = 0;
    for (long long i = 0; i < n; i++) s += x[i];
    return s;
}
// handout: end
