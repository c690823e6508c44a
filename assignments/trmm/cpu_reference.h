// The trmm CPU reference, shared by the checker and the C++ tests,
// and the sequential loop that defines the answer (quoted by the handout).
#pragma once

// B <- B + triu(A) * B, in place; row-major n x n.
void trmm_cpu(int n, const double* A, double* B);

// handout: begin
// B[i][j] is B[i * n + j]. Row i reads rows k >= i, which are not yet updated.
inline void trmm_sequential(int n, const double* A, double* B) {
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            for (int k = i; k < n; k++)
                B[i * n + j] += A[i * n + k] * B[k * n + j];
}
// handout: end
