/*
Reference kernel for matmul: C = A * B, FP64, row-major, A m x k, B k x n, C m x n.

The sequential definition is

    for (i = 0; i < m; i++)
      for (j = 0; j < n; j++) {
        C[i][j] = 0;
        for (p = 0; p < k; p++)
          C[i][j] += A[i][p] * B[p][j];
      }

Work: m n k FMAs = 2 m n k FLOP. For 4096^3 that is 1.4e11 FLOP. H100 SXM does ~34 TFLOP/s
of FP64 on the CUDA cores (67 on the FP64 tensor cores, which cuBLAS uses and this kernel
does not), so the floor here is ~4 ms. Bytes: A, B and C are 128 MiB each, ~0.13 ms at
3 TB/s, so this is compute bound and the job is to keep the DFMA pipes fed from registers.

Design (the trmm reference's kernel, without the triangle):
- Each block computes a 128 x 64 tile of C (BM x BN) with 256 threads; each thread owns an
  8 x 4 register block (32 FP64 accumulators = 64 registers). Per k step a thread loads
  8 + 4 doubles from shared memory (six 16-byte loads) and issues 32 DFMAs: 2.7 FMA per
  double loaded, enough that shared memory bandwidth (128 B/clk/SM) stays well under the
  DFMA rate (64/clk/SM).
- Per k step a block reads (128 + 64) x 8 bytes from L2 for 128 x 64 FMAs: 10.7 FLOP per
  byte, so 30 TFLOP/s needs ~2.8 TB/s of L2 -> SM traffic, within what the L2 delivers.
- A tile is stored transposed in shared memory (As[p][i]) so a thread's 8 rows for one p
  are contiguous and come in as 4 x 16-byte loads. The row stride is padded to BM + 2
  doubles, which keeps the transposing stores near conflict free and the rows 16-byte
  aligned.
- Global -> shared copies use cp.async (LDGSTS) in a 3-stage ring with BK = 8: no staging
  registers, so the kernel fits in 128 registers and two blocks (16 warps) run per SM, and
  the loads for tile t+2 are in flight while tile t is computed. Out-of-range elements
  (past m, n or k: none of the sizes need be a multiple of a tile) are zero-filled by the
  copy itself (src-size 0), so the inner loop has no branches.
  3 stages x (8 x 130 + 8 x 64) doubles = 36.4 KiB of static shared memory per block.
- A's tile is transposed on the way in, so it is copied 8 bytes at a time. B's tile row
  segments are copied 16 bytes at a time when every pair is 16-byte aligned (n even, B
  16-byte aligned); otherwise (odd n: row p starts at byte 8 p n) 8 bytes at a time.
  The same test picks 16-byte or 8-byte stores of C in the epilogue.
- 4096^3 is 32 x 64 = 2048 blocks, ~264 resident (132 SMs x 2). Blocks are handed out in
  groups of 8 row blocks, column by column, so a resident wave covers ~8 x 33 tiles:
  per wave it touches 32 MiB of A and 66 MiB of B instead of 16 MiB of A and all 128 MiB
  of B for a plain row-major order. ~100 MiB per wave is ~35 us of DRAM time against
  ~0.5 ms of compute per wave, so this is insurance for the L2 hit rate, not the bottleneck.
*/

#include <cstddef>
#include <cstdint>
#include "cuda_check.cuh"

constexpr int BM = 128;               // rows of C per block
constexpr int BN = 64;                // columns of C per block
constexpr int BK = 8;                 // k per pipeline stage
constexpr int TM = 8;                 // rows per thread
constexpr int TN = 4;                 // columns per thread: two pairs, 32 columns apart
constexpr int STAGES = 3;             // cp.async ring depth
constexpr int GROUP_M = 8;            // row blocks per scheduling group
constexpr int NTHREADS = (BM / TM) * (BN / TN);  // 16 x 16 = 256
constexpr int AS_STRIDE = BM + 2;     // padded row of the transposed A tile

static_assert(NTHREADS == 256, "thread layout below assumes 16 x 16 threads");
static_assert((BM * BK) % NTHREADS == 0 && (BK * BN) % NTHREADS == 0, "whole loads per thread");
static_assert(NTHREADS % BK == 0 && NTHREADS % BN == 0, "loader layout");
static_assert(BK * (BN / 2) == NTHREADS, "16-byte B loader: one pair per thread");

// 8-byte global -> shared async copy. src_bytes = 0 writes zeros and reads nothing, which is
// how the elements outside the matrix get in.
__device__ __forceinline__ void cp_async_8(void* smem, const void* gmem, bool valid) {
    const unsigned saddr = static_cast<unsigned>(__cvta_generic_to_shared(smem));
    const int src_bytes = valid ? 8 : 0;
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(saddr), "l"(gmem),
                 "r"(src_bytes)
                 : "memory");
}

