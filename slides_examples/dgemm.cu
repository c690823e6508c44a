// dgemm.cu: C = A B in FP64, the course's matrix-multiply report as a progression.
//
// Row-major n x n matrices; every kernel handles any n (bounds checks).
//
//   v1  one thread does the whole product (<<<1, 1>>>)
//         The CPU loop moved to the GPU as is: one core of one SM out of ~17,000 FP64 lanes.
//         Napkin math: each step of k waits on two loads (~30-600 cycles); at ~1.8 GHz that is
//         well under 0.1 GFLOPS. Timed at n = 256, one run (2048 would take minutes).
//   v2  one thread per element of C
//         n^2 threads: the parallelism is there, but each thread does 2 loads per FMA.
//   v3  two elements per thread (rows r and r + 1 of one column)
//         B[k][col] is loaded once and used twice: half the B traffic, and two independent FMA
//         chains per thread, so the scheduler has a second instruction ready while one waits.
//   v4  a strided 4 x 4 block of elements per thread
//         Thread (ty, tx) owns rows ty + 16 i and columns tx + 16 j of a 64 x 64 tile: each A
//         value is used 4 times and each B value 4 times, from registers. 8 loads per 16 FMAs.
//         Strided (not adjacent) so a warp's loads of B and stores of C stay coalesced.
//   v5  shared-memory tiles (with v4's 4 x 4 block per thread)
//         The 64 x 16 tiles of A and B are loaded into shared memory once per block, not
//         through L1/L2 by each thread: 64 x 64 x 16 FMAs per 2 x 64 x 16 doubles from global.
//   v6  cuBLAS DGEMM: the library, using the FP64 tensor cores (DMMA) on sm_80 and later.
//
// Checked against the CPU at n = 131 (a multiple of no tile), then on 64 sampled entries of the
// timed n = 2048 product. Rate: GFLOPS = 2 n^3 / time; the peak is the datasheet FP64 rate.
#include "common.cuh"

#include <cublas_v2.h>

using slides::Version;

static const Version kVersions[] = {
    {"one thread does the whole product"},
    {"one thread per element"},
    {"two elements per thread"},
    {"strided 4x4 block of elements per thread"},
    {"shared-memory tiles (4x4 per thread)"},
    {"cuBLAS DGEMM"},
};
static const int kCount = sizeof(kVersions) / sizeof(kVersions[0]);

// ------------------------------------------------------------------------------------------------
// CPU reference (i-k-j order: the inner loop streams through rows of B and C).
static void dgemm_cpu(int n, const double* A, const double* B, double* C) {
    for (size_t i = 0; i < (size_t)n * n; ++i) C[i] = 0.0;
    for (int i = 0; i < n; ++i)
        for (int k = 0; k < n; ++k) {
            double a = A[(size_t)i * n + k];
            for (int j = 0; j < n; ++j) C[(size_t)i * n + j] += a * B[(size_t)k * n + j];
        }
}

// ------------------------------------------------------------------------------------------------
// v1: the CPU loop, on one GPU thread.
__global__ void dgemm_single_thread(int n, const double* A, const double* B, double* C) {
    for (int i = 0; i < n; ++i)
        for (int j = 0; j < n; ++j) {
            double s = 0.0;
            for (int k = 0; k < n; ++k) s += A[(size_t)i * n + k] * B[(size_t)k * n + j];
            C[(size_t)i * n + j] = s;
        }
}

// v2: one thread per element; threadIdx.x along a row of C so a warp reads consecutive B.
__global__ void dgemm_per_element(int n, const double* A, const double* B, double* C) {
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < n && col < n) {
        double s = 0.0;
        for (int k = 0; k < n; ++k) s += A[(size_t)row * n + k] * B[(size_t)k * n + col];
        C[(size_t)row * n + col] = s;
    }
}

// v3: two elements per thread, rows 2r and 2r + 1 of one column: one load of B feeds both.
__global__ void dgemm_two_per_thread(int n, const double* A, const double* B, double* C) {
    int row = 2 * (blockIdx.y * blockDim.y + threadIdx.y);
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= n || col >= n) return;
    bool second = row + 1 < n;
    const double* a0 = A + (size_t)row * n;
    const double* a1 = second ? a0 + n : a0;  // the last odd row: compute it twice, store once
    double s0 = 0.0, s1 = 0.0;
    for (int k = 0; k < n; ++k) {
        double b = B[(size_t)k * n + col];
        s0 += a0[k] * b;
        s1 += a1[k] * b;
    }
    C[(size_t)row * n + col] = s0;
    if (second) C[(size_t)(row + 1) * n + col] = s1;
}

