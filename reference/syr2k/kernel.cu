/*
Reference kernel for syr2k: C += 0.5 (B A^T + A B^T) on the strict upper triangle, FP64.

A and B are n x n x n tensors, read as row-major n x n^2 matrices (row k is A[k][.][.]);
C is n x n row-major. The sequential definition is

    for (k = 0; k < n; k++)
      for (l = k + 1; l < n; l++)
        for (i = 0; i < n; i++)
          for (j = 0; j < n; j++)
            C[k][l] += 0.5 * (A[l][i][j] * B[k][i][j] + A[k][i][j] * B[l][i][j]);

Elements with k >= l (the diagonal and the lower triangle) must keep their bits.

With G = A B^T (n x n, G[k][l] = A_k . B_l, dot products of length K = n^2) this is

    C[k][l] += 0.5 (G[k][l] + G[l][k])    for k < l.

Work: n (n-1) / 2 elements, each two dot products of length n^2: 2 n^3 (n-1) FLOP, 8.6e9 at
n = 256. H100 SXM does ~34 TFLOP/s of FP64 on the CUDA cores (67 on the FP64 tensor cores,
not used here), so the floor is ~0.25 ms. Bytes: A and B are 134 MB each, ~0.08 ms at
3.35 TB/s, so this is compute bound (32 FLOP/byte against a ridge of ~10), but only by 3x:
the operands have to be streamed at ~1 TB/s while the DFMA pipes stay busy. The kit's baseline
is the cuBLAS DGEMM route (G = A B^T, then a fold into the upper triangle), which is the same
plan as this kernel; cublasDsyr2k itself is ~4.8x slower than that route at this shape.

Design:
- It is a GEMM with M = N = n and a long K = n^2 (256 x 256 x 65536 at n = 256). We compute
  all of G and fold each off-diagonal element into the one C element it belongs to:
  G[i][j] goes to C[i][j] when i < j and to C[j][i] when i > j; the diagonal of G is
  dropped. That is n^2 K FMAs against the n (n-1) K the loop needs, 0.4% extra at n = 256,
  and nothing is ever written at k >= l. (Computing only the upper tiles of
  A_K B_L^T + B_K A_L^T does the same work off the diagonal but twice the needed work on the
  diagonal tiles: with 64 x 64 tiles at n = 256 that is 20 tile products instead of 16.)
- Each block computes one 128 x 64 tile of G (BM x BN) over one chunk of K, with 256 threads;
  each thread owns an 8 x 4 register block (32 FP64 accumulators = 64 registers). Per k step a
  warp reads 8 shared-memory wavefronts and issues 1024 DFMAs, 16 clocks of the SM's
  64 DFMA/clk, so shared memory runs at about half its rate and the DFMA pipes set the pace.
- At n = 256 there are only 2 x 4 = 8 such tiles, so K is split: splits = (SMs x resident
  blocks per SM) / tiles, i.e. 132 x 2 / 8 = 33 splits of ~1986 k each, 264 blocks in one
  full wave with equal work. Each split keeps at least MIN_KTILES k-tiles, so small n does
  not turn into a storm of atomics.
- Blocks are numbered split-major: the 8 tiles of one K chunk run side by side, and a chunk
  of A (read by 4 column tiles) or of B (read by 2 row tiles) comes from DRAM once and then
  from L2. DRAM traffic stays ~268 MB; L2 -> SM traffic is ~805 MB, ~3 TB/s at the floor,
  within what H100's L2 delivers.
- Both operands are rows that run along K, so both tiles are transposed on the way into
  shared memory (As[k][i], Bs[k][j]): a thread's 8 rows (4 columns) for one k are then
  contiguous and come in as 16-byte loads. Row strides are padded by 2 doubles, which keeps
  the transposing stores near conflict free and the rows 16-byte aligned.
- Global -> shared copies use cp.async (LDGSTS) in a 3-stage ring with BK = 8: 8 consecutive
  threads copy one row's 64-byte run, no staging registers, so the kernel fits in 128
  registers and two blocks (16 warps) run per SM while tiles t+1 and t+2 are in flight.
  Rows >= n and k >= n^2 are zero-filled by the copy itself (src-size 0), so every load is in
  bounds for any n. 3 stages x 8 x (130 + 66) doubles = 36.75 KiB of static shared memory.
- Epilogue: FP64 atomicAdd (a RED on sm_90) of 0.5 x partial. At n = 256 that is 8192 per
  block, 2.2 M in all, 66 per C element, against 16 M DFMAs per block: a few percent at most.
  The summation order then varies from run to run; any order lands near 1e-15 relative,
  far inside the 1e-10 tolerance.
*/

