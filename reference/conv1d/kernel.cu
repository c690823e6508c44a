/*
Reference kernel for conv1d: the lecture's 1D convolution in FP32,

    for (i = 0; i < n; i++) {
        float s = 0;
        for (j = 0; j < w; j++) {
            k = i - w / 2 + j;
            if (k >= 0 && k < n) s += N[k] * M[j];   // N reads as 0 outside [0, n)
        }
        P[i] = s;
    }

Work: 2 n w FLOP. Bytes: N read once and P written once, 8n, 512 MiB at n = 2^26; an H200
copies ~4.3 TB/s, so ~0.12 ms is the floor, the time of a device-to-device copy of N into P.
At w = 7 the 0.94 GFLOP are nothing next to that. At w = 63 it is n w = 4.2e9 FMAs: at
132 SMs x 128 lanes x ~1.98 GHz (67 TFLOP/s) that is ~0.13 ms, as long as the copy. So
w = 63 sits right at the ridge (15.75 FLOP/B against 67 / 4.3 = 15.6): the FMAs have to
run with few other instructions beside them, overlapped with the memory traffic.

Design:
- Three kernels. At w = 7 (N and P 16-byte aligned, as cudaMalloc gives them) the work is a copy
  with 7 FMAs per value, and the streaming kernel does it the way a copy would: each thread loads
  one quad of N (one LDG.128), takes the 3 values on each side from its neighbouring lanes by
  shuffles (lanes 0 and 31 load the quad past the warp's edge themselves, in the same round),
  and stores its 4 outputs (one STG.128). No shared memory and no barrier, so every warp's load
  is in flight as soon as it starts. Graded on one H200, two gradings each: 1.035-1.038x the copy
  against 0.835-0.843x for the tiled kernel below; 2 quads per thread gave 0.94-0.95x, 4 quads
  0.71-0.72x, and streaming cache hints (__ldcs/__stcs) 0.87-0.90x. On one H100: 0.975-1.009x
  (four gradings) against 0.910-0.949x. At w = 63 (N 16-byte aligned) the tensor cores do the
  FMAs (next bullet; GPUs from sm_80 on). Every other width, and a misaligned N or P, runs the
  tiled kernel the rest of this docblock describes.
- w = 63 on the tensor cores. With FFMAs the 4.2e9 FMAs take as long as the copy (napkin math
  above) and, with the loads beside them, the tiled kernel reached 0.82-0.85x of the copy on an
  H100 and 0.62x on an H200, whose copy is faster. Written as a matrix product, 16 consecutive
  outputs are D = A B with A[b][kk] = M[kk - b] (16 x 80, the taps: a band, fixed for the call)
  and B[kk][c] = N[i0 - 31 + 16c + kk] (80 x 8: column c is the input window of outputs
  i0 + 16c .. i0 + 16c + 15), so one mma.sync m16n8 tile is 128 outputs, 10 k-steps of 8.
  FP32 accuracy from TF32 and BF16 parts: x = x_hi + x_lo and m = m_hi + m_lo, x_hi and m_hi
  rounded to TF32 (11 significant bits), the rest exact in FP32 and at most 2^-11 of the value.
  x_hi m_hi is one TF32 MMA (exact products, FP32 sums); the two small terms x_hi m_lo + x_lo m_hi
  need only ~8 bits each and go into one BF16 MMA with k = 16 (rows 0-7 x_hi, rows 8-15 x_lo
  against columns m_lo, m_hi); x_lo m_lo (~2^-22) is dropped. Error ~5e-7 relative at n = 2^26
  (the tiled FFMA kernel: 1.5e-7; the tolerance: 1e-5); three TF32 MMAs instead (2e-7) cost
  6% more time, as the MMAs, not the memory, set the pace.
  Each block is one warp, persistent (12 per SM by registers), looping over tiles of 512 outputs
  (4 MMA tiles); the taps' A operands stay in 80 registers for the whole call. A tile's 608
  inputs come by cp.async into shared memory, two tiles ahead of the one computed, so the loads
  of 12 warps x 2 tiles x 2.4 KB (~58 KB per SM) are in flight while the MMAs run; a warp waits on
  no other warp. In shared memory float i sits at quad (i/4) ^ ((i/16) & 7): a B fragment (lanes
  at 16g + t + c) and a run of 8 quads stored then hit all 32 banks once.
  Measured at n = 2^26 (median of 30 calls): 0.200-0.202 ms on an H100 (0.91-0.92x the copy; the
  tiled FFMA kernel 0.84x in the same run; blocks of 8 warps with a barrier per tile 0.81-0.86x)
  and 0.192-0.193 ms on an H200 (0.69x, against 0.62x). About the same time on both: the MMAs,
  not the memory, set the pace, and only the H100's copy is as slow as they are. Graded (bench/):
  39,747 GFLOPS on an H100 (0.90x the copy, 0.82x before) and 40,898 on an H200 (0.67x, 0.62x).
- M goes to __constant__ memory (one cudaMemcpyToSymbolAsync, device to device, per call;
  at most 1 KB, 3-6 us on an H100). Every thread of a warp reads the same tap at the same
  time, which the constant cache broadcasts; in the unrolled kernels the taps reach the
  FFMAs through uniform registers, one ULDC.64 per two taps per warp, and no other load.
  Except at w = 7 (both kernels): there the copy is 2-3% of the call and its least steady
  part, and the 7 taps fit in registers, so each thread loads them straight from M (the whole
  warp reads the same word: one request per tap, served from L1). Timed on an H100: 205 us per call
  against 211 us with the copy, and half the variation from burst to burst. At w = 63 the
  taps cannot sit in registers (32 per thread keep 8 blocks per SM): loading them from M or
  from shared memory chunk by chunk cost 6-10% more than the copy.
- Blocks of 256 threads; each thread computes 8 consecutive outputs, so a block covers a
  tile of 2048 outputs. The block first copies its tile of N plus the halo into shared
  memory (~2.1K floats), zero outside [0, n), then every thread computes from there: each N
  value is read from DRAM ~once (the halo overlap is 62 of 2048 floats at w = 63, and the
  neighbour's copy is usually still in L2).
- The shared tile starts at N index tile_start - RP, where RP is w/2 rounded up to a
  multiple of 4; the RP - w/2 extra leading values never contribute to a sum. That puts
  the tile on 16-byte boundaries of N, so it loads with one LDG.128 per four floats
  (a warp reads 512 contiguous bytes per instruction), all of a thread's loads (at most
  three) in flight before the first store to shared memory.
- The 8 outputs of a thread need a window of 8 + w - 1 inputs. They go through registers
  in chunks of 8 taps: a 16-float register window, two LDS.128 of 8 new floats per chunk,
  then 8 x 8 = 64 FMAs. Per FMA that is 1/32 of a shared-memory load: the 2 x 16 B per
  thread per chunk are 1 KB per warp, 8 cycles of the SM's 128 B/clk shared memory, against
  64 cycles of FMAs on its SM sub-partition: the shared-memory pipe runs at ~50%.
- Bank conflicts: thread t reads the 32 bytes at float 8(t + c), so in each quarter-warp
  (8 threads per LDS.128 wavefront) threads t and t + 4 would hit the same four banks, a
  2-way conflict that would put the shared-memory pipe at 100%. The tile is stored with the
  two 16-byte quads of each 32-byte pair swapped in every other 128-byte run (quad q lives at
  q ^ ((q >> 3) & 1)): any 8 consecutive threads then hit all 32 banks once, for any chunk,
  and so do the tile stores. The addresses come from 8 per-thread registers computed once,
  so the chunks spend no integer instructions on them.
- w = 7 and w = 63 get tiled kernels with w known at compile time (misaligned, or before sm_80): every
  loop unrolls, and the FFMA stream has little else in it (at w = 63, two LDS.128 and ~4
  ULDC per 64 FMAs; at w = 7, the taps stay in registers). Any other width runs the same code with w read at run time (taps padded to a
  multiple of 8 with zeros, a predicated constant load per tap): correct, not tuned.
- ptxas (sm_90): 30 to 32 registers in the aligned kernels (40 in the misaligned fallback
  for w = 63), no spills, 9 KB of shared memory per block, so 8 blocks of 256 threads (2048,
  the maximum) fit on an SM. In the tiled w = 63 kernel the 63 FMAs per
  output are 504 of a thread's ~600 instructions after the barrier, the rest being the 18
  LDS.128, 29 uniform loads of the taps, ~40 integer instructions and the stores: issuing
  them all takes ~0.128 ms / 0.84 = ~0.15 ms, which is what w = 63 should cost if the
  memory traffic hides under it. Little's law: ~3 MB in flight at ~4.3 TB/s is ~23 KB per
  SM; 2048 threads with about two LDG.128 each put up to ~65 KB in flight.
- Stores: the 8 outputs of a thread are one 32-byte sector (P comes from cudaMalloc,
  256-byte aligned), written by two STG.128 back to back; L2 merges the halves before DRAM
  sees them. The ragged end (outputs past n) and a misaligned N or P fall back to scalar
  loads and stores; nothing outside [0, n) of N or P is ever touched.
- Summation order is tap order j = 0..w-1 with FMAs, the same as the loop above: error
  ~1e-7 relative, against the tolerance of 1e-5.
*/

