// The syr2k CPU reference, shared by the checker and the C++ tests,
// and the sequential loop that defines the answer (quoted by the handout).
#pragma once

// C[k][l] += 0.5 * sum_{i,j} (A[l][i][j] * B[k][i][j] + A[k][i][j] * B[l][i][j]) for k < l only;
// A, B are n x n x n, C is n x n, all row-major.
void syr2k_cpu(int n, const double* A, const double* B, double* C);

// handout: begin
// C[k][l] is C[k * n + l]; A[a][i][j] is A[(a * n + i) * n + j], and the same for B.
inline void syr2k_sequential(int n, const double* A, const double* B, double* C) {
    for (int k = 0; k < n; k++)
        for (int l = k + 1; l < n; l++)
            for (int i = 0; i < n; i++)
                for (int j = 0; j < n; j++)
                    C[k * n + l] += 0.5 * (A[((size_t)l * n + i) * n + j] * B[((size_t)k * n + i) * n + j] +
                                           A[((size_t)k * n + i) * n + j] * B[((size_t)l * n + i) * n + j]);
}
// handout: end