#include <cstddef>
#include "cuda_check.cuh"

constexpr int BM = 128;               // rows of G (rows of A, index k) per block
constexpr int BN = 64;                // columns of G (rows of B, index l) per block
constexpr int BK = 8;                 // K per pipeline stage
constexpr int TM = 8;                 // rows per thread
constexpr int TN = 4;                 // columns per thread: two pairs, 32 columns apart
constexpr int STAGES = 3;             // cp.async ring depth
constexpr int NTHREADS = (BM / TM) * (BN / TN);  // 16 x 16 = 256
constexpr int AS_STRIDE = BM + 2;     // padded row of the transposed A tile
constexpr int BS_STRIDE = BN + 2;     // padded row of the transposed B tile
constexpr int MIN_KTILES = 16;        // least K work per split: 128 k, 1 M DFMAs per block

static_assert(NTHREADS == 256, "thread layout below assumes 16 x 16 threads");
static_assert(NTHREADS % BK == 0, "loader layout: BK threads per row");
static_assert(BM % (NTHREADS / BK) == 0 && BN % (NTHREADS / BK) == 0, "whole loader passes");
static_assert(AS_STRIDE % 2 == 0 && BS_STRIDE % 2 == 0, "rows must stay 16-byte aligned");

// 8-byte global -> shared async copy. src_bytes = 0 writes zeros and reads nothing,
// which is how the masked elements (rows >= n, k >= n^2) get in.
__device__ __forceinline__ void cp_async_8(void* smem, const void* gmem, bool valid) {
    const unsigned saddr = static_cast<unsigned>(__cvta_generic_to_shared(smem));
    const int src_bytes = valid ? 8 : 0;
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(saddr), "l"(gmem),
                 "r"(src_bytes)
                 : "memory");
}

__device__ __forceinline__ void cp_async_commit() {
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}

