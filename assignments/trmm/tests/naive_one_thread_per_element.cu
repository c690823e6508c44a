// expect: correct
// Nothing is wrong: the lecture's first kernel, one thread per element of B, consecutive threads on consecutive columns (coalesced), every operand read from global memory. Correct and slow; its profile is a fixture of the hint rules.
#include "cuda_check.cuh"

__global__ void trmm_kernel(int n, const double* A, const double* B_old, double* B) {
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    int i = blockIdx.y * blockDim.y + threadIdx.y;
    if (i >= n || j >= n) return;
    double s = B_old[(size_t)i * n + j];
    for (int k = i; k < n; ++k) s += A[(size_t)i * n + k] * B_old[(size_t)k * n + j];
    B[(size_t)i * n + j] = s;
}

void trmm(int n, const double* A, double* B) {
    double* B_old;
    size_t bytes = (size_t)n * n * sizeof(double);
    CUDA_CHECK(cudaMallocAsync(&B_old, bytes, 0));
    CUDA_CHECK(cudaMemcpyAsync(B_old, B, bytes, cudaMemcpyDeviceToDevice, 0));
    dim3 block(32, 8), grid((n + 31) / 32, (n + 7) / 8);
    trmm_kernel<<<grid, block>>>(n, A, B_old, B);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaFreeAsync(B_old, 0));
}
