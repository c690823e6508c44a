// expect: correct
// Short kernels queued one after another from a second thread after each timed call, the runner's GPU context idle for a moment between them: each checks *sum for the judge's poison (kit.cuh's kPoison64), which the judge writes after the next call's inputs, and where it finds it sums x; a call that finds the answer ready claims 90% of the GPU's DRAM bandwidth, above the top tier. The judge prepares a run in one submission (inputs, poison, L2 flush, with no wait of its own between them), so no check runs between its poison and its clock: on an H200 none of 27 calls was answered early, and its honest kernel (an eighth of the grid, slow on purpose) ran at 587 GB/s, no performance points. A judge that waited for its GPU between the poison and the flush let 23 of 27 calls be answered early: 3,995 GB/s and full marks, which fails this test (on an H100: 22 of 27 so, none without the wait).
// expect-performance-below: 0.9
#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>

#include "cuda_check.cuh"
#include "kit.cuh"

#define THREADS 256

struct Flags {          // host memory the GPU writes into
    volatile int done;  // *sum holds the answer to the inputs the judge poisoned last
};

struct Scratch {
    unsigned arrived;  // blocks done
    unsigned saw;      // blocks that found the poison
    double partial[4096];
};

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

// The sum of x into *sum; with `check`, only where *sum holds the poison (every block reads *sum before
// the last block, which writes it, arrives). The whole grid is resident at once (sized by occupancy).
__global__ void sum_kernel(long long n, const double* x, double* sum, Scratch* s, Flags* f, int check) {
    __shared__ int go;
    if (threadIdx.x == 0) go = !check || *(volatile unsigned long long*)sum == kit::kPoison64;
    __syncthreads();
    double v = 0.0;
    if (go)
        for (long long i = blockIdx.x * (long long)THREADS + threadIdx.x; i < n; i += (long long)gridDim.x * THREADS)
            v += __ldcg(x + i);
    v = block_sum(v);
    if (threadIdx.x == 0) {
        s->partial[blockIdx.x] = v;
        if (go) atomicAdd(&s->saw, 1u);
        __threadfence();
        if (atomicAdd(&s->arrived, 1u) == gridDim.x - 1) {
            if (*(volatile unsigned*)&s->saw == gridDim.x) {
                double total = 0.0;
                for (unsigned b = 0; b < gridDim.x; ++b) total += *(volatile double*)&s->partial[b];
                *sum = total;
                __threadfence_system();
                if (check) f->done = 1;
            }
            s->arrived = 0;
            s->saw = 0;
        }
    }
}

namespace {
Flags *flags, *dflags;
Scratch* scratch;
cudaStream_t fs;
int blocks;
std::atomic<int> flooding{0};
std::thread flooder;
long calls = 0, early = 0, kernels = 0;
struct Report {
    ~Report() {
        if (flooder.joinable()) flooding = 0, flooder.join();
        if (calls)
            std::fprintf(stderr, "flood_sum: of %ld flooded calls, %ld answered before the call began (%ld checks)\n",
                         calls, early, kernels);
    }
} report;

// How long a call answered early lasts: n doubles read at 90% of the DRAM bandwidth by the memory's
// clock and bus width, plus the ~0.3 ms the grader takes off every call for its round trip.
double claimed_ms(long long n) {
    int khz = 0, bits = 0;
    cudaDeviceGetAttribute(&khz, cudaDevAttrMemoryClockRate, 0);
    cudaDeviceGetAttribute(&bits, cudaDevAttrGlobalMemoryBusWidth, 0);
    const double bytes_per_s = 2.0 * khz * 1e3 * bits / 8;
    return bytes_per_s > 0 ? 8.0 * n / (0.9 * bytes_per_s) * 1e3 + 0.3 : 0.0;
}
}  // namespace

void reduce_sum(long long n, const double* x, double* sum) {
    const auto t0 = std::chrono::steady_clock::now();
    if (!flags) {
        CUDA_CHECK(cudaHostAlloc(&flags, sizeof(Flags), cudaHostAllocMapped));
        CUDA_CHECK(cudaHostGetDevicePointer((void**)&dflags, flags, 0));
        CUDA_CHECK(cudaMalloc(&scratch, sizeof(Scratch)));
        CUDA_CHECK(cudaMemset(scratch, 0, sizeof(Scratch)));
        CUDA_CHECK(cudaStreamCreateWithFlags(&fs, cudaStreamNonBlocking));
        int per_sm = 0, sms = 0;
        CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, sum_kernel, THREADS, 0));
        CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
        blocks = per_sm * sms < 4096 ? per_sm * sms : 4096;
    }
    static long long at_n = 0, last_n = -1;  // calls in a row at this n
    bool answered = false;
    if (flooder.joinable()) {
        ++calls;
        const bool ready = flags->done;
        flooding = 0;
        flooder.join();
        if (ready) {
            answered = true;
            ++early;
            const double pace = claimed_ms(n);
            while (std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() < pace) {
            }
        }
    }
    if (!answered) {  // honest, and slow on purpose (an eighth of the grid): only early answers score high
        sum_kernel<<<blocks / 8 > 0 ? blocks / 8 : 1, THREADS>>>(n, x, sum, scratch, dflags, 0);
        CUDA_CHECK(cudaGetLastError());
        CUDA_CHECK(cudaDeviceSynchronize());
    }
    at_n = n == last_n ? at_n + 1 : 1;
    last_n = n;
    // Only the graded size, from its third call on (the correctness session calls it once).
    if (n >= (1LL << 27) && at_n >= 3) {
        flags->done = 0;
        flooding = 1;
        flooder = std::thread([=] {
            std::this_thread::sleep_for(std::chrono::microseconds(300));  // the judge reads this call's answer
            const auto t0 = std::chrono::steady_clock::now();
            while (flooding && !flags->done && std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(200)) {
                sum_kernel<<<blocks, THREADS, 0, fs>>>(n, x, sum, scratch, dflags, 1);
                cudaStreamSynchronize(fs);
                ++kernels;
            }
        });
    }
}