// v4: a strided 4 x 4 block per thread, from global memory (L1/L2) into registers.
#define RB 4        // elements per thread in each direction
#define RT 16       // threads per block in each direction
#define RTILE (RB * RT)  // 64: the tile of C a block computes
__global__ void __launch_bounds__(RT * RT) dgemm_block_per_thread(int n, const double* A, const double* B, double* C) {
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row0 = blockIdx.y * RTILE + ty, col0 = blockIdx.x * RTILE + tx;
    double acc[RB][RB] = {};
    for (int k = 0; k < n; ++k) {
        double a[RB], b[RB];
#pragma unroll
        for (int i = 0; i < RB; ++i) {
            int r = row0 + RT * i, c = col0 + RT * i;
            a[i] = r < n ? A[(size_t)r * n + k] : 0.0;
            b[i] = c < n ? B[(size_t)k * n + c] : 0.0;
        }
#pragma unroll
        for (int i = 0; i < RB; ++i)
#pragma unroll
            for (int j = 0; j < RB; ++j) acc[i][j] += a[i] * b[j];
    }
#pragma unroll
    for (int i = 0; i < RB; ++i)
#pragma unroll
        for (int j = 0; j < RB; ++j) {
            int r = row0 + RT * i, c = col0 + RT * j;
            if (r < n && c < n) C[(size_t)r * n + c] = acc[i][j];
        }
}

