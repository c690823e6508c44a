// The matmul CPU reference, shared by the checker and the C++ tests.
#pragma once

// C = A * B with A m x k, B k x n, C m x n, all row-major.
void matmul_cpu(int m, int n, int k, const double* A, const double* B, double* C);
