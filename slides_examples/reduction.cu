// reduction.cu: the sum of 2^28 doubles, the course's reduction report (after Mark Harris,
// "Optimizing Parallel Reduction in CUDA") as a progression.
//
// Every kernel reduces each block's slice to one partial sum; the launcher repeats passes over the
// partial sums until one value is left. 256 threads per block.
//
//   v1  interleaved addressing, divergent branches
//         `if (tid % (2*s) == 0)`: in every step the active threads are scattered over all warps,
//         so every warp stays busy with mostly idle lanes, and % is slow.
//   v2  interleaved addressing, strided index
//         index = 2*s*tid: the active threads are packed into the first warps (no divergence),
//         but their shared-memory addresses are 2s apart: many threads of a warp hit the same
//         bank (bank conflicts), and the accesses are serialized.
//   v3  sequential addressing
//         `if (tid < s) sdata[tid] += sdata[tid + s]`: consecutive threads, consecutive
//         addresses, no conflicts. But half of the threads are idle from the first step on.
//   v4  first add during load
//         Each thread loads two elements and adds them before the tree: half the blocks, and
//         no thread idle in the first step.
//   v5  last warp unrolled (correct for independent thread scheduling)
//         When s <= 32 only one warp is left: no __syncthreads needed, and the loop overhead
//         goes. Since Volta the lanes of a warp are not guaranteed to run in lockstep, so each
//         step reads, then __syncwarp(), then writes, then __syncwarp() (see warp_reduce_smem).
//   v6  warp shuffles
//         The tree inside a warp goes through registers (__shfl_down_sync): no shared memory,
//         no __syncwarp. Shared memory keeps only one value per warp.
//   v7  many elements per thread (grid-stride loop), then v6's shuffles
//         Only as many blocks as fill the GPU; each thread sums many elements in a register
//         first. The tree's cost is paid once per thread instead of once per two elements, and
//         the loads stream at DRAM speed.
//   v8  CUB: cub::DeviceReduce::Sum, the library.
//   v9  aside: the historic unrolled last warp, with neither volatile nor __syncwarp
//         Incorrect on Volta and later (a race): see warp_reduce_historic. Not in the progression.
//
// Inputs are whole numbers in [0, 15] stored as doubles, so every partial sum is exact and any
// summation order gives exactly the same result: the check is exact equality with the CPU's sum.
// Checked at n = 1, 31 and 1,000,003, then at the timed n = 2^28 (2 GiB). Rate: GB/s = 8 n / time.
#include "common.cuh"

#include <cub/cub.cuh>

using slides::Version;

static const Version kVersions[] = {
    {"interleaved addressing, divergent branches"},
    {"interleaved addressing, strided index (bank conflicts)"},
    {"sequential addressing"},
    {"first add during load"},
    {"last warp unrolled (__syncwarp)"},
    {"warp shuffles"},
    {"many elements per thread (grid-stride)"},
    {"CUB DeviceReduce::Sum"},
    {"historic unrolled last warp (no volatile, no __syncwarp)", false,
     "incorrect on Volta+ (race): shown for the lesson, not in the progression"},
};
static const int kCount = sizeof(kVersions) / sizeof(kVersions[0]);

#define BS 256  // threads per block

// The input: x[i] = a whole number in [0, 15] from a hash of i, computed the same on both sides.
__host__ __device__ inline double value(long long i) {
    unsigned long long z = (unsigned long long)i * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 31)) * 0xBF58476D1CE4E5B9ull;
    return double((z >> 40) & 15);
}

__global__ void fill(long long n, double* x) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        x[i] = value(i);
}

// CPU reference: exact, since every partial sum is a whole number below 2^53.
static double reduce_cpu(long long n) {
    double s = 0;
    for (long long i = 0; i < n; ++i) s += value(i);
    return s;
}