// v5: v4's thread layout, with the 64 x 16 tiles of A and B staged in shared memory. Each double
// loaded from global memory is used 64 times by the block instead of being fetched again by
// every thread that needs it. Out-of-range elements are loaded as 0.
#define SK 16
__global__ void __launch_bounds__(RT * RT) dgemm_shared_tiles(int n, const double* A, const double* B, double* C) {
    __shared__ double As[SK][RTILE + 1];  // As[k][row]: transposed, +1 keeps the stores conflict-free
    __shared__ double Bs[SK][RTILE];
    const int tx = threadIdx.x, ty = threadIdx.y, t = ty * RT + tx;
    const int rowb = blockIdx.y * RTILE, colb = blockIdx.x * RTILE;
    double acc[RB][RB] = {};
    for (int k0 = 0; k0 < n; k0 += SK) {
        for (int l = t; l < RTILE * SK; l += RT * RT) {
            int r = l / SK, k = l % SK;
            As[k][r] = (rowb + r < n && k0 + k < n) ? A[(size_t)(rowb + r) * n + k0 + k] : 0.0;
            int kb = l / RTILE, c = l % RTILE;
            Bs[kb][c] = (k0 + kb < n && colb + c < n) ? B[(size_t)(k0 + kb) * n + colb + c] : 0.0;
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < SK; ++k) {
            double a[RB], b[RB];
#pragma unroll
            for (int i = 0; i < RB; ++i) {
                a[i] = As[k][ty + RT * i];
                b[i] = Bs[k][tx + RT * i];
            }
#pragma unroll
            for (int i = 0; i < RB; ++i)
#pragma unroll
                for (int j = 0; j < RB; ++j) acc[i][j] += a[i] * b[j];
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < RB; ++i)
#pragma unroll
        for (int j = 0; j < RB; ++j) {
            int r = rowb + ty + RT * i, c = colb + tx + RT * j;
            if (r < n && c < n) C[(size_t)r * n + c] = acc[i][j];
        }
}

// ------------------------------------------------------------------------------------------------
static cublasHandle_t g_cublas;

static void launch(int v, int n, const double* A, const double* B, double* C) {
    switch (v) {
    case 1: dgemm_single_thread<<<1, 1>>>(n, A, B, C); break;
    case 2: {
        dim3 block(32, 8), grid((n + 31) / 32, (n + 7) / 8);
        dgemm_per_element<<<grid, block>>>(n, A, B, C);
        break;
    }
    case 3: {
        dim3 block(32, 8), grid((n + 31) / 32, ((n + 1) / 2 + 7) / 8);
        dgemm_two_per_thread<<<grid, block>>>(n, A, B, C);
        break;
    }
    case 4: {
        dim3 block(RT, RT), grid((n + RTILE - 1) / RTILE, (n + RTILE - 1) / RTILE);
        dgemm_block_per_thread<<<grid, block>>>(n, A, B, C);
        break;
    }
    case 5: {
        dim3 block(RT, RT), grid((n + RTILE - 1) / RTILE, (n + RTILE - 1) / RTILE);
        dgemm_shared_tiles<<<grid, block>>>(n, A, B, C);
        break;
    }
    case 6: {
        // Row-major C = A B is column-major C^T = B^T A^T: swap the operands, no transposes.
        const double one = 1.0, zero = 0.0;
        if (cublasDgemm(g_cublas, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, B, n, A, n, &zero, C, n) !=
            CUBLAS_STATUS_SUCCESS) {
            std::fprintf(stderr, "cublasDgemm failed\n");
            std::exit(1);
        }
        break;
    }
    }
    CUDA_CHECK(cudaGetLastError());
}

// ------------------------------------------------------------------------------------------------
int main(int argc, char** argv) {
    slides::Bench bench(argc, argv, "dgemm", "fp64", kVersions, kCount);
    if (cublasCreate(&g_cublas) != CUBLAS_STATUS_SUCCESS) { std::fprintf(stderr, "cublasCreate failed\n"); return 1; }

    const int nc = 131;      // check size: a multiple of no tile, 4.5 MFLOP on the CPU
    const int n = 2048;      // timed size: 17 GFLOP, ~0.3 ms for cuBLAS, tens of ms for v2
    const int n_single = 256;  // v1's timed size: 34 MFLOP on one thread is already ~0.5 s
    const double tol = 1e-12;  // FP64 over n <= 2048 terms gives ~1e-15; FP32 anywhere ~1e-7

    std::vector<double> hA((size_t)n * n), hB((size_t)n * n), hC((size_t)n * n);
    slides::fill_uniform(hA, 11);
    slides::fill_uniform(hB, 12);
    std::vector<double> cA((size_t)nc * nc), cB((size_t)nc * nc), cC((size_t)nc * nc), cRef((size_t)nc * nc);
    slides::fill_uniform(cA, 13);
    slides::fill_uniform(cB, 14);
    dgemm_cpu(nc, cA.data(), cB.data(), cRef.data());

    double *dA, *dB, *dC;
    CUDA_CHECK(cudaMalloc(&dA, hA.size() * sizeof(double)));
    CUDA_CHECK(cudaMalloc(&dB, hB.size() * sizeof(double)));
    CUDA_CHECK(cudaMalloc(&dC, hC.size() * sizeof(double)));
    CUDA_CHECK(cudaMemcpy(dA, hA.data(), hA.size() * sizeof(double), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(dB, hB.data(), hB.size() * sizeof(double), cudaMemcpyHostToDevice));
    double *dcA, *dcB, *dcC;
    CUDA_CHECK(cudaMalloc(&dcA, cA.size() * sizeof(double)));
    CUDA_CHECK(cudaMalloc(&dcB, cB.size() * sizeof(double)));
    CUDA_CHECK(cudaMalloc(&dcC, cC.size() * sizeof(double)));
    CUDA_CHECK(cudaMemcpy(dcA, cA.data(), cA.size() * sizeof(double), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(dcB, cB.data(), cB.size() * sizeof(double), cudaMemcpyHostToDevice));

    for (int v : bench.selected()) {
        // 1. Full check at n = 131, output poisoned with NaN so that unwritten elements fail.
        CUDA_CHECK(cudaMemset(dcC, 0xff, cC.size() * sizeof(double)));
        launch(v, nc, dcA, dcB, dcC);
        CUDA_CHECK(cudaMemcpy(cC.data(), dcC, cC.size() * sizeof(double), cudaMemcpyDeviceToHost));
        if (!bench.check(v, slides::rel_error(cC.data(), cRef.data(), cC.size()), tol, "n=131")) continue;

        // 2. The timed size (v1: 256, the others 2048): warm-up run, sampled check, then timed.
        const int m = v == 1 ? n_single : n;
        if (v == 1) {  // A and B at n = 256: the leading 256 x 256 block's numbers, packed
            for (int i = 0; i < m; ++i)
                CUDA_CHECK(cudaMemcpy(dA + (size_t)i * m, hA.data() + (size_t)i * n, m * sizeof(double), cudaMemcpyHostToDevice));
            for (int i = 0; i < m; ++i)
                CUDA_CHECK(cudaMemcpy(dB + (size_t)i * m, hB.data() + (size_t)i * n, m * sizeof(double), cudaMemcpyHostToDevice));
        }
        CUDA_CHECK(cudaMemset(dC, 0xff, (size_t)m * m * sizeof(double)));
        launch(v, m, dA, dB, dC);
        std::vector<double> out((size_t)m * m);
        CUDA_CHECK(cudaMemcpy(out.data(), dC, out.size() * sizeof(double), cudaMemcpyDeviceToHost));
        double err = slides::sampled_rel_error(out, 64, 15 + v, [&](size_t idx) {
            size_t i = idx / m, j = idx % m;  // entry (i, j) of the m x m product of A's and B's leading blocks
            double s = 0;
            for (int k = 0; k < m; ++k) s += hA[i * n + k] * hB[(size_t)k * n + j];
            return s;
        });
        char what[64];
        std::snprintf(what, sizeof what, "64 sampled entries at n=%d", m);
        if (!bench.check(v, err, tol, what)) continue;
        char size[32];
        std::snprintf(size, sizeof size, "n=%d", m);
        bench.time(v, [&] { launch(v, m, dA, dB, dC); }, 2.0 * m * m * m, "GFLOPS", size,
                   v == 1 ? 1 : 25);
        if (v == 1) {  // put the full matrices back for the others
            CUDA_CHECK(cudaMemcpy(dA, hA.data(), hA.size() * sizeof(double), cudaMemcpyHostToDevice));
            CUDA_CHECK(cudaMemcpy(dB, hB.data(), hB.size() * sizeof(double), cudaMemcpyHostToDevice));
        }
    }
    cublasDestroy(g_cublas);
    for (double* p : {dA, dB, dC, dcA, dcB, dcC}) CUDA_CHECK(cudaFree(p));
    return 0;
}
