/*
Reference kernel for trmm: B <- B + triu(A) * B, FP64, row-major n x n, in place.

The sequential definition is

    for (i = 0; i < n; i++)
      for (j = 0; j < n; j++)
        for (k = i; k < n; k++)
          B[i][j] += A[i][k] * B[k][j];

Row i only reads rows k >= i, which the loop has not touched yet, so every read sees
the old B and the whole thing is one matrix product plus the identity:

    B_new[i][j] = B_old[i][j] + sum_{k >= i} A[i][k] * B_old[k][j]

Work: sum_i (n - i) * n FMAs = n^2 (n+1) / 2 FMAs = n^2 (n+1) FLOP. For n = 4096 that is
6.9e10 FLOP, half of a 4096 GEMM. H100 SXM does ~34 TFLOP/s of FP64 on the CUDA cores
(67 on the FP64 tensor cores, not used here), so the floor is ~2 ms. Bytes: A and B are
128 MiB each, ~0.1 ms at 3 TB/s, so this is compute bound and the job is to keep the DFMA
pipes fed from registers.

Design:
- The grid runs in parallel, so blocks would read rows of B that other blocks are
  writing. We first copy B into a workspace W (B_old) and read only W in the main loop;
  at 2 x 128 MiB of traffic that is ~0.1 ms, ~4% of the kernel at n = 4096.
- Each block computes a 128 x 64 tile of the output (BM x BN) with 256 threads; each
  thread owns an 8 x 4 register block (32 FP64 accumulators = 64 registers).
  Per k step a thread loads 8 + 4 doubles from shared memory (six 16-byte loads) and
  issues 32 DFMAs: 2.7 FMA per double loaded, enough that shared memory bandwidth
  (128 B/clk/SM) stays well under the DFMA rate (64/clk/SM).
- Only k >= i contributes, so row block [i0, i0 + BM) walks k from i0 to n and skips
  the all-zero tiles left of the diagonal: that is where the 2x over GEMM comes from.
  The tiles that straddle the diagonal are masked while loading (A[i][k] = 0 for k < i),
  so the inner loop has no branches.
- A tile of A is stored transposed in shared memory (As[k][i]) so a thread's 8 rows for
  one k are contiguous and come in as 4 x 16-byte loads. The row stride is padded to
  BM + 2 doubles, which keeps the transposing stores near conflict free and the rows
  16-byte aligned.
- Global -> shared copies use cp.async (LDGSTS) in a 3-stage ring with BK = 8: no
  staging registers, so the kernel fits in 128 registers and two blocks (16 warps) run
  per SM, and the loads for tile t+2 are in flight while tile t is computed. Out of
  range or below-diagonal elements are zero-filled by the copy itself (src-size 0).
  3 stages x (8 x 130 + 8 x 64) doubles = 36.4 KiB of static shared memory per block.
- Row block r costs (n - r*BM) / BK tiles, so the first row block is the heaviest and
  the last one nearly free. Blocks are numbered row block major, small i first, so the
  long blocks start in the first wave and the short ones fill the tail.
- The identity term B_old[i][j] is added in the epilogue, with 16-byte loads and
  stores when n is even (rows then start 16-byte aligned).
*/

#include <cstddef>
#include <cstdint>
#include "cuda_check.cuh"

constexpr int BM = 128;               // rows of B (index i) per block
constexpr int BN = 64;                // columns of B (index j) per block
constexpr int BK = 8;                 // k per pipeline stage
constexpr int TM = 8;                 // rows per thread
constexpr int TN = 4;                 // columns per thread: two pairs, 32 columns apart
constexpr int STAGES = 3;             // cp.async ring depth
constexpr int NTHREADS = (BM / TM) * (BN / TN);  // 16 x 16 = 256
constexpr int AS_STRIDE = BM + 2;     // padded row of the transposed A tile

static_assert(NTHREADS == 256, "thread layout below assumes 16 x 16 threads");
static_assert(BM % BK == 0, "row blocks must start on a k-tile boundary");
static_assert((BM * BK) % NTHREADS == 0 && (BK * BN) % NTHREADS == 0, "whole loads per thread");
static_assert(NTHREADS % BK == 0 && NTHREADS % BN == 0, "loader layout");

// 8-byte global -> shared async copy. src_bytes = 0 writes zeros and reads nothing,
// which is how the masked elements (outside the matrix, or below the diagonal) get in.
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