#include <cstdint>
#include "cuda_check.cuh"

constexpr int MAX_W = 255;                   // widest mask the assignment allows
constexpr int BLOCK = 256;                   // threads per block
constexpr int OUT = 8;                       // consecutive outputs per thread
constexpr int TILE = BLOCK * OUT;            // outputs per block
constexpr int MAX_CHUNKS = 32;               // ceil((RP - w/2 + w) / 8) <= 32 for w <= 255
constexpr int SMEM_FLOATS = TILE + 8 * MAX_CHUNKS;                        // 2304 floats, 9 KB
constexpr int MAX_LOAD_ROUNDS = (SMEM_FLOATS / 4 + BLOCK - 1) / BLOCK;    // quads per thread: 3

__constant__ float c_mask[MAX_W + 1];

// Kernels for a width known at compile time up to this read the taps from M into registers;
// the others from c_mask, which the launch fills first.
constexpr int MAX_W_IN_REGISTERS = 8;
__host__ __device__ constexpr bool taps_from_m(int W) { return W > 0 && W <= MAX_W_IN_REGISTERS; }

// Number of 8-tap chunks once the taps are shifted by the RP - w/2 leading zeros.
__host__ __device__ constexpr int chunks_for(int w) { return (((w / 2 + 3) & ~3) - w / 2 + w + 7) / 8; }
static_assert(chunks_for(MAX_W) <= MAX_CHUNKS && chunks_for(MAX_W - 2) <= MAX_CHUNKS &&
              chunks_for(MAX_W - 4) <= MAX_CHUNKS, "the tile must hold the widest window");

