// expect: correct
// Nothing is wrong but the memory order: consecutive threads take consecutive rows i, so a warp's loads of A[i][k] and its stores of B[i][j] are n doubles apart, one 32-byte sector per thread (the coalesced kernel needs 8 per warp). Correct and slow; its profile is a fixture of the hint rules.
#include "cuda_check.cuh"

__global__ void trmm_kernel(int n, const double* A, const double* B_old, double* B) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;  // rows along threadIdx.x: the flaw
    int j = blockIdx.y * blockDim.y + threadIdx.y;
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