// One block: output rows [i0, i0 + BM), columns [j0, j0 + BN).
// A: the triangular operand. W: B_old (workspace copy). B: output.
__global__ void __launch_bounds__(NTHREADS, 2)
trmm_kernel(int n, int col_blocks, const double* __restrict__ A, const double* __restrict__ W,
            double* __restrict__ B, bool vec_io) {
    __shared__ __align__(16) double As[STAGES][BK][AS_STRIDE];  // As[s][k][i]: A tile, transposed
    __shared__ __align__(16) double Bs[STAGES][BK][BN];         // Bs[s][k][j]: W tile

    const int tid = threadIdx.x;
    // Row block major, so blockIdx 0.. are the heaviest row block (the scheduler hands
    // out blocks roughly in index order).
    const int i0 = (blockIdx.x / col_blocks) * BM;
    const int j0 = (blockIdx.x % col_blocks) * BN;
    const int ntiles = (n - i0 + BK - 1) / BK;  // k tiles from the diagonal to the end, >= 1

    // Loader layout. A tile (BM x BK): 8 consecutive threads read one row's 8 k values
    // (one 64-byte run), 32 rows per pass, 4 passes. W tile (BK x BN): 64 consecutive
    // threads read one 512-byte row segment, 4 rows per pass, 2 passes.
    const int a_k = tid % BK;
    const int a_r = tid / BK;
    const int b_j = tid % BN;
    const int b_k = tid / BN;

    auto load_tile = [&](int t, int s) {
        const int k0 = i0 + t * BK;
#pragma unroll
        for (int p = 0; p < (BM * BK) / NTHREADS; ++p) {
            const int r = a_r + p * (NTHREADS / BK);
            const int i = i0 + r;
            const int k = k0 + a_k;
            // k >= i masks the diagonal tiles (and, since k < n, also i < n).
            const bool ok = (k >= i) && (k < n);
            cp_async_8(&As[s][a_k][r], ok ? A + (size_t)i * n + k : A, ok);
        }
#pragma unroll
        for (int p = 0; p < (BK * BN) / NTHREADS; ++p) {
            const int kr = b_k + p * (NTHREADS / BN);
            const int k = k0 + kr;
            const int j = j0 + b_j;
            const bool ok = (k < n) && (j < n);
            cp_async_8(&Bs[s][kr][b_j], ok ? W + (size_t)k * n + j : W, ok);
        }
    };

    // Compute layout: 16 x 16 threads; thread (ty, tx) owns rows ty*8 .. ty*8+7 and
    // columns {2tx, 2tx+1, 32+2tx, 33+2tx}. A warp is 2 ty x 16 tx, so its A loads are
    // 2 broadcast addresses and its W loads are 256 contiguous bytes: no bank conflicts.
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

    // Epilogue: B[i][j] = B_old[i][j] + acc. Each half-row store of a warp covers 256
    // contiguous bytes.
#pragma unroll
    for (int m = 0; m < TM; ++m) {
        const int i = i0 + ty * TM + m;
        if (i >= n) break;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int j = j0 + h * (BN / 2) + 2 * tx;
            const size_t idx = (size_t)i * n + j;
            if (vec_io) {
                // n even, j even: idx is even, so the pair is 16-byte aligned, and j < n
                // implies j + 1 < n.
                if (j < n) {
                    const double2 old = *reinterpret_cast<const double2*>(W + idx);
                    double2 out;
                    out.x = old.x + acc[m][2 * h];
                    out.y = old.y + acc[m][2 * h + 1];
                    *reinterpret_cast<double2*>(B + idx) = out;
                }
            } else {
                if (j < n) B[idx] = W[idx] + acc[m][2 * h];
                if (j + 1 < n) B[idx + 1] = W[idx + 1] + acc[m][2 * h + 1];
            }
        }
    }
}

void trmm(int n, const double* A, double* B) {
    if (n <= 0) return;

    // Workspace for B_old, kept across calls and grown as needed, so timed repeats do
    // not pay for an allocation. (cudaFree synchronizes, so growing it never frees
    // memory a kernel is still reading.)
    static double* ws = nullptr;
    static size_t ws_elems = 0;
    const size_t elems = (size_t)n * n;
    if (elems > ws_elems) {
        if (ws) CUDA_CHECK(cudaFree(ws));
        CUDA_CHECK(cudaMalloc(&ws, elems * sizeof(double)));
        ws_elems = elems;
    }
    CUDA_CHECK(cudaMemcpyAsync(ws, B, elems * sizeof(double), cudaMemcpyDeviceToDevice, 0));

    const int row_blocks = (n + BM - 1) / BM;
    const int col_blocks = (n + BN - 1) / BN;
    const bool vec_io = (n % 2 == 0) && ((reinterpret_cast<uintptr_t>(B) % 16) == 0) &&
                        ((reinterpret_cast<uintptr_t>(ws) % 16) == 0);
    // n = 4096: 32 x 64 = 2048 blocks over 132 SMs x 2 blocks; n = 1: one block.
    trmm_kernel<<<row_blocks * col_blocks, NTHREADS>>>(n, col_blocks, A, ws, B, vec_io);
    CUDA_CHECK(cudaGetLastError());
}