// Shared-memory quad q (4 floats) is stored at quad q ^ ((q >> 3) & 1): see the docblock.
__device__ __forceinline__ int swizzle_quad(int q) { return q ^ ((q >> 3) & 1); }

__device__ __forceinline__ void store_quad(float* s, int q, float4 v) {
    reinterpret_cast<float4*>(s)[swizzle_quad(q)] = v;
}
// The 4 floats at float offset f of the (already swizzled) tile; f is a multiple of 4.
__device__ __forceinline__ float4 load_quad(const float* s, int f) {
    return *reinterpret_cast<const float4*>(s + f);
}

// W > 0: the mask width, known at compile time; W == 0: the width is w_rt.
// VEC: N and P are 16-byte aligned, so whole quads load and store as float4.
template <int W, bool VEC>
__global__ void __launch_bounds__(BLOCK)
conv1d_kernel(int n, int w_rt, const float* __restrict__ N, const float* __restrict__ M,
              float* __restrict__ P) {
    __shared__ __align__(16) float tile[SMEM_FLOATS];

    const int w = W > 0 ? W : w_rt;
    const int R = w / 2;                      // halo on each side
    const int RP = (R + 3) & ~3;              // halo rounded up to a whole quad
    const int lead = RP - R;                  // tile values before the first tap (0..3)
    const int nch = W > 0 ? chunks_for(W) : chunks_for(w);
    const int quads = (TILE + 8 * nch) / 4;   // the tile, in quads

    const long long start = (long long)blockIdx.x * TILE;   // first output of the block
    const long long a0 = start - RP;                         // N index of tile[0], a multiple of 4
    const long long lo = start - R > 0 ? start - R : 0;      // the tile's live N range [lo, hi):
    const long long hi = start + TILE + R < n ? start + TILE + R : (long long)n;   // zero elsewhere

    // Load: thread t takes quads t, t + 256, t + 512 of the tile; all loads first, then the
    // stores, so a thread has all its LDG.128 in flight at once.
    float4 v[MAX_LOAD_ROUNDS];
#pragma unroll
    for (int r = 0; r < MAX_LOAD_ROUNDS; ++r) {
        const int q = threadIdx.x + r * BLOCK;
        const long long a = a0 + 4LL * q;
        v[r] = make_float4(0.f, 0.f, 0.f, 0.f);
        if (q >= quads) continue;
        if (VEC && a >= lo && a + 4 <= hi) {
            v[r] = *reinterpret_cast<const float4*>(N + a);
        } else {  // the two ends of the live range, or N not 16-byte aligned
            if (a + 0 >= lo && a + 0 < hi) v[r].x = N[a + 0];
            if (a + 1 >= lo && a + 1 < hi) v[r].y = N[a + 1];
            if (a + 2 >= lo && a + 2 < hi) v[r].z = N[a + 2];
            if (a + 3 >= lo && a + 3 < hi) v[r].w = N[a + 3];
        }
    }
#pragma unroll
    for (int r = 0; r < MAX_LOAD_ROUNDS; ++r) {
        const int q = threadIdx.x + r * BLOCK;
        if (q < quads) store_quad(tile, q, v[r]);
    }
    __syncthreads();

    // Thread t computes outputs start + 8t + o, o < 8: output o, padded tap p (tap j = p - lead)
    // reads tile[8t + o + p]. Chunk c covers padded taps 8c..8c+7 and needs tile floats
    // [8(t + c), 8(t + c) + 16): the 8 of the previous chunk and 8 new ones, quads 2(t + c + 1)
    // and 2(t + c + 1) + 1, which the swizzle puts at float 8u + (u & 4) and that ^ 4
    // (u = t + c + 1). u & 4 only depends on (t + c + 1) mod 8, hence the 8 bases.
    const int t = threadIdx.x;
    int base[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) base[e] = 8 * t + ((t + e) & 4);
    auto pair_lo = [&](int c) {   // float offset of the first 4 of the 8 floats at 8(t + c)
        if constexpr (W > 0) return base[c & 7] + 8 * c;
        else return 8 * (t + c) + ((t + c) & 4);
    };
    auto pair_hi = [&](int c) {   // ... and of the last 4
        if constexpr (W > 0) return base[(c + 4) & 7] + 8 * c;
        else return (8 * (t + c) + ((t + c) & 4)) ^ 4;
    };

    float acc[OUT];
#pragma unroll
    for (int o = 0; o < OUT; ++o) acc[o] = 0.f;
    float x[16];   // x[k] = tile[8(t + c) + k]
    {
        const float4 a = load_quad(tile, pair_lo(0)), b = load_quad(tile, pair_hi(0));
        x[0] = a.x; x[1] = a.y; x[2] = a.z; x[3] = a.w;
        x[4] = b.x; x[5] = b.y; x[6] = b.z; x[7] = b.w;
    }
    auto chunk = [&](int c) {
        const float4 a = load_quad(tile, pair_lo(c + 1)), b = load_quad(tile, pair_hi(c + 1));
        x[8] = a.x; x[9] = a.y; x[10] = a.z; x[11] = a.w;
        x[12] = b.x; x[13] = b.y; x[14] = b.z; x[15] = b.w;
#pragma unroll
        for (int k = 0; k < 8; ++k) {
            const int j = 8 * c + k - lead;   // the tap
            float m;
            if constexpr (W > 0) {
                if (j < 0 || j >= W) continue;   // settled at compile time
                m = taps_from_m(W) ? __ldg(M + j) : c_mask[j];
            } else {
                m = (unsigned)j < (unsigned)w ? c_mask[j] : 0.f;   // padded taps are zero
            }
#pragma unroll
            for (int o = 0; o < OUT; ++o) acc[o] = fmaf(x[o + k], m, acc[o]);
        }
#pragma unroll
        for (int k = 0; k < 8; ++k) x[k] = x[k + 8];
    };
    if constexpr (W > 0) {
#pragma unroll
        for (int c = 0; c < chunks_for(W); ++c) chunk(c);
    } else {
#pragma unroll 1
        for (int c = 0; c < nch; ++c) chunk(c);
    }

    const long long i0 = start + OUT * t;
    if (VEC && i0 + OUT <= n) {
        float4* p = reinterpret_cast<float4*>(P + i0);
        p[0] = make_float4(acc[0], acc[1], acc[2], acc[3]);
        p[1] = make_float4(acc[4], acc[5], acc[6], acc[7]);
    } else {
#pragma unroll
        for (int o = 0; o < OUT; ++o)
            if (i0 + o < n) P[i0 + o] = acc[o];
    }
}

