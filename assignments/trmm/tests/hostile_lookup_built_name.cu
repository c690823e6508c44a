// expect: forbidden_call
// hostile_cubin.cu with the loader's name joined at run time from pieces, so that no string of the object names cuModuleLoadData: the scan, which read only the names the object holds, passed it (compiled here by nvcc 13: no finding). A kernel has no need of the runtime's or the driver's lookup of driver functions, and the lookup itself is refused.
// expect-message: cudaGetDriverEntryPointByVersion
#include <cuda.h>

#include <cstring>

#include "cuda_check.cuh"

static const char* const loader[] = {"cu", "Modu", "leLoad", "Data"};  // joined at run time
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
    char name[32] = {};
    for (const char* part : loader) strcat(name, part);
    void* load = nullptr;
    cudaDriverEntryPointQueryResult status;
    CUDA_CHECK(cudaGetDriverEntryPointByVersion(name, &load, 12000, cudaEnableDefault, &status));
    CUmodule module;
    if (!load || ((CUresult(*)(CUmodule*, const void*))load)(&module, cubin) != CUDA_SUCCESS) launch_naive(n, A, B);
}
