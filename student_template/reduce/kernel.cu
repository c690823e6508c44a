/*
reduce: the sum of a large FP64 array, s = x[0] + x[1] + ... + x[n-1].

x is a device pointer to n doubles, already allocated and filled; sum is a device pointer to
one double, where the result goes. The answer is defined by this sequential loop:

    double s = 0;
    for (long long i = 0; i < n; i++) s += x[i];
    *sum = s;

*sum holds garbage (NaN) when reduce_sum is called: it must be written, also for n = 1.
The graded size is n = 2^28, 2 GiB read once: the sum is limited by memory bandwidth, so the
goal is to read x once, at full speed, with every SM busy.

The grader calls reduce_sum(n, x, sum), then cudaDeviceSynchronize(), and checks *sum.
Everything reduce_sum does is timed, allocations included.
*/

#include "cuda_check.cuh"

// TODO: each block sums its share of x and writes one partial sum per block.
__global__ void reduce_kernel(long long n, const double* x, double* partials) {
    // TODO: each thread adds up several elements in a register first (a grid-stride loop,
    // i = blockIdx.x * blockDim.x + threadIdx.x, then i += gridDim.x * blockDim.x), so the
    // grid does not need one thread per element.
    //
    // TODO: then combine the threads' sums within the block. The classic way is a tree in
    // shared memory: every thread stores its value in sdata[tid], then (with a power-of-two
    // block size) for s = blockDim.x / 2 down to 1, threads tid < s do
    // sdata[tid] += sdata[tid + s], with __syncthreads() after each step so that no thread
    // reads a value before it is written.
    // Hint: stopping the barriers at 32 and letting the last warp finish alone is a famous
    // optimization, but on today's GPUs the threads of a warp are not in lockstep: that last
    // warp still needs __syncwarp() between its steps (or warp shuffles, __shfl_down_sync,
    // which avoid shared memory altogether).
    //
    // TODO: thread 0 writes the block's total to partials[blockIdx.x].
}

void reduce_sum(long long n, const double* x, double* sum) {
    // TODO 1: pick a block size (at most 1024 threads) and a number of blocks. A few blocks
    // per SM is enough to keep memory busy when each thread loops over many elements.
    //
    // TODO 2: a workspace for the partial sums, one double per block. Keep it between calls
    // (a static pointer, allocated once): a cudaMalloc on every call is part of the timing.
    //
    // TODO 3: launch reduce_kernel<<<blocks, threads>>>(n, x, partials), then check for
    // launch errors with CUDA_CHECK(cudaGetLastError()).
    //
    // TODO 4: combine the partials into *sum: a second launch with a single block that sums
    // them the same way works well (or atomicAdd(sum, ...) from each block, after setting
    // *sum to zero first).
    (void)n;
    (void)x;
    (void)sum;
}
