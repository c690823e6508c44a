// The syr2k CPU reference, shared by the checker and the C++ tests.
#pragma once

// C[k][l] += 0.5 * sum_{i,j} (A[l][i][j] * B[k][i][j] + A[k][i][j] * B[l][i][j]) for k < l only;
// A, B are n x n x n, C is n x n, all row-major.
void syr2k_cpu(int n, const double* A, const double* B, double* C);
