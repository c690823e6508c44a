// expect: incorrect
// The k loop runs over whole 32-wide tiles only (n / 32 truncates), so the last n % 32 terms are dropped unless n is a multiple of 32.
// expect-message: case n1
#include "cuda_check.cuh"

#define TILE 32

// Shared-memory tiled, one thread per output element. Block (bx, by) computes rows
// [32 by, 32 by + 32); only k >= i contributes, so the k tiles start at tile by (the
// diagonal tile) and A[i][k] is zeroed below the diagonal.
__global__ void trmm_kernel(int n, const double* A, const double* B_old, double* B) {
    __shared__ double As[TILE][TILE];
    __shared__ double Bs[TILE][TILE];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int i = blockIdx.y * TILE + ty;
    const int j = blockIdx.x * TILE + tx;

    double sum = 0.0;
    for (int t = blockIdx.y; t < n / TILE; ++t) {
        const int ka = t * TILE + tx;  // < n, since t < n / TILE
        const int kb = t * TILE + ty;
        As[ty][tx] = (i < n && ka >= i) ? A[(size_t)i * n + ka] : 0.0;
        Bs[ty][tx] = (j < n) ? B_old[(size_t)kb * n + j] : 0.0;
        __syncthreads();
        for (int kk = 0; kk < TILE; ++kk) sum += As[ty][kk] * Bs[kk][tx];
        __syncthreads();
    }
    if (i < n && j < n) B[(size_t)i * n + j] = B_old[(size_t)i * n + j] + sum;
}

void trmm(int n, const double* A, double* B) {
    const size_t bytes = (size_t)n * n * sizeof(double);
    double* B_old;
    CUDA_CHECK(cudaMallocAsync(&B_old, bytes, 0));
    CUDA_CHECK(cudaMemcpyAsync(B_old, B, bytes, cudaMemcpyDeviceToDevice, 0));
    dim3 block(TILE, TILE);
    dim3 grid((n + TILE - 1) / TILE, (n + TILE - 1) / TILE);
    trmm_kernel<<<grid, block>>>(n, A, B_old, B);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaFreeAsync(B_old, 0));
}