// The streaming form for w = 7 with N and P 16-byte aligned (see the docblock): thread g computes
// outputs 4g..4g+3 from its own quad of N and the R values on each side of it, which come from the
// neighbouring lanes by shuffles; lanes 0 and 31 load the quad past the warp's edge themselves, in
// the same round as their own load. No shared memory and no barrier: a warp's loads go out as soon
// as it starts.
__device__ __forceinline__ float4 quad_of(const float* __restrict__ N, long long q, int n) {
    const long long a = 4 * q;
    if (q >= 0 && a + 4 <= n) return *reinterpret_cast<const float4*>(N + a);
    float4 v = make_float4(0.f, 0.f, 0.f, 0.f);   // N reads as 0 outside [0, n)
    if (a + 0 >= 0 && a + 0 < n) v.x = N[a + 0];
    if (a + 1 >= 0 && a + 1 < n) v.y = N[a + 1];
    if (a + 2 >= 0 && a + 2 < n) v.z = N[a + 2];
    if (a + 3 >= 0 && a + 3 < n) v.w = N[a + 3];
    return v;
}
__device__ __forceinline__ float part(const float4& v, int i) {   // i known at compile time
    return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

template <int W>
__global__ void __launch_bounds__(BLOCK)
conv1d_stream(int n, const float* __restrict__ N, const float* __restrict__ M, float* __restrict__ P) {
    constexpr int R = W / 2;
    static_assert(taps_from_m(W) && R <= 4, "the halo must fit in one quad of each neighbour");
    const int lane = threadIdx.x & 31;
    const long long q = (long long)blockIdx.x * BLOCK + threadIdx.x;   // this thread's quad
    const float4 v = quad_of(N, q, n);
    float4 edge = make_float4(0.f, 0.f, 0.f, 0.f);
    if (lane == 0) edge = quad_of(N, q - 1, n);
    else if (lane == 31) edge = quad_of(N, q + 1, n);
    float m[W];
#pragma unroll
    for (int j = 0; j < W; ++j) m[j] = __ldg(M + j);

    float x[4 + 2 * R];   // x[r] = N[4q - R + r]
#pragma unroll
    for (int i = 0; i < R; ++i) {   // every lane takes part in the shuffles, past n too
        const float left = __shfl_up_sync(0xffffffffu, part(v, 4 - R + i), 1);
        const float right = __shfl_down_sync(0xffffffffu, part(v, i), 1);
        x[i] = lane == 0 ? part(edge, 4 - R + i) : left;
        x[R + 4 + i] = lane == 31 ? part(edge, i) : right;
    }
    x[R] = v.x; x[R + 1] = v.y; x[R + 2] = v.z; x[R + 3] = v.w;
    float acc[4];
#pragma unroll
    for (int o = 0; o < 4; ++o) {
        acc[o] = 0.f;
#pragma unroll
        for (int j = 0; j < W; ++j) acc[o] = fmaf(x[o + j], m[j], acc[o]);
    }
    const long long i0 = 4 * q;
    if (i0 + 4 <= n) {
        *reinterpret_cast<float4*>(P + i0) = make_float4(acc[0], acc[1], acc[2], acc[3]);
    } else {
#pragma unroll
        for (int o = 0; o < 4; ++o)
            if (i0 + o < n) P[i0 + o] = acc[o];
    }
}

// w = 63 on the tensor cores (see the docblock): one warp per block, persistent, TC_TILE outputs
// per tile, 3xTF32-accurate from one TF32 and one BF16 MMA per k-step.
namespace tc63 {
constexpr int W = 63;
constexpr int KSTEPS = 10;                       // K = 80 >= 16 + 62: the inputs of 16 outputs
constexpr int GROUPS = 4;                        // MMA tiles (128 outputs each) per tile
constexpr int TILE = 128 * GROUPS;               // 512 outputs
constexpr int SPAN_QUADS = (TILE + 96) / 4;      // inputs [start - 32, start + TILE + 64), in quads
constexpr int BUF = (TILE + 96 + 127) / 128 * 128;   // a whole number of the swizzle's periods
constexpr int NBUF = 3;                          // one tile computed, two in flight
constexpr int BLOCKS_PER_SM = 12;                // 146 registers x 32 threads each

// Float i of a tile is stored at quad (i/4) ^ ((i/16) & 7), same place in its quad.
__device__ __forceinline__ int swz(int i) { return (((i >> 2) ^ ((i >> 4) & 7)) << 2) | (i & 3); }

__device__ __forceinline__ uint32_t to_tf32(float x) {   // round to nearest, 11 significant bits
    uint32_t r;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
    return r;
}
__device__ __forceinline__ uint32_t bf16x2(float lo, float hi) {   // lo in the low half
    uint32_t r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}
// x = hi + lo: hi rounded to TF32 (half away from zero, on the bits), lo exact in FP32, |lo| <= 2^-11 |x|.
__device__ __forceinline__ void split(float x, float& hi, float& lo) {
    hi = __uint_as_float((__float_as_uint(x) + 0x1000u) & 0xffffe000u);
    lo = x - hi;
}
__device__ __forceinline__ void mma_tf32(float (&d)[4], const uint32_t (&a)[4], float b0, float b1) {
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(__float_as_uint(b0)), "r"(__float_as_uint(b1)));
}
__device__ __forceinline__ void mma_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Inputs N[start - 32, start + TILE + 64) into buf by cp.async (16 bytes each), zero outside [0, n).
__device__ __forceinline__ void load_tile(float* buf, const float* __restrict__ N, long long start, int n) {
    const uint32_t s = (uint32_t)__cvta_generic_to_shared(buf);
    const float* src = N + (start - 32);
    if (start >= 32 && start - 32 + 4 * SPAN_QUADS <= n) {   // inside [0, n): no checks
#pragma unroll
        for (int q = threadIdx.x; q < SPAN_QUADS; q += 32)
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s + 4u * swz(4 * q)), "l"(src + 4 * q));
    } else {
        for (int q = threadIdx.x; q < SPAN_QUADS; q += 32) {
            const long long a = start - 32 + 4LL * q;
            const int bytes = a >= 0 && a < n ? (n - a >= 4 ? 16 : (int)(4 * (n - a))) : 0;   // the rest is zeroed
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(s + 4u * swz(4 * q)),
                         "l"(bytes ? N + a : N), "r"(bytes));
        }
    }
    asm volatile("cp.async.commit_group;");
}