// Wait until at most N of this thread's committed groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// One block: rows [i0, i0 + BM) and columns [j0, j0 + BN) of G = A B^T, over the k-tiles of
// split `blockIdx.x / tiles`; the result is folded into the strict upper triangle of C.
__global__ void __launch_bounds__(NTHREADS, 2)
syr2k_kernel(int n, int col_tiles, int tiles, int splits, const double* __restrict__ A,
             const double* __restrict__ B, double* __restrict__ C) {
    __shared__ __align__(16) double As[STAGES][BK][AS_STRIDE];  // As[s][k][i]: A tile, transposed
    __shared__ __align__(16) double Bs[STAGES][BK][BS_STRIDE];  // Bs[s][k][j]: B tile, transposed

    const int tid = threadIdx.x;
    // Split-major numbering: consecutive blocks share a K chunk (and its L2 lines).
    const int tile = blockIdx.x % tiles;
    const int split = blockIdx.x / tiles;
    const int i0 = (tile / col_tiles) * BM;
    const int j0 = (tile % col_tiles) * BN;

    const long long K = (long long)n * n;             // inner dimension, one row of A or B
    const long long ktiles_all = (K + BK - 1) / BK;
    // Even share of the k-tiles; splits <= ktiles_all, so every split gets at least one.
    const long long t_begin = ktiles_all * split / splits;
    const int ntiles = (int)(ktiles_all * (split + 1) / splits - t_begin);

    // Loader layout (both tiles): 8 consecutive threads copy one row's 8 k values, a 64-byte
    // run; 32 rows per pass, 4 passes for A (128 rows), 2 for B (64 rows).
    const int ld_k = tid % BK;
    const int ld_r = tid / BK;
    constexpr int LD_ROWS = NTHREADS / BK;  // 32

    auto load_tile = [&](int t, int s) {
        const long long k = (t_begin + t) * BK + ld_k;
        const bool k_ok = k < K;
#pragma unroll
        for (int p = 0; p < BM / LD_ROWS; ++p) {
            const int r = ld_r + p * LD_ROWS;
            const int i = i0 + r;
            const bool ok = k_ok && i < n;
            cp_async_8(&As[s][ld_k][r], ok ? A + ((size_t)i * K + k) : A, ok);
        }
#pragma unroll
        for (int p = 0; p < BN / LD_ROWS; ++p) {
            const int r = ld_r + p * LD_ROWS;
            const int j = j0 + r;
            const bool ok = k_ok && j < n;
            cp_async_8(&Bs[s][ld_k][r], ok ? B + ((size_t)j * K + k) : B, ok);
        }
    };

    // Compute layout: 16 x 16 threads; thread (ty, tx) owns rows ty*8 .. ty*8+7 and columns
    // {2tx, 2tx+1, 32+2tx, 33+2tx}. A warp is 2 ty x 16 tx, so its A loads are 2 broadcast
    // addresses and its B loads are 256 contiguous bytes: no bank conflicts.
    const int tx = tid % (BN / TN);
    const int ty = tid / (BN / TN);

    double acc[TM][TN];
#pragma unroll
    for (int m = 0; m < TM; ++m)
#pragma unroll
        for (int c = 0; c < TN; ++c) acc[m][c] = 0.0;

    // Prologue: put STAGES-1 tiles in flight. Always commit, even an empty group, so the
    // group count in cp_async_wait stays in step with the tile count.
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < ntiles) load_tile(s, s);
        cp_async_commit();
    }

    for (int t = 0; t < ntiles; ++t) {
        cp_async_wait<STAGES - 2>();  // this thread's copies for tile t have landed
        __syncthreads();              // everyone's have, and everyone is done with tile t-1
        // Refill the slot tile t-1 used; it is free after the barrier above.
        const int tn = t + STAGES - 1;
        if (tn < ntiles) load_tile(tn, tn % STAGES);
        cp_async_commit();

        const int s = t % STAGES;
#pragma unroll
        for (int kk = 0; kk < BK; ++kk) {
            double a[TM], b[TN];
#pragma unroll
            for (int m = 0; m < TM; m += 2) {
                const double2 v = *reinterpret_cast<const double2*>(&As[s][kk][ty * TM + m]);
                a[m] = v.x;
                a[m + 1] = v.y;
            }
            const double2 b0 = *reinterpret_cast<const double2*>(&Bs[s][kk][2 * tx]);
            const double2 b1 = *reinterpret_cast<const double2*>(&Bs[s][kk][BN / 2 + 2 * tx]);
            b[0] = b0.x;
            b[1] = b0.y;
            b[2] = b1.x;
            b[3] = b1.y;
#pragma unroll
            for (int m = 0; m < TM; ++m)
#pragma unroll
                for (int c = 0; c < TN; ++c) acc[m][c] = fma(a[m], b[c], acc[m][c]);
        }
    }
    cp_async_wait<0>();  // nothing real is left in flight, but leave no copy behind

    // Epilogue: fold G[i][j] into the strict upper triangle. C[k][l] for k < l is
    // 0.5 (G[k][l] + G[l][k]), so an element above the diagonal goes to its own place, one
    // below it to the mirrored place, and the diagonal of G belongs to no output.
#pragma unroll
    for (int m = 0; m < TM; ++m) {
        const int i = i0 + ty * TM + m;
        if (i >= n) break;
#pragma unroll
        for (int c = 0; c < TN; ++c) {
            const int j = j0 + (c / 2) * (BN / 2) + 2 * tx + (c % 2);
            if (j >= n) continue;
            const double v = 0.5 * acc[m][c];
            if (i < j)
                atomicAdd(C + ((size_t)i * n + j), v);
            else if (i > j)
                atomicAdd(C + ((size_t)j * n + i), v);
        }
    }
}

void syr2k(int n, const double* A, const double* B, double* C) {
    if (n < 2) return;  // no pair k < l: nothing to update

    // Resident blocks across the GPU, looked up once (the harness uses one device).
    static int slots = 0;
    if (slots == 0) {
        int dev = 0, sms = 0, per_sm = 0;
        CUDA_CHECK(cudaGetDevice(&dev));
        CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
        CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, syr2k_kernel, NTHREADS, 0));
        slots = sms * (per_sm > 0 ? per_sm : 1);
    }

    const int row_tiles = (n + BM - 1) / BM;
    const int col_tiles = (n + BN - 1) / BN;
    const int tiles = row_tiles * col_tiles;
    const long long ktiles_all = ((long long)n * n + BK - 1) / BK;
    // Fill one wave of blocks, but keep at least MIN_KTILES k-tiles per split.
    long long splits = slots / tiles;
    if (splits > ktiles_all / MIN_KTILES) splits = ktiles_all / MIN_KTILES;
    if (splits < 1) splits = 1;

    // n = 256 on 132 SMs: 8 tiles x 33 splits = 264 blocks; n = 2: one block.
    syr2k_kernel<<<(unsigned)(tiles * splits), NTHREADS>>>(n, col_tiles, tiles, (int)splits, A, B, C);
    CUDA_CHECK(cudaGetLastError());
}
