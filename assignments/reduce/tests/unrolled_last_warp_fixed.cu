// expect: correct
// Nothing is wrong: the same kernel as unrolled_last_warp_race.cu, but the last warp puts a __syncwarp between every read of a neighbour's slot and every write to it, so racecheck has nothing to report.
#include "cuda_check.cuh"

#define THREADS 256  // a power of two >= 64, so tid + 32 stays inside the block's shared array

// Reduction #5 of "Optimizing Parallel Reduction in CUDA" (M. Harris), written for independent
// thread scheduling: each thread adds two elements while loading, the block halves its
// partial sums in shared memory with a __syncthreads after each step until 64 remain, and the
// first warp finishes alone, synchronizing with __syncwarp (a barrier for the 32 lanes only,
// much cheaper than __syncthreads). Each block adds its total into *sum, which reduce_sum
// zeroes first.
__global__ void block_sums(long long n, const double* x, double* sum) {
    __shared__ double sdata[THREADS];
    const unsigned tid = threadIdx.x;
    const long long i = (long long)blockIdx.x * (2 * THREADS) + tid;

    double v = 0.0;
    if (i < n) v = x[i];
    if (i + THREADS < n) v += x[i + THREADS];
    sdata[tid] = v;
    __syncthreads();

    for (unsigned s = THREADS / 2; s > 32; s >>= 1) {
        if (tid < s) sdata[tid] += sdata[tid + s];
        __syncthreads();
    }

    // The last warp. Each step reads a neighbour's slot into the register v, waits until every
    // lane has read (so no slot is overwritten while someone still needs its old value), then
    // writes its own slot and waits again (so the next step's reads see the new values).
    // __syncwarp also orders the shared-memory accesses, so no volatile is needed. Warp
    // shuffles (__shfl_down_sync) would do the same without shared memory at all.
    if (tid < 32) {
        v = sdata[tid] + sdata[tid + 32];
        __syncwarp();
        sdata[tid] = v;
        __syncwarp();
        v += sdata[tid + 16];
        __syncwarp();
        sdata[tid] = v;
        __syncwarp();
        v += sdata[tid + 8];
        __syncwarp();
        sdata[tid] = v;
        __syncwarp();
        v += sdata[tid + 4];
        __syncwarp();
        sdata[tid] = v;
        __syncwarp();
        v += sdata[tid + 2];
        __syncwarp();
        sdata[tid] = v;
        __syncwarp();
        v += sdata[tid + 1];  // lane 0 now holds the block's total
        if (tid == 0) atomicAdd(sum, v);
    }
}

void reduce_sum(long long n, const double* x, double* sum) {
    // The blocks add into *sum, so it starts at zero (all-zero bits are +0.0).
    CUDA_CHECK(cudaMemsetAsync(sum, 0, sizeof(double), 0));
    if (n <= 0) return;
    // 2 THREADS elements per block: n = 65536 is 128 blocks, n = 2^28 is 524288.
    const long long blocks = (n + 2 * THREADS - 1) / (2 * THREADS);
    block_sums<<<(unsigned)blocks, THREADS>>>(n, x, sum);
    CUDA_CHECK(cudaGetLastError());
}
