// The matmul CPU reference, shared by the checker and the C++ tests,
// and the sequential loop that defines the answer (quoted by the handout).
#pragma once

// C = A * B with A m x k, B k x n, C m x n, all row-major.
void matmul_cpu(int m, int n, int k, const double* A, const double* B, double* C);

// handout: begin
// A[i][p] is A[i * k + p], B[p][j] is B[p * n + j], C[i][j] is C[i * n + j].
inline void matmul_sequential(int m, int n, int k, const double* A, const double* B, double* C) {
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double s = 0;
            for (int p = 0; p < k; p++) s += A[i * k + p] * B[p * n + j];
            C[i * n + j] = s;
        }
}
// handout: end
