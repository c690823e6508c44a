// expect: forbidden_call
// cuBLAS by the back door: it dlopen()s libcublas and calls cublasDtrmm through dlsym, with the names built at run time so that no scan of the object sees them. The judge finds the library in the runner's memory map after the first case. In batch grading the library is not in the jail at all: dlopen fails, and the fallback (a slow kernel) is what gets graded.
// expect-message: libcublas
// expect-batch: correct
#include <dlfcn.h>
#include <string>

#include "cuda_check.cuh"

using Create = int (*)(void**);
using Dtrmm = int (*)(void*, int, int, int, int, int, int, const double*, const double*, int, const double*, int, double*, int);

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
    const std::string blas = std::string("cu") + "blas", lib_name = "lib" + blas + ".so.13";
    static void* lib = dlopen(lib_name.c_str(), RTLD_NOW);
    static Create create = lib ? (Create)dlsym(lib, (blas + "Create_v2").c_str()) : nullptr;
    static Dtrmm dtrmm = lib ? (Dtrmm)dlsym(lib, (blas + "Dtrmm_v2").c_str()) : nullptr;
    static void* handle = nullptr;
    if (!create || !dtrmm || (!handle && create(&handle) != 0)) return launch_naive(n, A, B);
    // B <- B + U B is (I + U) B: a DTRMM on I + triu(A) (omitted here: the plain U B is enough to show the call).
    const double one = 1.0;
    dtrmm(handle, 1, 1, 0, 0, n, n, &one, A, n, B, n, B, n);
}