// ------------------------------------------------------------------------------------------------
// v1: interleaved addressing with divergent branches.
__global__ void reduce_interleaved_divergent(long long n, const double* in, double* out) {
    __shared__ double sdata[BS];
    unsigned tid = threadIdx.x;
    long long i = blockIdx.x * (long long)BS + tid;
    sdata[tid] = i < n ? in[i] : 0.0;
    __syncthreads();
    for (unsigned s = 1; s < BS; s *= 2) {
        if (tid % (2 * s) == 0) sdata[tid] += sdata[tid + s];
        __syncthreads();
    }
    if (tid == 0) out[blockIdx.x] = sdata[0];
}

// v2: interleaved addressing with a strided index: no divergence, but bank conflicts.
__global__ void reduce_interleaved_strided(long long n, const double* in, double* out) {
    __shared__ double sdata[BS];
    unsigned tid = threadIdx.x;
    long long i = blockIdx.x * (long long)BS + tid;
    sdata[tid] = i < n ? in[i] : 0.0;
    __syncthreads();
    for (unsigned s = 1; s < BS; s *= 2) {
        unsigned index = 2 * s * tid;
        if (index < BS) sdata[index] += sdata[index + s];
        __syncthreads();
    }
    if (tid == 0) out[blockIdx.x] = sdata[0];
}

// v3: sequential addressing.
__global__ void reduce_sequential(long long n, const double* in, double* out) {
    __shared__ double sdata[BS];
    unsigned tid = threadIdx.x;
    long long i = blockIdx.x * (long long)BS + tid;
    sdata[tid] = i < n ? in[i] : 0.0;
    __syncthreads();
    for (unsigned s = BS / 2; s > 0; s >>= 1) {
        if (tid < s) sdata[tid] += sdata[tid + s];
        __syncthreads();
    }
    if (tid == 0) out[blockIdx.x] = sdata[0];
}

// Two elements per thread, added during the load (v4 to v6, v9): a block covers 2 * BS elements.
__device__ inline double load_two(long long n, const double* in) {
    long long i = blockIdx.x * (2LL * BS) + threadIdx.x;
    double x = i < n ? in[i] : 0.0;
    if (i + BS < n) x += in[i + BS];
    return x;
}

// v4: first add during load, then v3's tree.
__global__ void reduce_first_add(long long n, const double* in, double* out) {
    __shared__ double sdata[BS];
    unsigned tid = threadIdx.x;
    sdata[tid] = load_two(n, in);
    __syncthreads();
    for (unsigned s = BS / 2; s > 0; s >>= 1) {
        if (tid < s) sdata[tid] += sdata[tid + s];
        __syncthreads();
    }
    if (tid == 0) out[blockIdx.x] = sdata[0];
}

// The last warp, correct under independent thread scheduling (Volta and later). Lane t reads
// sdata[t + s] while lane t + s may be writing sdata[t + s] in the same step: the reads of a
// step must all happen before any write of that step, and the writes before the next step's
// reads. __syncwarp() orders them (and is a memory fence among the warp's lanes, so no
// volatile is needed).
__device__ inline void warp_reduce_smem(double* sdata, unsigned tid) {
    double x = sdata[tid];
#pragma unroll
    for (unsigned s = 32; s > 0; s >>= 1) {
        x += sdata[tid + s];
        __syncwarp();
        sdata[tid] = x;
        __syncwarp();
    }
}

// v5: v4 with the last warp unrolled.
__global__ void reduce_unroll_last_warp(long long n, const double* in, double* out) {
    __shared__ double sdata[BS];
    unsigned tid = threadIdx.x;
    sdata[tid] = load_two(n, in);
    __syncthreads();
    for (unsigned s = BS / 2; s > 32; s >>= 1) {
        if (tid < s) sdata[tid] += sdata[tid + s];
        __syncthreads();
    }
    if (tid < 32) warp_reduce_smem(sdata, tid);
    if (tid == 0) out[blockIdx.x] = sdata[0];
}

