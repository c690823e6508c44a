// expect: incorrect
// The inner loop only takes whole 32-wide pieces of the n^2-long sum, so the last n^2 % 32 products are dropped (all of them at n = 2) and only n that are multiples of 8 come out right. tiled_split_k.cu is this kernel without the flaw.
#include "cuda_check.cuh"

#define TILE 32      // C tile is TILE x TILE; the inner index is staged TILE at a time
#define ROWS 8       // threads per block in y; each thread computes TILE / ROWS = 4 outputs
#define KCHUNK 2048  // inner-index slice per block (a multiple of TILE)

// Split-K, shared-memory tiled. Block (bx, by, bz) computes the 32 x 32 tile of C with rows
// k0 = 32 by.. and columns l0 = 32 bx.., over the slice [bz KCHUNK, (bz+1) KCHUNK) of the
// n^2-long inner index m = i n + j; the slices are added into C with atomicAdd. Each thread
// owns 4 outputs (rows ty, ty+8, ty+16, ty+24 of the tile, column tx). Output (k, l) needs
// A[k], B[k], A[l] and B[l], so the block stages a 32 x 32 piece of each.
__global__ void syr2k_kernel(int n, const double* __restrict__ A, const double* __restrict__ B,
                             double* __restrict__ C) {
    // Ak[r][mm] = A[k0 + r][m0 + mm], and likewise for the other three. The +1 pad puts a
    // warp's column reads (Al[tx][mm], tx = 0..31) in distinct banks.
    __shared__ double Ak[TILE][TILE + 1];
    __shared__ double Bk[TILE][TILE + 1];
    __shared__ double Al[TILE][TILE + 1];
    __shared__ double Bl[TILE][TILE + 1];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int k0 = blockIdx.y * TILE;
    const int l0 = blockIdx.x * TILE;
    if (blockIdx.x < blockIdx.y) return;  // tile entirely below the diagonal: nothing to add
    const size_t K = (size_t)n * n;  // inner dimension: one row of A or B
    const size_t mbeg = (size_t)blockIdx.z * KCHUNK;
    const size_t mend = mbeg + KCHUNK < K ? mbeg + KCHUNK : K;

    double sum[TILE / ROWS] = {0, 0, 0, 0};
    // Whole tiles only, so the copies below need no check on m (and stay in bounds).
    for (size_t m0 = mbeg; m0 + TILE <= mend; m0 += TILE) {
        const size_t m = m0 + tx;
        for (int r = ty; r < TILE; r += ROWS) {
            const int k = k0 + r, l = l0 + r;
            const bool kok = k < n;
            const bool lok = l < n;
            Ak[r][tx] = kok ? A[k * K + m] : 0;
            Bk[r][tx] = kok ? B[k * K + m] : 0;
            Al[r][tx] = lok ? A[l * K + m] : 0;
            Bl[r][tx] = lok ? B[l * K + m] : 0;
        }
        __syncthreads();
        for (int mm = 0; mm < TILE; ++mm) {
            const double al = Al[tx][mm], bl = Bl[tx][mm];  // column l = l0 + tx
#pragma unroll
            for (int q = 0; q < TILE / ROWS; ++q) {
                const int r = ty + q * ROWS;  // row k = k0 + r
                sum[q] += al * Bk[r][mm] + Ak[r][mm] * bl;
            }
        }
        __syncthreads();
    }

    // Only k < l belongs to the answer; the rest of C must keep its bits.
    const int l = l0 + tx;
#pragma unroll
    for (int q = 0; q < TILE / ROWS; ++q) {
        const int k = k0 + ty + q * ROWS;
        if (k < l && l < n) atomicAdd(C + ((size_t)k * n + l), 0.5 * sum[q]);
    }
}

void syr2k(int n, const double* A, const double* B, double* C) {
    if (n < 2) return;  // no pair k < l
    const size_t K = (size_t)n * n;
    const int tiles = (n + TILE - 1) / TILE;
    // n = 256: 8 x 8 tiles x 32 slices of 2048; n = 17: one tile, one slice.
    dim3 block(TILE, ROWS);
    dim3 grid(tiles, tiles, (unsigned)((K + KCHUNK - 1) / KCHUNK));
    syr2k_kernel<<<grid, block>>>(n, A, B, C);
    CUDA_CHECK(cudaGetLastError());
}
