// expect: correct
// A judge stalled between its inputs and its clock: 6000 idle threads, and a kernel kept resident that polls the input arrays (mapped into the runner) for the next call's. Where the runner has no cgroup of its own (a grader without root, or `grade` outside the jail), the judge counted the runner's other threads one /proc file each: reading 6000 took milliseconds after the inputs were written and before the clock started, and the watcher computed the whole call in them. The call then copied its answer in and paced itself to 16 TFLOPS, under the GPU's peak: graded on an H200 at 15,897 GFLOPS and full marks, against 8,803 for its tiled kernel alone. The judge now counts the threads before it writes the inputs: the tiled kernel's own rate, short of the top tier. (In the jail, a cgroup holds it to 512 threads and the judge reads the group's one cpu.stat file.)
// expect-performance-below: 1
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <thread>

#include "cuda_check.cuh"
#include "wire.h"

#define TILE 32
#define ROWS 8

// The honest part: the tiled kernel of nonblocking_stream.cu (B = B_old + triu(A) B_old).
__global__ void trmm_kernel(int n, const double* __restrict__ A, const double* __restrict__ B_old,
                            double* __restrict__ B) {
    __shared__ double As[TILE][TILE + 1];
    __shared__ double Bs[TILE][TILE];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int i0 = blockIdx.y * TILE;
    const int j = blockIdx.x * TILE + tx;
    double sum[TILE / ROWS] = {0.0, 0.0, 0.0, 0.0};
    const int ntiles = (n + TILE - 1) / TILE;
    for (int t = blockIdx.y; t < ntiles; ++t) {
        const int k0 = t * TILE;
        for (int r = ty; r < TILE; r += ROWS) {
            const int i = i0 + r, ka = k0 + tx, kb = k0 + r;
            As[r][tx] = (ka >= i && ka < n) ? A[(size_t)i * n + ka] : 0.0;
            Bs[r][tx] = (kb < n && j < n) ? B_old[(size_t)kb * n + j] : 0.0;
        }
        __syncthreads();
        for (int kk = 0; kk < TILE; ++kk) {
            const double b = Bs[kk][tx];
#pragma unroll
            for (int q = 0; q < TILE / ROWS; ++q) sum[q] += As[ty + q * ROWS][kk] * b;
        }
        __syncthreads();
    }
#pragma unroll
    for (int q = 0; q < TILE / ROWS; ++q) {
        const int i = i0 + ty + q * ROWS;
        if (i < n && j < n) B[(size_t)i * n + j] = B_old[(size_t)i * n + j] + sum[q];
    }
}

struct Flags {
    volatile int stop;    // host -> GPU: stop looking
    volatile int seen;    // GPU -> host: new inputs have landed
    volatile int differ;  // GPU -> host: the snapshot is not this call's B
    volatile double a0, a1, b0, b1;  // what A and B held at the end of the last call (B: its outputs)
};

// One thread, resident while the judge prepares the next call: waits for the judge's fill.
__global__ void watch_inputs(const volatile double* A, const volatile double* B, size_t count, Flags* f) {
    const double a0 = f->a0, a1 = f->a1, b0 = f->b0, b1 = f->b1;
    for (;;) {
        if (f->stop) return;
        if (A[0] != a0 && A[count - 1] != a1 && B[0] != b0 && B[count - 1] != b1) {
            f->seen = 1;
            return;
        }
        __nanosleep(2000);
    }
}

__global__ void remember(const double* A, const double* B, size_t count, Flags* f) {
    f->a0 = A[0], f->a1 = A[count - 1], f->b0 = B[0], f->b1 = B[count - 1];
}

__global__ void compare(const unsigned long long* x, const unsigned long long* y, size_t count, Flags* f) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count; i += (size_t)gridDim.x * blockDim.x)
        if (x[i] != y[i]) f->differ = 1;
}

