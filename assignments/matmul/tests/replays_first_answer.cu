// expect: incorrect
// Computes the first call of each shape honestly, keeps a copy of C, and answers every later call of that shape with the copy: right on every correctness case (each shape is called once), wrong on every timed run, whose inputs are fresh.
// expect-message: timed run
#include <map>
#include <tuple>

#include "cuda_check.cuh"

#define TILE 32

__global__ void matmul_kernel(int m, int n, int k, const double* A, const double* B, double* C) {
    __shared__ double As[TILE][TILE];
    __shared__ double Bs[TILE][TILE];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * TILE + ty;
    const int col = blockIdx.x * TILE + tx;
    double sum = 0.0;
    for (int p0 = 0; p0 < k; p0 += TILE) {
        As[ty][tx] = (row < m && p0 + tx < k) ? A[(size_t)row * k + p0 + tx] : 0.0;
        Bs[ty][tx] = (col < n && p0 + ty < k) ? B[(size_t)(p0 + ty) * n + col] : 0.0;
        __syncthreads();
        for (int kk = 0; kk < TILE; ++kk) sum += As[ty][kk] * Bs[kk][tx];
        __syncthreads();
    }
    if (row < m && col < n) C[(size_t)row * n + col] = sum;
}

void matmul(int m, int n, int k, const double* A, const double* B, double* C) {
    static std::map<std::tuple<int, int, int>, double*> saved;
    const size_t bytes = (size_t)m * n * sizeof(double);
    auto key = std::make_tuple(m, n, k);
    auto it = saved.find(key);
    if (it != saved.end()) {  // seen this shape: replay the first answer
        CUDA_CHECK(cudaMemcpy(C, it->second, bytes, cudaMemcpyDeviceToDevice));
        return;
    }
    dim3 block(TILE, TILE), grid((n + TILE - 1) / TILE, (m + TILE - 1) / TILE);
    matmul_kernel<<<grid, block>>>(m, n, k, A, B, C);
    CUDA_CHECK(cudaGetLastError());
    double* copy = nullptr;
    CUDA_CHECK(cudaMalloc(&copy, bytes));
    CUDA_CHECK(cudaMemcpy(copy, C, bytes, cudaMemcpyDeviceToDevice));
    saved[key] = copy;
}
