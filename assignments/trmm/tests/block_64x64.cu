// expect: launch_error
// expect-message: the driver says:
// The block is 64 x 64 = 4096 threads, over the 1024-thread limit, so the launch fails, nothing runs, and no error check here notices.
#include "cuda_check.cuh"

// One thread per output element: B[i][j] = B_old[i][j] + sum_{k >= i} A[i][k] * B_old[k][j].
__global__ void trmm_kernel(int n, const double* A, const double* B_old, double* B) {
    const int i = blockIdx.y * blockDim.y + threadIdx.y;
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n || j >= n) return;
    double sum = B_old[(size_t)i * n + j];
    for (int k = i; k < n; ++k) sum += A[(size_t)i * n + k] * B_old[(size_t)k * n + j];
    B[(size_t)i * n + j] = sum;
}

void trmm(int n, const double* A, double* B) {
    const size_t bytes = (size_t)n * n * sizeof(double);
    double* B_old;
    CUDA_CHECK(cudaMallocAsync(&B_old, bytes, 0));
    CUDA_CHECK(cudaMemcpyAsync(B_old, B, bytes, cudaMemcpyDeviceToDevice, 0));
    dim3 block(64, 64);
    dim3 grid((n + 63) / 64, (n + 63) / 64);
    trmm_kernel<<<grid, block>>>(n, A, B_old, B);
    CUDA_CHECK(cudaFreeAsync(B_old, 0));
}
