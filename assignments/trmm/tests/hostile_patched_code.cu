// expect: forbidden_call
// Code copied over the program's own: the runner makes a page of its own code writable, writes six bytes into it (mov eax, 42; ret), makes it executable again and runs it. The bytes stand in for a library's, carried in the program and copied over code already mapped (a padding function of the program, or a system library's code), where no new mapping shows and the map still names the program's file. The judge now refuses a mapping both writable and executable, and a file's code with pages the process has written to.
// expect-message: changed in memory
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
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

// A page of the program's own code, kept for the bytes written into it (page-aligned NOPs).
__attribute__((noinline, aligned(4096))) int slot() {
    asm volatile(".fill 4096, 1, 0x90");
    return 0;
}

// The bytes copied over the slot and run, once; the page is left as the program's own copy.
static int run_own_code() {
    static int result = 0;
    if (result) return result;
    static const unsigned char code[] = {0xb8, 0x2a, 0x00, 0x00, 0x00, 0xc3};  // mov eax, 42; ret
    const long size = sysconf(_SC_PAGESIZE);
    void* page = reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(&slot) & ~uintptr_t(size - 1));
    if (mprotect(page, size, PROT_READ | PROT_WRITE | PROT_EXEC) != 0) return result = -1;
    std::memcpy(reinterpret_cast<void*>(&slot), code, sizeof code);
    mprotect(page, size, PROT_READ | PROT_EXEC);
    return result = slot();
}

void trmm(int n, const double* A, double* B) {
    if (n <= 0) return;
    (void)run_own_code();
    double* Bold = workspace((size_t)n * n);
    CUDA_CHECK(cudaMemcpyAsync(Bold, B, (size_t)n * n * sizeof(double), cudaMemcpyDeviceToDevice));
    trmm_naive<<<dim3((n + 127) / 128, n), 128>>>(n, A, Bold, B);
    CUDA_CHECK(cudaGetLastError());
}
