// The trmm CPU reference, shared by the checker and the C++ tests.
#pragma once

// B <- B + triu(A) * B, in place; row-major n x n.
void trmm_cpu(int n, const double* A, double* B);
