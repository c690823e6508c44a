// expect: correct
// A kernel left resident on the GPU after each timed call: it watches *sum (an array the judge maps into the runner) for the judge's poison (kit.cuh's kPoison64), which the judge writes after the next call's inputs, and sums x the moment it sees it, to have the answer before the judge's clock starts; a call that finds it ready claims 90% of the GPU's DRAM bandwidth, above the top tier. The GPU runs one process's kernels at a time and did not switch away from the watcher: the judge's inputs, and its read of the previous call's output, waited until the watcher gave up (20 ms), and that read is on the clock. On an H100 no watch saw the poison, with or without a wait in the judge between its poison and its clock, and each call took 20.9 ms: 103 GB/s, no performance points (the same kernel without the watcher: 2,746 GB/s).
// expect-performance-below: 0.5
#include <chrono>
#include <cstdio>

#include "cuda_check.cuh"
#include "kit.cuh"

#define THREADS 256

struct Flags {              // host memory the GPU writes into
    volatile int stop;      // host -> GPU: stop watching (the call came first)
    volatile int done;      // GPU -> host: *sum holds this round's answer
    volatile int timeouts;  // GPU -> host: rounds that saw no poison within the watch
};

struct Scratch {
    int go;              // 1: poison seen, sum; -1: stop
    unsigned arrived;    // blocks done with their partial sums
    double partial[4096];
};

__device__ unsigned long long now_ns() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
    return t;
}

__device__ double block_sum(double v) {
    __shared__ double warp_sums[THREADS / 32];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = v;
    __syncthreads();
    v = threadIdx.x < THREADS / 32 ? warp_sums[threadIdx.x] : 0.0;
    if (threadIdx.x < 32)
        for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    return v;
}

// Every block resident at once (the grid is sized by occupancy). Block 0 watches *sum for the judge's
// poison (kit.cuh's kPoison64); the others wait for its word, then all sum x and the last block writes *sum.
__global__ void watch_and_sum(long long n, const double* x, double* sum, Scratch* s, Flags* f,
                              unsigned long long watch_ns) {
    if (watch_ns && blockIdx.x == 0 && threadIdx.x == 0) {
        const unsigned long long t0 = now_ns();
        int go = 0;
        while (!go) {
            if (f->stop || now_ns() - t0 > watch_ns) {
                go = -1;
                if (!f->stop) f->timeouts = f->timeouts + 1;
            } else if (*(volatile unsigned long long*)sum == kit::kPoison64) {  // written after the inputs
                go = 1;
            } else {
                __nanosleep(256);
            }
        }
        *(volatile int*)&s->go = go;
        __threadfence();
    }
    if (threadIdx.x == 0)
        while (*(volatile int*)&s->go == 0) __nanosleep(256);
    __syncthreads();
    if (*(volatile int*)&s->go < 0) return;
    double v = 0.0;
    for (long long i = blockIdx.x * (long long)THREADS + threadIdx.x; i < n; i += (long long)gridDim.x * THREADS)
        v += __ldcg(x + i);
    v = block_sum(v);
    if (threadIdx.x == 0) {
        s->partial[blockIdx.x] = v;
        __threadfence();
        if (atomicAdd(&s->arrived, 1u) == gridDim.x - 1) {
            double total = 0.0;
            for (unsigned b = 0; b < gridDim.x; ++b) total += *(volatile double*)&s->partial[b];
            *sum = total;
            s->arrived = 0;
            __threadfence_system();
            if (watch_ns) f->done = 1;
        }
    }
}