namespace {

kit::wire::Doorbell* bell = nullptr;
Flags *flags = nullptr, *dflags = nullptr;
cudaStream_t ws;
std::mutex mu;
std::condition_variable cv;
struct Job {
    int n = 0;
    const double* A = nullptr;
    const double* B = nullptr;
    uint32_t call = 0;
} job, ready_for;
bool armed = false, busy = false, ready = false;
double *snap = nullptr, *answer = nullptr;
size_t capacity = 0;
long used_calls = 0, calls = 0;
int pipefd[2];

kit::wire::Doorbell* find_doorbell() {
    FILE* maps = std::fopen("/proc/self/maps", "r");
    char line[512];
    void* found = nullptr;
    while (maps && std::fgets(line, sizeof line, maps))
        if (std::strstr(line, "kit-doorbell")) std::sscanf(line, "%p", &found);
    if (maps) std::fclose(maps);
    return static_cast<kit::wire::Doorbell*>(found);
}

// The stall: idle threads, each of which the judge's around() reads before it starts its clock.
void* idle(void*) {
    char c;
    (void)!read(pipefd[0], &c, 1);
    return nullptr;
}
void raise_army(int want) {
    if (pipe(pipefd) != 0) return;
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setstacksize(&a, 32 << 10);
    for (int i = 0; i < want; ++i) {
        pthread_t t;
        if (pthread_create(&t, &a, idle, nullptr) != 0) {  // a pids.max or RLIMIT_NPROC: fewer, still fine,
            (void)!write(pipefd[1], "0123456789abcdef0123456789abcdef", 32);  // less 32 left for the runtime
            break;
        }
        pthread_detach(t);
    }
}

void watcher() {
    for (;;) {
        Job j;
        {
            std::unique_lock<std::mutex> lk(mu);
            cv.wait(lk, [] { return armed; });
            j = job;
            armed = false;
            busy = true;
        }
        // Once the runner has answered this call and the judge has read its outputs (its gather takes
        // microseconds; it then spends the stall in around(i, true)), look for the next call's inputs.
        bool go_on = true;
        while (go_on && bell->done.load() != j.call) {
            if (bell->go.load() != j.call) go_on = false;
            usleep(20);
        }
        if (go_on) usleep(1000);
        if (go_on && bell->go.load() == j.call) {
            const size_t count = (size_t)j.n * j.n;
            flags->stop = 0;
            flags->seen = 0;
            watch_inputs<<<1, 1, 0, ws>>>(j.A, j.B, count, dflags);
            while (cudaStreamQuery(ws) == cudaErrorNotReady) {
                if (bell->go.load() != j.call) flags->stop = 1;  // a call (or the case's end) came first
                usleep(20);
            }
            if (flags->seen) {  // off the clock: the judge is in around(i, false)
                cudaMemcpyAsync(snap, j.B, count * sizeof(double), cudaMemcpyDeviceToDevice, ws);
                trmm_kernel<<<dim3((j.n + TILE - 1) / TILE, (j.n + TILE - 1) / TILE), dim3(TILE, ROWS), 0, ws>>>(
                    j.n, j.A, snap, answer);
                cudaStreamSynchronize(ws);
                std::lock_guard<std::mutex> lk(mu);
                ready = true;
                ready_for = j;
            }
        }
        std::lock_guard<std::mutex> lk(mu);
        busy = false;
        cv.notify_all();
    }
}

struct Report {
    ~Report() {
        if (calls) std::fprintf(stderr, "judge_stall: %ld of %ld calls answered from the off-clock computation\n",
                                used_calls, calls);
    }
} report;

}  // namespace

void trmm(int n, const double* A, double* B) {
    if (n <= 0) return;
    const auto t0 = std::chrono::steady_clock::now();
    const size_t count = (size_t)n * n;
    static bool started = false;
    if (!started) {
        started = true;
        bell = find_doorbell();
        CUDA_CHECK(cudaHostAlloc(&flags, sizeof(Flags), cudaHostAllocMapped));
        CUDA_CHECK(cudaHostGetDevicePointer((void**)&dflags, flags, 0));
        CUDA_CHECK(cudaStreamCreateWithFlags(&ws, cudaStreamNonBlocking));
        if (bell) {
            std::thread(watcher).detach();
            raise_army(6000);
        }
    }
    if (count > capacity) {
        std::unique_lock<std::mutex> lk(mu);
        cv.wait(lk, [] { return !busy; });
        armed = ready = false;
        if (snap) CUDA_CHECK(cudaFree(snap)), CUDA_CHECK(cudaFree(answer));
        CUDA_CHECK(cudaMalloc(&snap, count * sizeof(double)));
        CUDA_CHECK(cudaMalloc(&answer, count * sizeof(double)));
        capacity = count;
    }
    ++calls;
    bool precomputed = false;
    if (flags) flags->stop = 1;  // a watcher still looking: stop (what it computes, it finishes)
    {
        std::unique_lock<std::mutex> lk(mu);
        armed = false;
        cv.wait(lk, [] { return !busy; });
        precomputed = ready && ready_for.n == n && ready_for.A == A && ready_for.B == B;
        ready = false;
    }
    bool used = false;
    if (precomputed) {
        flags->differ = 0;
        compare<<<1024, 256>>>((const unsigned long long*)snap, (const unsigned long long*)B, count, dflags);
        CUDA_CHECK(cudaDeviceSynchronize());
        if (!flags->differ) {
            CUDA_CHECK(cudaMemcpyAsync(B, answer, count * sizeof(double), cudaMemcpyDeviceToDevice));
            CUDA_CHECK(cudaDeviceSynchronize());
            used = true;
            ++used_calls;
            // The rate it chooses: 16 TFLOPS.
            const double pace_ms = (double)n * n * (n + 1) / 16e9;
            while (std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() < pace_ms) {
            }
        }
    }
    if (!used) {  // honest
        CUDA_CHECK(cudaMemcpyAsync(snap, B, count * sizeof(double), cudaMemcpyDeviceToDevice));
        trmm_kernel<<<dim3((n + TILE - 1) / TILE, (n + TILE - 1) / TILE), dim3(TILE, ROWS)>>>(n, A, snap, B);
        CUDA_CHECK(cudaGetLastError());
    }
    if (bell) {
        remember<<<1, 1>>>(A, B, count, dflags);
        std::lock_guard<std::mutex> lk(mu);
        job = {n, A, B, bell->go.load()};
        armed = true;
        cv.notify_all();
    }
}
