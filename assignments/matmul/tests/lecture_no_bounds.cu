// expect: incorrect
// The phase loop runs k / 32 times (integer division truncates), so the last k % 32 terms of every sum are dropped unless k is a multiple of 32.
// expect-message: exceeds the tolerance
#include "cuda_check.cuh"

#define TILE 32

// The lecture's first shared-memory kernel: one thread per element of C, a 32 x 32 block
// per 32 x 32 tile of C, and the k dimension walked in phases of 32 through shared memory.
// Rows and columns past m and n are guarded (the grid is rounded up); the k dimension is
// not: the loop counts whole tiles only, so indices past k are never formed either.
__global__ void matmul_kernel(int m, int n, int k, const double* A, const double* B, double* C) {
    __shared__ double As[TILE][TILE];
    __shared__ double Bs[TILE][TILE];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * TILE + ty;
    const int col = blockIdx.x * TILE + tx;

    double sum = 0.0;
    for (int ph = 0; ph < k / TILE; ++ph) {
        // ph * TILE + tx and ph * TILE + ty are < k, since ph < k / TILE.
        As[ty][tx] = (row < m) ? A[(size_t)row * k + ph * TILE + tx] : 0.0;
        Bs[ty][tx] = (col < n) ? B[(size_t)(ph * TILE + ty) * n + col] : 0.0;
        __syncthreads();
        for (int kk = 0; kk < TILE; ++kk) sum += As[ty][kk] * Bs[kk][tx];
        __syncthreads();
    }
    if (row < m && col < n) C[(size_t)row * n + col] = sum;
}

void matmul(int m, int n, int k, const double* A, const double* B, double* C) {
    dim3 block(TILE, TILE);
    dim3 grid((n + TILE - 1) / TILE, (m + TILE - 1) / TILE);
    matmul_kernel<<<grid, block>>>(m, n, k, A, B, C);
    CUDA_CHECK(cudaGetLastError());
}