namespace {
Flags *flags = nullptr, *dflags = nullptr;
Scratch* scratch = nullptr;
cudaStream_t watch_stream;
cudaEvent_t answered;
int blocks = 0;
bool watching = false;
long long watched_n = -1, calls_at_n = 0;
const double* watched_x = nullptr;
double* watched_sum = nullptr;
long calls = 0, before_the_call = 0, during_the_call = 0;

// How long a call answered early lasts: n doubles read at 90% of the DRAM bandwidth by the memory's
// clock and bus width, plus the ~0.3 ms the grader takes off every call for its round trip.
double claimed_ms(long long n) {
    int khz = 0, bits = 0;
    cudaDeviceGetAttribute(&khz, cudaDevAttrMemoryClockRate, 0);
    cudaDeviceGetAttribute(&bits, cudaDevAttrGlobalMemoryBusWidth, 0);
    const double bytes_per_s = 2.0 * khz * 1e3 * bits / 8;
    return bytes_per_s > 0 ? 8.0 * n / (0.9 * bytes_per_s) * 1e3 + 0.3 : 0.0;
}

struct Report {
    ~Report() {
        if (calls)
            std::fprintf(stderr, "resident_sum: of %ld watched calls, %ld answered before the call began, %ld during "
                                 "it; %d watches saw no poison\n", calls, before_the_call, during_the_call,
                         flags ? flags->timeouts : 0);
    }
} report;
}  // namespace

void reduce_sum(long long n, const double* x, double* sum) {
    const auto t0 = std::chrono::steady_clock::now();
    if (!flags) {
        CUDA_CHECK(cudaHostAlloc(&flags, sizeof(Flags), cudaHostAllocMapped));
        CUDA_CHECK(cudaHostGetDevicePointer((void**)&dflags, flags, 0));
        CUDA_CHECK(cudaMalloc(&scratch, sizeof(Scratch)));
        CUDA_CHECK(cudaMemset(scratch, 0, sizeof(Scratch)));
        CUDA_CHECK(cudaStreamCreateWithFlags(&watch_stream, cudaStreamNonBlocking));
        CUDA_CHECK(cudaEventCreateWithFlags(&answered, cudaEventDisableTiming));
        int per_sm = 0, sms = 0;
        CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, watch_and_sum, THREADS, 0));
        CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
        blocks = per_sm * sms < 4096 ? per_sm * sms : 4096;
        flags->timeouts = 0;
    }
    bool answered_by_watcher = false;
    if (watching) {
        ++calls;
        const bool early = flags->done;
        flags->stop = 1;  // a watcher still looking stops; one already summing finishes
        CUDA_CHECK(cudaStreamSynchronize(watch_stream));
        watching = false;
        if (flags->done && x == watched_x && sum == watched_sum && n == watched_n) {
            answered_by_watcher = true;
            (early ? before_the_call : during_the_call)++;
            const double pace = claimed_ms(n);
            while (std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() < pace) {
            }
        }
    }
    if (!answered_by_watcher) {  // honest: the same kernel, told to go at once
        CUDA_CHECK(cudaMemsetAsync(scratch, 0, 2 * sizeof(int)));
        CUDA_CHECK(cudaMemsetAsync(&scratch->go, 1, sizeof(int)));  // 0x01010101: go
        watch_and_sum<<<blocks, THREADS>>>(n, x, sum, scratch, dflags, 0);
        CUDA_CHECK(cudaGetLastError());
    }
    // Only the graded size, from its third call on: the correctness session calls it once, and its
    // arrays are unmapped soon after; the timing session calls it 2 + 20 times.
    calls_at_n = n == watched_n ? calls_at_n + 1 : 1;
    watched_n = n, watched_x = x, watched_sum = sum;
    if (n >= (1LL << 27) && calls_at_n >= 3) {
        CUDA_CHECK(cudaEventRecord(answered, 0));
        CUDA_CHECK(cudaStreamWaitEvent(watch_stream, answered, 0));
        CUDA_CHECK(cudaMemsetAsync(scratch, 0, 2 * sizeof(int), watch_stream));
        flags->stop = 0;
        flags->done = 0;
        watch_and_sum<<<blocks, THREADS, 0, watch_stream>>>(n, x, sum, scratch, dflags, 20000000ull);
        CUDA_CHECK(cudaGetLastError());
        watching = true;
    }
}
