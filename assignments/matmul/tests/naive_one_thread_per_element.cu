// expect: correct
// Nothing is wrong: the lecture's first kernel, one thread per element of C, consecutive threads on consecutive columns (coalesced), every operand read from global memory. Correct and slow; its profile is a fixture of the hint rules.
#include "cuda_check.cuh"

__global__ void matmul_kernel(int m, int n, int k, const double* A, const double* B, double* C) {
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    int i = blockIdx.y * blockDim.y + threadIdx.y;
    if (i >= m || j >= n) return;
    double s = 0.0;
    for (int p = 0; p < k; ++p) s += A[(size_t)i * k + p] * B[(size_t)p * n + j];
    C[(size_t)i * n + j] = s;
}

void matmul(int m, int n, int k, const double* A, const double* B, double* C) {
    dim3 block(32, 8), grid((n + 31) / 32, (m + 7) / 8);
    matmul_kernel<<<grid, block>>>(m, n, k, A, B, C);
    CUDA_CHECK(cudaGetLastError());
}