// 16-byte version (both addresses 16-byte aligned). .cg: skip L1, the tile is used once.
__device__ __forceinline__ void cp_async_16(void* smem, const void* gmem, bool valid) {
    const unsigned saddr = static_cast<unsigned>(__cvta_generic_to_shared(smem));
    const int src_bytes = valid ? 16 : 0;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(saddr), "l"(gmem),
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

// One block: C rows [i0, i0 + BM), columns [j0, j0 + BN).
__global__ void __launch_bounds__(NTHREADS, 2)
matmul_kernel(int m, int n, int k, int row_blocks, int col_blocks, const double* __restrict__ A,
              const double* __restrict__ B, double* __restrict__ C, bool vec_io) {
    __shared__ __align__(16) double As[STAGES][BK][AS_STRIDE];  // As[s][p][i]: A tile, transposed
    __shared__ __align__(16) double Bs[STAGES][BK][BN];         // Bs[s][p][j]: B tile

    const int tid = threadIdx.x;

    // Grouped order: consecutive block ids walk down GROUP_M row blocks, then move one
    // column block right. The last group may have fewer row blocks.
    const int per_group = GROUP_M * col_blocks;
    const int group = blockIdx.x / per_group;
    const int first_rb = group * GROUP_M;
    const int gsize = min(row_blocks - first_rb, GROUP_M);
    const int in_group = blockIdx.x - group * per_group;
    const int i0 = (first_rb + in_group % gsize) * BM;
    const int j0 = (in_group / gsize) * BN;
    const int ntiles = (k + BK - 1) / BK;

    // Loader layout. A tile (BM x BK): 8 consecutive threads read one row's 8 k values (one
    // 64-byte run), 32 rows per pass, 4 passes. B tile (BK x BN): 8-byte path, 64
    // consecutive threads read one 512-byte row segment, 4 rows per pass, 2 passes; 16-byte
    // path, 32 consecutive threads read one row segment as pairs, 8 rows in one pass.
    const int a_k = tid % BK;
    const int a_r = tid / BK;
    const int b_j = tid % BN;
    const int b_k = tid / BN;
    const int v_j = 2 * (tid % (BN / 2));
    const int v_k = tid / (BN / 2);

    auto load_tile = [&](int t, int s) {
        const int k0 = t * BK;
#pragma unroll
        for (int q = 0; q < (BM * BK) / NTHREADS; ++q) {
            const int r = a_r + q * (NTHREADS / BK);
            const int i = i0 + r;
            const int p = k0 + a_k;
            const bool ok = (i < m) && (p < k);
            cp_async_8(&As[s][a_k][r], ok ? A + (size_t)i * k + p : A, ok);
        }
        if (vec_io) {
            // n even and j even: j < n implies j + 1 < n, so a pair is all in or all out.
            const int p = k0 + v_k;
            const int j = j0 + v_j;
            const bool ok = (p < k) && (j < n);
            cp_async_16(&Bs[s][v_k][v_j], ok ? B + (size_t)p * n + j : B, ok);
        } else {
#pragma unroll
            for (int q = 0; q < (BK * BN) / NTHREADS; ++q) {
                const int kr = b_k + q * (NTHREADS / BN);
                const int p = k0 + kr;
                const int j = j0 + b_j;
                const bool ok = (p < k) && (j < n);
                cp_async_8(&Bs[s][kr][b_j], ok ? B + (size_t)p * n + j : B, ok);
            }
        }
    };

    // Compute layout: 16 x 16 threads; thread (ty, tx) owns rows ty*8 .. ty*8+7 and columns
    // {2tx, 2tx+1, 32+2tx, 33+2tx}. A warp is 2 ty x 16 tx, so its A loads are 2 broadcast
    // addresses and its B loads are 256 contiguous bytes: no bank conflicts.
    const int tx = tid % (BN / TN);
    const int ty = tid / (BN / TN);

    double acc[TM][TN];
#pragma unroll
    for (int r = 0; r < TM; ++r)
#pragma unroll
        for (int c = 0; c < TN; ++c) acc[r][c] = 0.0;

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
            for (int r = 0; r < TM; r += 2) {
                const double2 v = *reinterpret_cast<const double2*>(&As[s][kk][ty * TM + r]);
                a[r] = v.x;
                a[r + 1] = v.y;
            }
            const double2 b0 = *reinterpret_cast<const double2*>(&Bs[s][kk][2 * tx]);
            const double2 b1 = *reinterpret_cast<const double2*>(&Bs[s][kk][BN / 2 + 2 * tx]);
            b[0] = b0.x;
            b[1] = b0.y;
            b[2] = b1.x;
            b[3] = b1.y;
#pragma unroll
            for (int r = 0; r < TM; ++r)
#pragma unroll
                for (int c = 0; c < TN; ++c) acc[r][c] = fma(a[r], b[c], acc[r][c]);
        }
    }
    cp_async_wait<0>();  // nothing real is left in flight, but leave no copy behind

    // Epilogue: every C element inside the matrix is written (k = 0 would write zeros).
    // Each half-row store of a warp covers 256 contiguous bytes.
#pragma unroll
    for (int r = 0; r < TM; ++r) {
        const int i = i0 + ty * TM + r;
        if (i >= m) break;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int j = j0 + h * (BN / 2) + 2 * tx;
            const size_t idx = (size_t)i * n + j;
            if (vec_io) {
                // n even, j even: idx is even, so the pair is 16-byte aligned, and j < n
                // implies j + 1 < n.
                if (j < n)
                    *reinterpret_cast<double2*>(C + idx) =
                        make_double2(acc[r][2 * h], acc[r][2 * h + 1]);
            } else {
                if (j < n) C[idx] = acc[r][2 * h];
                if (j + 1 < n) C[idx + 1] = acc[r][2 * h + 1];
            }
        }
    }
}

void matmul(int m, int n, int k, const double* A, const double* B, double* C) {
    if (m <= 0 || n <= 0) return;
    if (k < 0) k = 0;

    const int row_blocks = (m + BM - 1) / BM;
    const int col_blocks = (n + BN - 1) / BN;
    const bool vec_io = (n % 2 == 0) && ((reinterpret_cast<uintptr_t>(B) % 16) == 0) &&
                        ((reinterpret_cast<uintptr_t>(C) % 16) == 0);
    // 4096^3: 32 x 64 = 2048 blocks, ~7.8 waves of 264; 1x1x1: one block.
    matmul_kernel<<<row_blocks * col_blocks, NTHREADS>>>(m, n, k, row_blocks, col_blocks, A, B, C,
                                                          vec_io);
    CUDA_CHECK(cudaGetLastError());
}