// The historic form (2007, the G80 era), kept for the lesson. It relied on the 32 lanes of a
// warp executing each instruction together (lockstep), so no synchronization seemed needed:
//
//     if (tid < 32) { sdata[tid] += sdata[tid + 32]; sdata[tid] += sdata[tid + 16]; ... }
//
// Two things are wrong with it:
//   1. Without `volatile`, the compiler may keep sdata[tid] in a register across the steps and
//      read sdata[tid + 16] before lane tid + 16 has stored its new value: stale partial sums.
//      The 2007 slides added `volatile` for this.
//   2. Since Volta (independent thread scheduling) even `volatile` is not enough: lanes of a
//      warp may be at different steps, so lane t can read sdata[t + s] before or after lane
//      t + s writes it. A race: the result may be right on one run and wrong on the next.
// The fix is v5's read / __syncwarp() / write / __syncwarp(), or v6's shuffles.
__device__ inline void warp_reduce_historic(double* sdata, unsigned tid) {
    sdata[tid] += sdata[tid + 32];
    sdata[tid] += sdata[tid + 16];
    sdata[tid] += sdata[tid + 8];
    sdata[tid] += sdata[tid + 4];
    sdata[tid] += sdata[tid + 2];
    sdata[tid] += sdata[tid + 1];
}

// v9: v5 with the historic last warp.
__global__ void reduce_historic_last_warp(long long n, const double* in, double* out) {
    __shared__ double sdata[BS];
    unsigned tid = threadIdx.x;
    sdata[tid] = load_two(n, in);
    __syncthreads();
    for (unsigned s = BS / 2; s > 32; s >>= 1) {
        if (tid < s) sdata[tid] += sdata[tid + s];
        __syncthreads();
    }
    if (tid < 32) warp_reduce_historic(sdata, tid);
    if (tid == 0) out[blockIdx.x] = sdata[0];
}

// A warp's sum through registers: after 5 shuffles lane 0 holds the sum of the 32 lanes.
__device__ inline double warp_sum(double x) {
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) x += __shfl_down_sync(0xffffffffu, x, off);
    return x;
}

// A block's sum: each warp by shuffles, the BS / 32 warp sums through shared memory, then the
// first warp by shuffles again. The result is valid in thread 0.
__device__ inline double block_sum(double x) {
    __shared__ double warp_sums[BS / 32];
    unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    x = warp_sum(x);
    if (lane == 0) warp_sums[warp] = x;
    __syncthreads();
    x = threadIdx.x < BS / 32 ? warp_sums[threadIdx.x] : 0.0;
    if (warp == 0) x = warp_sum(x);
    return x;
}

// v6: v4's load, then shuffles instead of the shared-memory tree.
__global__ void reduce_shuffle(long long n, const double* in, double* out) {
    double x = block_sum(load_two(n, in));
    if (threadIdx.x == 0) out[blockIdx.x] = x;
}

// v7: a grid-stride loop: each thread sums n / (grid * BS) elements in a register, then v6.
__global__ void reduce_grid_stride(long long n, const double* in, double* out) {
    double x = 0.0;
    long long stride = (long long)gridDim.x * BS;
    for (long long i = blockIdx.x * (long long)BS + threadIdx.x; i < n; i += stride) x += in[i];
    x = block_sum(x);
    if (threadIdx.x == 0) out[blockIdx.x] = x;
}

// ------------------------------------------------------------------------------------------------
struct Scratch {
    double* partial[2];  // partial sums of one pass, the next pass's input
    void* cub_temp = nullptr;
    size_t cub_bytes = 0;
    int grid_stride_blocks = 0;  // v7: enough blocks to fill the GPU
};

