// expect: incorrect
// The per-thread and per-block partial sums are floats, so every element is rounded to 24 bits on the way in and the sum is off by 1e-9 to 1e-7 relative, far over the 1e-12 tolerance.
// expect-message: exceeds the tolerance
#include "cuda_check.cuh"

#define THREADS 256      // threads per block, a power of two for the shared-memory tree
#define MAX_BLOCKS 1024  // 1024 x 256 threads: each thread sums ~1000 elements at n = 2^28

// Pass 1: a grid-stride loop per thread, then a shared-memory tree with a __syncthreads after
// every step; block b writes its total to partials[b]. The structure is right, but the
// accumulator and the partials are single precision: half the shared memory and twice the
// add rate on a consumer GPU, and 24 bits of mantissa instead of 53.
__global__ void partial_sums(long long n, const double* x, float* partials) {
    __shared__ float sdata[THREADS];
    const unsigned tid = threadIdx.x;
    float s = 0.0f;
    for (long long i = (long long)blockIdx.x * THREADS + tid; i < n; i += (long long)gridDim.x * THREADS)
        s += (float)x[i];
    sdata[tid] = s;
    __syncthreads();
    for (unsigned step = THREADS / 2; step > 0; step >>= 1) {
        if (tid < step) sdata[tid] += sdata[tid + step];
        __syncthreads();
    }
    if (tid == 0) partials[blockIdx.x] = sdata[0];
}

// Pass 2: one block adds up the count partials the same way and writes *sum.
__global__ void final_sum(int count, const float* partials, double* sum) {
    __shared__ float sdata[THREADS];
    const unsigned tid = threadIdx.x;
    float s = 0.0f;
    for (int i = tid; i < count; i += THREADS) s += partials[i];
    sdata[tid] = s;
    __syncthreads();
    for (unsigned step = THREADS / 2; step > 0; step >>= 1) {
        if (tid < step) sdata[tid] += sdata[tid + step];
        __syncthreads();
    }
    if (tid == 0) *sum = (double)sdata[0];
}

void reduce_sum(long long n, const double* x, double* sum) {
    // The partials live across calls: a cudaMalloc per call would be timed too.
    static float* partials = nullptr;
    if (!partials) CUDA_CHECK(cudaMalloc(&partials, MAX_BLOCKS * sizeof(float)));
    long long blocks = (n + THREADS - 1) / THREADS;
    if (blocks > MAX_BLOCKS) blocks = MAX_BLOCKS;
    if (blocks < 1) blocks = 1;
    partial_sums<<<(int)blocks, THREADS>>>(n, x, partials);
    CUDA_CHECK(cudaGetLastError());
    final_sum<<<1, THREADS>>>((int)blocks, partials, sum);
    CUDA_CHECK(cudaGetLastError());
}
