// expect: incorrect
// A false "done": it starts its kernel, then finds the judge's doorbell in its own memory (the page mapped from the memfd "kit-doorbell", laid out as wire.h says) and answers "done" at once, while the kernel runs. The judge takes the outputs in hand at that moment and finds them unfinished; the clock would have run until it had them anyway.
#include <cstdio>
#include <cstring>

#include "cuda_check.cuh"
#include "wire.h"

static kit::wire::Doorbell* find_doorbell() {
    FILE* maps = std::fopen("/proc/self/maps", "r");
    char line[512];
    void* found = nullptr;
    while (maps && std::fgets(line, sizeof line, maps))
        if (std::strstr(line, "kit-doorbell")) std::sscanf(line, "%p", &found);
    if (maps) std::fclose(maps);
    return static_cast<kit::wire::Doorbell*>(found);
}

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
    launch_naive(n, A, B);
    if (kit::wire::Doorbell* bell = find_doorbell()) bell->done.store(bell->go.load());  // "done", too early
}
