// expect: correct
// Nothing is wrong: the work runs on a non-blocking stream and trmm returns without synchronizing, which the harness must still time in full.
#include "cuda_check.cuh"

#define TILE 32
#define ROWS 8  // threads per block in y; each thread computes TILE / ROWS = 4 rows

// Shared-memory tiled: a 32 x 8 block computes a 32 x 32 output tile, 4 rows per thread,
// so each B_old value loaded from shared memory feeds 4 FMAs. Block row by only needs the
// k tiles from its diagonal tile on (k >= i); A is zeroed below the diagonal.
__global__ void trmm_kernel(int n, const double* __restrict__ A, const double* __restrict__ B_old,
                            double* __restrict__ B) {
    __shared__ double As[TILE][TILE + 1];  // +1: the column reads As[r][kk] hit distinct banks
    __shared__ double Bs[TILE][TILE];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int i0 = blockIdx.y * TILE;
    const int j = blockIdx.x * TILE + tx;

    double sum[TILE / ROWS] = {0.0, 0.0, 0.0, 0.0};
    const int ntiles = (n + TILE - 1) / TILE;
    for (int t = blockIdx.y; t < ntiles; ++t) {
        const int k0 = t * TILE;
        for (int r = ty; r < TILE; r += ROWS) {
            const int i = i0 + r;
            const int ka = k0 + tx;
            As[r][tx] = (ka >= i && ka < n) ? A[(size_t)i * n + ka] : 0.0;
            const int kb = k0 + r;
            Bs[r][tx] = (kb < n && j < n) ? B_old[(size_t)kb * n + j] : 0.0;
        }
        __syncthreads();
        for (int kk = 0; kk < TILE; ++kk) {
            const double b = Bs[kk][tx];
#pragma unroll
            for (int q = 0; q < TILE / ROWS; ++q) sum[q] += As[ty + q * ROWS][kk] * b;
        }
        __syncthreads();
    }
#pragma unroll
    for (int q = 0; q < TILE / ROWS; ++q) {
        const int i = i0 + ty + q * ROWS;
        if (i < n && j < n) B[(size_t)i * n + j] = B_old[(size_t)i * n + j] + sum[q];
    }
}

void trmm(int n, const double* A, double* B) {
    if (n <= 0) return;
    // A stream that does not synchronize with the legacy default stream. It lives for the
    // whole process, so work queued on it is never cut short by a cudaStreamDestroy.
    static cudaStream_t stream = nullptr;
    if (!stream) CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

    // Workspace for B_old, grown as needed (cudaFree synchronizes the device first).
    static double* B_old = nullptr;
    static size_t capacity = 0;
    const size_t count = (size_t)n * n;
    if (count > capacity) {
        if (B_old) CUDA_CHECK(cudaFree(B_old));
        CUDA_CHECK(cudaMalloc(&B_old, count * sizeof(double)));
        capacity = count;
    }
    CUDA_CHECK(cudaMemcpyAsync(B_old, B, count * sizeof(double), cudaMemcpyDeviceToDevice, stream));

    dim3 block(TILE, ROWS);
    dim3 grid((n + TILE - 1) / TILE, (n + TILE - 1) / TILE);
    trmm_kernel<<<grid, block, 0, stream>>>(n, A, B_old, B);
    CUDA_CHECK(cudaGetLastError());
    // No synchronize: the caller's cudaDeviceSynchronize waits for this stream too.
}
