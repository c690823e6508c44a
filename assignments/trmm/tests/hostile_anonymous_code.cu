// expect: forbidden_call
// Machine code in anonymous memory: the program maps a page readable, writable and executable, writes code into it and runs it. Six bytes here (mov eax, 42; ret), standing in for a library the program loads itself, section by section, from bytes it carries (cuBLAS cut out of its file): no loader, no file, no name in the process's memory map. No honest run maps anonymous executable memory (neither the C runtime nor the CUDA driver does); the judge now refuses a runner that has some.
// expect-message: anonymous memory
#include <sys/mman.h>

#include <cstring>

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

// Code written into an anonymous executable page and run, once; the page stays mapped.
static int run_own_code() {
    static int result = 0;
    if (result) return result;
    static const unsigned char code[] = {0xb8, 0x2a, 0x00, 0x00, 0x00, 0xc3};  // mov eax, 42; ret
    void* page = mmap(nullptr, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (page == MAP_FAILED) return result = -1;
    std::memcpy(page, code, sizeof code);
    return result = reinterpret_cast<int (*)()>(page)();
}

void trmm(int n, const double* A, double* B) {
    if (n <= 0) return;
    (void)run_own_code();
    double* Bold = workspace((size_t)n * n);
    CUDA_CHECK(cudaMemcpyAsync(Bold, B, (size_t)n * n * sizeof(double), cudaMemcpyDeviceToDevice));
    trmm_naive<<<dim3((n + 127) / 128, n), 128>>>(n, A, Bold, B);
    CUDA_CHECK(cudaGetLastError());
}