__global__ void __launch_bounds__(32, BLOCKS_PER_SM)
conv63(int n, const float* __restrict__ N, const float* __restrict__ M, float* __restrict__ P) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
    __trap();   // mma.sync with TF32 and BF16 needs sm_80; launch() never starts it before that
#else
    __shared__ __align__(16) float smem[NBUF * BUF];
    const int g = threadIdx.x >> 2, t = threadIdx.x & 3;   // the MMA fragments' row group and column

    // The taps: A[b][kk] = M[kk - b]. Lane (g, t) holds rows g, g + 8 and columns t, t + 4 of each
    // k-step (the m16n8k8 A fragment): e = 0 (g, t), 1 (g + 8, t), 2 (g, t + 4), 3 (g + 8, t + 4).
    // The BF16 operand (16 x 16) has m_lo at k = t, t + 4 in columns 2t, 2t + 1 and m_hi in
    // columns 8 + 2t, 9 + 2t, to meet B's rows: x_hi at k = t, t + 4, then x_lo.
    uint32_t a_hi[KSTEPS][4], a_mix[KSTEPS][4];
#pragma unroll
    for (int s = 0; s < KSTEPS; ++s) {
        float hi[4], lo[4];
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int j = 8 * s + t + 4 * (e >> 1) - (g + 8 * (e & 1));
            const float m = j >= 0 && j < W ? __ldg(M + j) : 0.f;
            a_hi[s][e] = to_tf32(m);
            hi[e] = __uint_as_float(a_hi[s][e]);
            lo[e] = m - hi[e];
        }
        a_mix[s][0] = bf16x2(lo[0], lo[2]);
        a_mix[s][1] = bf16x2(lo[1], lo[3]);
        a_mix[s][2] = bf16x2(hi[0], hi[2]);
        a_mix[s][3] = bf16x2(hi[1], hi[3]);
    }

    const long long tiles = ((long long)n + TILE - 1) / TILE;
    long long tile = blockIdx.x;
