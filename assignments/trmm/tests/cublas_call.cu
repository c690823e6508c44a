// expect: forbidden_call
// It hands the whole product to cublasDtrmm instead of writing a kernel, and library BLAS calls are not allowed.
// expect-message: cublasDtrmm
#include <cublas_v2.h>
#include "cuda_check.cuh"

// Build T = I + triu(A) (row-major), so that B_new = T * B_old is a single TRMM.
__global__ void build_t_kernel(int n, const double* A, double* T) {
    const int i = blockIdx.y * blockDim.y + threadIdx.y;
    const int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n || k >= n) return;
    const size_t idx = (size_t)i * n + k;
    T[idx] = (k >= i ? A[idx] : 0.0) + (k == i ? 1.0 : 0.0);
}

void trmm(int n, const double* A, double* B) {
    static cublasHandle_t handle = nullptr;
    if (!handle) cublasCreate(&handle);

    const size_t bytes = (size_t)n * n * sizeof(double);
    double* T;
    CUDA_CHECK(cudaMallocAsync(&T, bytes, 0));
    dim3 block(16, 16);
    dim3 grid((n + 15) / 16, (n + 15) / 16);
    build_t_kernel<<<grid, block>>>(n, A, T);
    CUDA_CHECK(cudaGetLastError());

    // cuBLAS is column-major: it sees row-major B as B^T and row-major T as T^T, which is
    // lower triangular. B_new = T B  <=>  B_new^T = B^T T^T, so multiply from the right by
    // a lower-triangular matrix, no transpose. Passing B as C makes it in place.
    const double one = 1.0;
    cublasDtrmm(handle, CUBLAS_SIDE_RIGHT, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_N,
                CUBLAS_DIAG_NON_UNIT, n, n, &one, T, n, B, n, B, n);
    CUDA_CHECK(cudaFreeAsync(T, 0));
}
