// expect: race
// The last warp of the shared-memory tree runs six steps with no __syncwarp between them, trusting the warp to move in lockstep, which independent thread scheduling (Volta on) no longer promises, so racecheck reports the hazards even though the sum comes out right.
// expect-message: racecheck
#include "cuda_check.cuh"

#define THREADS 256  // a power of two >= 64, so tid + 32 stays inside the block's shared array

// Reduction #5 of "Optimizing Parallel Reduction in CUDA" (M. Harris): each thread adds two
// elements while loading, the block halves its partial sums in shared memory with a
// __syncthreads after each step until 64 remain, and the first warp finishes alone, with the
// barriers left out because "a warp executes in lockstep". That last assumption is the bug.
// Each block adds its total into *sum, which reduce_sum zeroes first.
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

    // The unrolled last warp. Thread t reads sdata[t + 16] in the second step while thread
    // t + 16 is writing it in the first or second one; nothing orders the two but the hope
    // that all 32 lanes execute each line together. The volatile pointer is the historic
    // half-fix: it makes the compiler load and store shared memory at every step (through a
    // plain pointer nvcc keeps sdata[tid] in a register, loads all six neighbours up front,
    // and the sum comes out wrong), but it does not synchronize the lanes.
    if (tid < 32) {
        volatile double* vs = sdata;
        vs[tid] += vs[tid + 32];
        vs[tid] += vs[tid + 16];
        vs[tid] += vs[tid + 8];
        vs[tid] += vs[tid + 4];
        vs[tid] += vs[tid + 2];
        vs[tid] += vs[tid + 1];
    }
    if (tid == 0) atomicAdd(sum, sdata[0]);
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
