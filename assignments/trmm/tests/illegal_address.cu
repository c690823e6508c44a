// expect: runtime_error
// The workspace pointer is never allocated, so the copy kernel writes B_old through a null pointer and every size faults with an illegal address.
// expect-message: cudaErrorIllegalAddress
#include "cuda_check.cuh"

// B_old lives here. The cudaMalloc that should fill it in was never written.
static double* B_old = nullptr;

__global__ void copy_kernel(size_t count, const double* src, double* dst) {
    const size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < count) dst[idx] = src[idx];
}

// One thread per output element: B[i][j] = B_old[i][j] + sum_{k >= i} A[i][k] * B_old[k][j].
__global__ void trmm_kernel(int n, const double* A, const double* Bold, double* B) {
    const int i = blockIdx.y * blockDim.y + threadIdx.y;
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n || j >= n) return;
    double sum = Bold[(size_t)i * n + j];
    for (int k = i; k < n; ++k) sum += A[(size_t)i * n + k] * Bold[(size_t)k * n + j];
    B[(size_t)i * n + j] = sum;
}

void trmm(int n, const double* A, double* B) {
    const size_t count = (size_t)n * n;
    copy_kernel<<<(unsigned)((count + 255) / 256), 256>>>(count, B, B_old);
    CUDA_CHECK(cudaGetLastError());
    dim3 block(16, 16);
    dim3 grid((n + 15) / 16, (n + 15) / 16);
    trmm_kernel<<<grid, block>>>(n, A, B_old, B);
    CUDA_CHECK(cudaGetLastError());
}
