// expect: forbidden_call
// A prebuilt GPU binary through the runtime's library API: cudaLibraryLoadData and cudaLibraryGetKernel called directly, not through CUDA_CHECK (whose message would put the call's text among the object's strings), so the loader's name is nowhere in the object but its symbol table. The scan read only the strings for loaders: graded on an H200 with a real image (the kit's tiled kernel compiled apart), it was correct at that kernel's rate, and a kernel cut out of a library would have run the same way. The scan now reads the symbols for them too: loading GPU code at run time is refused.
// expect-message: cudaLibraryLoadData
#include <cstdlib>

#include "cuda_check.cuh"

static const unsigned char image[64] = {0x7f, 'E', 'L', 'F'};  // stands for a binary cut from a library

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

// The library's kernel, or null where the image does not load (this stand-in never does).
static cudaKernel_t prebuilt() {
    static bool tried = false;
    static cudaKernel_t kernel = nullptr;
    if (tried) return kernel;
    tried = true;
    char name[] = {'t', 'r', 'm', 'm', 0};
    cudaLibrary_t lib;
    if (cudaLibraryLoadData(&lib, image, nullptr, nullptr, 0, nullptr, nullptr, 0) != cudaSuccess ||
        cudaLibraryGetKernel(&kernel, lib, name) != cudaSuccess)
        kernel = nullptr;
    (void)cudaGetLastError();
    return kernel;
}

void trmm(int n, const double* A, double* B) {
    if (n <= 0) return;
    double* Bold = workspace((size_t)n * n);
    CUDA_CHECK(cudaMemcpyAsync(Bold, B, (size_t)n * n * sizeof(double), cudaMemcpyDeviceToDevice));
    void* args[] = {&n, &A, &Bold, &B};
    if (cudaKernel_t k = prebuilt())
        (void)cudaLaunchKernel((const void*)k, dim3((n + 31) / 32, (n + 31) / 32), dim3(32, 8), args, 0, 0);
    else
        trmm_naive<<<dim3((n + 127) / 128, n), 128>>>(n, A, Bold, B);
    CUDA_CHECK(cudaGetLastError());
}