// Passes of version v's kernel until one value is left, then that value to *sum.
static void reduce(int v, long long n, const double* in, double* sum, Scratch& s) {
    if (v == 8) {
        CUDA_CHECK(cub::DeviceReduce::Sum(s.cub_temp, s.cub_bytes, in, sum, n));
        return;
    }
    const double* src = in;
    long long count = n;
    int pass = 0;
    do {
        long long per_block = v <= 3 ? BS : 2 * BS;
        long long blocks = (count + per_block - 1) / per_block;
        if (v == 7) blocks = std::min<long long>((count + BS - 1) / BS, s.grid_stride_blocks);
        double* dst = s.partial[pass % 2];
        switch (v) {
        case 1: reduce_interleaved_divergent<<<blocks, BS>>>(count, src, dst); break;
        case 2: reduce_interleaved_strided<<<blocks, BS>>>(count, src, dst); break;
        case 3: reduce_sequential<<<blocks, BS>>>(count, src, dst); break;
        case 4: reduce_first_add<<<blocks, BS>>>(count, src, dst); break;
        case 5: reduce_unroll_last_warp<<<blocks, BS>>>(count, src, dst); break;
        case 6: reduce_shuffle<<<blocks, BS>>>(count, src, dst); break;
        case 7: reduce_grid_stride<<<blocks, BS>>>(count, src, dst); break;
        case 9: reduce_historic_last_warp<<<blocks, BS>>>(count, src, dst); break;
        }
        CUDA_CHECK(cudaGetLastError());
        src = dst;
        count = blocks;
        ++pass;
    } while (count > 1);
    CUDA_CHECK(cudaMemcpyAsync(sum, src, sizeof(double), cudaMemcpyDeviceToDevice));
}

// ------------------------------------------------------------------------------------------------
int main(int argc, char** argv) {
    slides::Bench bench(argc, argv, "reduction", "dram", kVersions, kCount);
    const long long n = 1LL << 28;  // 2 GiB: ~0.5 ms at H100/H200 DRAM speed
    const long long check_sizes[] = {1, 31, 1000003};

    double *dx, *dsum;
    Scratch s;
    CUDA_CHECK(cudaMalloc(&dx, n * sizeof(double)));
    CUDA_CHECK(cudaMalloc(&dsum, sizeof(double)));
    long long max_partials = (n + BS - 1) / BS;
    CUDA_CHECK(cudaMalloc(&s.partial[0], max_partials * sizeof(double)));
    CUDA_CHECK(cudaMalloc(&s.partial[1], max_partials * sizeof(double)));
    CUDA_CHECK(cub::DeviceReduce::Sum(nullptr, s.cub_bytes, dx, dsum, n));
    CUDA_CHECK(cudaMalloc(&s.cub_temp, s.cub_bytes));
    int blocks_per_sm = 0;
    CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks_per_sm, reduce_grid_stride, BS, 0));
    s.grid_stride_blocks = std::max(1, blocks_per_sm) * bench.prop().multiProcessorCount;
    fill<<<4096, 256>>>(n, dx);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaDeviceSynchronize());

    std::vector<double> refs;
    for (long long m : check_sizes) refs.push_back(reduce_cpu(m));
    const double ref_full = reduce_cpu(n);

    auto result = [&](int v, long long m) {
        const double nan = NAN;  // poisoned: a version that writes nothing fails
        CUDA_CHECK(cudaMemcpy(dsum, &nan, sizeof(double), cudaMemcpyHostToDevice));
        reduce(v, m, dx, dsum, s);
        double out;
        CUDA_CHECK(cudaMemcpy(&out, dsum, sizeof(double), cudaMemcpyDeviceToHost));
        return out;
    };
    auto exact = [&](int v, double out, double ref, long long m) {
        char msg[160];
        std::snprintf(msg, sizeof msg, "n=%lld: sum %.17g, expected exactly %.17g", m, out, ref);
        return bench.check_that(v, out == ref, msg);
    };

    for (int v : bench.selected()) {
        bool ok = true;
        for (size_t c = 0; c < refs.size() && ok; ++c) ok = exact(v, result(v, check_sizes[c]), refs[c], check_sizes[c]);
        // The timed size, checked too (that run is the warm-up). A race may show on one run in
        // many: the aside (v9) is checked five times.
        for (int rep = 0; rep < (v == 9 ? 5 : 1) && ok; ++rep) ok = exact(v, result(v, n), ref_full, n);
        if (!ok) continue;
        bench.check(v, 0.0, 0.0);
        bench.time(v, [&] { reduce(v, n, dx, dsum, s); }, 8.0 * n, "GB/s", "n=2^28 doubles", 50, 500.0);
    }
    for (void* p : {(void*)dx, (void*)dsum, (void*)s.partial[0], (void*)s.partial[1], s.cub_temp}) CUDA_CHECK(cudaFree(p));
    return 0;
}
