// expect: incorrect
// The tiles are stored as float and the products summed in float, so the result is off by ~1e-7 relative, far over the FP64 tolerance.
#include "cuda_check.cuh"

#define TILE 16

// Shared-memory tiled, one thread per element of C, every bound checked, with the arithmetic
// done in single precision (twice the bytes per tile and, on a consumer GPU, up to 64x the
// FLOP rate, but 24 bits of mantissa instead of 53).
__global__ void matmul_kernel(int m, int n, int k, const double* A, const double* B, double* C) {
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * TILE + ty;
    const int col = blockIdx.x * TILE + tx;

    float sum = 0.0f;
    for (int ph = 0; ph < (k + TILE - 1) / TILE; ++ph) {
        const int ka = ph * TILE + tx;
        const int kb = ph * TILE + ty;
        As[ty][tx] = (row < m && ka < k) ? (float)A[(size_t)row * k + ka] : 0.0f;
        Bs[ty][tx] = (kb < k && col < n) ? (float)B[(size_t)kb * n + col] : 0.0f;
        __syncthreads();
        for (int kk = 0; kk < TILE; ++kk) sum += As[ty][kk] * Bs[kk][tx];
        __syncthreads();
    }
    if (row < m && col < n) C[(size_t)row * n + col] = (double)sum;
}

void matmul(int m, int n, int k, const double* A, const double* B, double* C) {
    dim3 block(TILE, TILE);
    dim3 grid((n + TILE - 1) / TILE, (m + TILE - 1) / TILE);
    matmul_kernel<<<grid, block>>>(m, n, k, A, B, C);
    CUDA_CHECK(cudaGetLastError());
}
