// expect: timeout
// Every thread spin-waits for a ready flag that nothing ever sets, so the kernel never finishes.
// expect-message: did not finish
#include "cuda_check.cuh"

// Meant to be raised by the host (cudaMemcpyToSymbol) once B_old is in place; that call
// was never written, so the flag stays 0. It is a device global read through a volatile
// pointer, so the compiler must reload it on every pass and cannot drop the loop.
__device__ int g_ready = 0;

// One thread per output element: B[i][j] = B_old[i][j] + sum_{k >= i} A[i][k] * B_old[k][j].
__global__ void trmm_kernel(int n, const double* A, const double* B_old, double* B) {
    while (*(volatile int*)&g_ready == 0) {
    }
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
    dim3 block(16, 16);
    dim3 grid((n + 15) / 16, (n + 15) / 16);
    trmm_kernel<<<grid, block>>>(n, A, B_old, B);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaFreeAsync(B_old, 0));
}
