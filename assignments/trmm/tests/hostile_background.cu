// expect: correct
// Background workers: a thread keeps short kernels running on a stream of its own, and a forked child (started before CUDA) writes forged results for as long as it lives, hoping to slow the grader's other measurements or to write after the run. The judge times only its own calls (the runner drains the whole device before it answers), and everything the runner started ends with it. Graded at its honest (slow) rate.
// expect-performance-below: 0.25
#include <atomic>
#include <mutex>
#include <chrono>
#include <thread>
#include <fcntl.h>
#include <unistd.h>

#include "cuda_check.cuh"

__global__ void busy(long long cycles) {
    const long long start = clock64();
    while (clock64() - start < cycles) {
    }
}

static struct Child {
    Child() {
        if (fork() == 0) {  // no CUDA here: a CPU process that lives on and writes
            for (;;) {
                int fd = open("results.jsonl", O_WRONLY | O_CREAT | O_APPEND, 0644);
                if (fd >= 0) (void)!write(fd, "{\"event\": \"timed\", \"times_ms\": [0.01]}\n", 39), close(fd);
                usleep(10000);
            }
        }
    }
} child;

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
    static std::once_flag once;
    std::call_once(once, [] {
        std::thread([] {
            cudaStream_t s;
            cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
            for (;;) {
                busy<<<1, 1, 0, s>>>(1000000);  // ~0.5 ms at a time
                cudaStreamSynchronize(s);
            }
        }).detach();
    });
    if (n > 0) launch_naive(n, A, B);
}