#pragma unroll
    for (int p = 0; p < NBUF - 1; ++p) {
        const long long k = tile + (long long)p * gridDim.x;
        if (k < tiles) load_tile(smem + p * BUF, N, k * TILE, n);
        else asm volatile("cp.async.commit_group;");   // an empty group keeps the count
    }
    for (int it = 0; tile < tiles; ++it, tile += gridDim.x) {
        const long long ahead = tile + (long long)(NBUF - 1) * gridDim.x;
        if (ahead < tiles) load_tile(smem + ((it + NBUF - 1) % NBUF) * BUF, N, ahead * TILE, n);
        else asm volatile("cp.async.commit_group;");
        asm volatile("cp.async.wait_group %0;" ::"n"(NBUF - 1));   // this tile's loads have landed
        __syncwarp();
        const float* buf = smem + (it % NBUF) * BUF;

        // B[kk][c] = buf[128 j + 1 + 16c + kk] for MMA tile j (tile float 0 is N[start - 32], so
        // float 1 is N[start - 31]: 31 = w / 2). Lane (g, t) holds rows t, t + 4 of column g.
        float big[GROUPS][4] = {}, small[GROUPS][4] = {};
#pragma unroll
        for (int s = 0; s < KSTEPS; ++s) {
            const int x = 1 + 16 * g + t + 8 * s;
            const int o0 = swz(x), o1 = swz(x + 4);   // the swizzle repeats every 128 floats
#pragma unroll
            for (int j = 0; j < GROUPS; ++j) {
                float h0, l0, h1, l1;
                split(buf[128 * j + o0], h0, l0);
                split(buf[128 * j + o1], h1, l1);
                mma_tf32(big[j], a_hi[s], h0, h1);
                mma_bf16(small[j], a_mix[s], bf16x2(h0, h1), bf16x2(l0, l1));
            }
        }
        // D[b][c] is output start + 128 j + 16c + b; lane (g, t) holds b = g, g + 8 and c = 2t, 2t + 1.
        const long long start = tile * TILE;
#pragma unroll
        for (int j = 0; j < GROUPS; ++j) {
            const long long o = start + 128 * j + 32 * t + g;
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const long long i = o + 16 * (e & 1) + 8 * (e >> 1);
                if (start + TILE <= n || i < n) P[i] = big[j][e] + small[j][e];
            }
        }
        __syncwarp();   // every lane is done with this buffer before it is loaded again
    }
    asm volatile("cp.async.wait_group 0;");
