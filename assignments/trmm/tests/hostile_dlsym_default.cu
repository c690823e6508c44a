// expect: correct
// Looking in the process for a library function: dlsym(RTLD_DEFAULT, ...) for cublasDtrmm and for the driver's cuModuleLoadData finds nothing, since the runner links no library and exports nothing; the kernel falls back to a slow one and is graded at that rate. The names are strings, which the scan reads: spelled out here, they would be a forbidden call, so they are built at run time.
// expect-performance-below: 0.25
#include <dlfcn.h>
#include <string>

#include "cuda_check.cuh"

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
    const std::string blas = std::string("cubla") + "sDtrmm_v2", loader = std::string("cuModule") + "LoadData";
    static void* f = dlsym(RTLD_DEFAULT, blas.c_str());
    static void* g = dlsym(RTLD_DEFAULT, loader.c_str());
    if (n > 0) launch_naive(n, A, B);
    if (f || g) CUDA_CHECK(cudaMemset(B, 0, sizeof(double)));  // found something: spoil the answer
}
