// expect: forbidden_call
// A prebuilt GPU binary: it would load a cubin (e.g. one cut out of a library) with cuModuleLoadData, found through the runtime's driver entry point, and launch its kernels: code no one compiled from this kernel.cu. Loading GPU code at run time is refused by the scan.
// expect-message: cuModuleLoadData
#include <cuda.h>

#include "cuda_check.cuh"

static const unsigned char cubin[64] = {0x7f, 'E', 'L', 'F'};  // stands for a binary cut from a library

// The honest part: one thread per element of B, reading B_old from a workspace copy.
__global__ void trmm_naive(int n, const double* A, const double* Bold, double* B) {
    const int j = blockIdx.x * blockDim.x + threadIdx.x, i = blockIdx.y;
    if (i >= n || j >= n) return;
    double s = Bold[(size_t)i * n + j];
    for (int k = i; k < n; ++k) s += A[(size_t)i * n + k] * Bold[(size_t)k * n + j];
    B[(size_t)i * n + j] = s;
}

static double* workspace(size_t count) {
    static double* buf = nullptr;
    static size_t capacity = 0;
    if (count > capacity) {
        if (buf) CUDA_CHECK(cudaFree(buf));
        CUDA_CHECK(cudaMalloc(&buf, count * sizeof(double)));
        capacity = count;
    }
    return buf;
}

static void launch_naive(int n, const double* A, double* B, cudaStream_t stream = 0) {
    double* Bold = workspace((size_t)n * n);
    CUDA_CHECK(cudaMemcpyAsync(Bold, B, (size_t)n * n * sizeof(double), cudaMemcpyDeviceToDevice, stream));
    trmm_naive<<<dim3((n + 127) / 128, n), 128, 0, stream>>>(n, A, Bold, B);
    CUDA_CHECK(cudaGetLastError());
}

void trmm(int n, const double* A, double* B) {
    if (n <= 0) return;
    void* load = nullptr;
    cudaDriverEntryPointQueryResult status;
    CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuModuleLoadData", &load, 12000, cudaEnableDefault, &status));
    CUmodule module;
    if (!load || ((CUresult(*)(CUmodule*, const void*))load)(&module, cubin) != CUDA_SUCCESS) launch_naive(n, A, B);
}