#endif
}

// Blocks that fit on the GPU at once (0: it has no tensor cores for this, before sm_80); worked
// out on the first call.
static int grid() {
    static int blocks = -1;
    if (blocks < 0) {
        int device = 0, major = 0, sms = 0, per_sm = 0;
        CUDA_CHECK(cudaGetDevice(&device));
        CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
        CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
        if (major >= 8) CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, conv63, 32, 0));
        blocks = major >= 8 ? sms * (per_sm > 0 ? per_sm : 1) : 0;
    }
    return blocks;
}

static void launch(int n, const float* N, const float* M, float* P) {
    const long long tiles = ((long long)n + TILE - 1) / TILE;
    conv63<<<(int)(tiles < grid() ? tiles : grid()), 32>>>(n, N, M, P);
}
}  // namespace tc63

template <int W, bool VEC>
static void launch(int blocks, int n, int w, const float* N, const float* M, float* P) {
    // w > MAX_W would overrun c_mask: the copy fails and CUDA_CHECK reports it.
    if (!taps_from_m(W))
        CUDA_CHECK(cudaMemcpyToSymbolAsync(c_mask, M, (size_t)w * sizeof(float), 0, cudaMemcpyDeviceToDevice, 0));
    conv1d_kernel<W, VEC><<<blocks, BLOCK>>>(n, w, N, M, P);
}

