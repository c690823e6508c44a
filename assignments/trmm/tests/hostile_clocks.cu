// expect: correct
// A forger of clocks: every clock of its own process (std::chrono's, clock_gettime, gettimeofday, time) runs at a tenth of the real pace, to hide 90% of its time from a timer in its process. The judge's clock is in another process: it is timed at its honest (slow) rate.
// expect-performance-below: 0.25
#include <chrono>
#include <ctime>
#include <sys/syscall.h>
#include <sys/time.h>
#include <unistd.h>

#include "cuda_check.cuh"

static long long real_ns() {
    struct timespec ts;
    syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}
static long long slow_ns() { return real_ns() / 10; }

extern "C" int clock_gettime(clockid_t, struct timespec* ts) noexcept {
    long long ns = slow_ns();
    ts->tv_sec = ns / 1000000000LL;
    ts->tv_nsec = ns % 1000000000LL;
    return 0;
}
extern "C" int gettimeofday(struct timeval* tv, void*) noexcept {
    long long ns = slow_ns();
    tv->tv_sec = ns / 1000000000LL;
    tv->tv_usec = (ns % 1000000000LL) / 1000;
    return 0;
}
extern "C" time_t time(time_t* t) noexcept {
    time_t s = slow_ns() / 1000000000LL;
    if (t) *t = s;
    return s;
}
namespace std::chrono {
steady_clock::time_point steady_clock::now() noexcept { return time_point(nanoseconds(slow_ns())); }
system_clock::time_point system_clock::now() noexcept { return time_point(duration_cast<system_clock::duration>(nanoseconds(slow_ns()))); }
}  // namespace std::chrono

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
    if (n > 0) launch_naive(n, A, B);
}