template <bool VEC>
static void launch_width(int blocks, int n, int w, const float* N, const float* M, float* P) {
    if (VEC && w == tc63::W && tc63::grid() > 0) {   // the tensor cores (N 16-byte aligned for cp.async)
        tc63::launch(n, N, M, P);
    } else if (VEC && w == 7) {   // the streaming form: one quad of outputs per thread
        const long long quads = ((long long)n + 3) / 4;
        conv1d_stream<7><<<(int)((quads + BLOCK - 1) / BLOCK), BLOCK>>>(n, N, M, P);
    } else if (w == 7) launch<7, VEC>(blocks, n, w, N, M, P);
    else if (w == 63) launch<63, VEC>(blocks, n, w, N, M, P);
    else launch<0, VEC>(blocks, n, w, N, M, P);
}

void conv1d(int n, int w, const float* N, const float* M, float* P) {
    if (n <= 0) return;
    const int blocks = (int)(((long long)n + TILE - 1) / TILE);   // 32768 at n = 2^26
    const bool vec = reinterpret_cast<uintptr_t>(N) % 16 == 0 && reinterpret_cast<uintptr_t>(P) % 16 == 0;
    if (vec) launch_width<true>(blocks, n, w, N, M, P);
    else launch_width<false>(blocks, n, w, N, M, P);
    CUDA_CHECK(cudaGetLastError());
}
