// matmul.cu: C = A B in FP32, the lecture's progression from global memory to register blocking.
//
// Row-major, A is M x K, B is K x N, C is M x N; every kernel handles any sizes (bounds checks).
//
//   v1  one thread per element, from global memory
//         Each thread reads a row of A and a column of B: 2K loads for 2K flops.
//         Napkin math: 1 flop per 4-byte load. At ~3 TB/s of DRAM that would be ~0.75 TFLOPS;
//         the caches give some reuse back, but the SMs mostly wait for loads.
//   v2  shared-memory tiles of TILE_WIDTH x TILE_WIDTH (the lecture's kernel, bounds checks added)
//         A block loads a tile of A and a tile of B once into shared memory and every thread of
//         the block reuses them: TILE_WIDTH flops per global load instead of 1 (16 here).
//         Now shared memory is the limit: 2 shared loads per FMA.
//   v3  register blocking: 128 x 128 tiles, each thread computes an 8 x 8 block of C in registers
//         A thread loads 8 values of A and 8 of B from shared memory and does 64 FMAs with them:
//         4 FMAs per shared load instead of 0.5, and 64 flops per global load instead of 16.
//         The arithmetic units, not the loads, become the limit.
//   v4  cuBLAS SGEMM, for reference: how far the library goes on this GPU (FP32, no TF32)
//
// Checked against the CPU on a shape that is a multiple of no tile (517 x 389 x 301), then on
// 64 sampled entries of the timed 4096 x 4096 x 4096 product. Rate: GFLOPS = 2 M N K / time.
#include "common.cuh"

#include <cublas_v2.h>

using slides::Version;

static const Version kVersions[] = {
    {"one thread per element (global memory)"},
    {"shared-memory tiles (TILE_WIDTH=16)"},
    {"register blocking (8x8 per thread, 128x128 tiles)"},
    {"cuBLAS SGEMM (reference)"},
};
static const int kCount = sizeof(kVersions) / sizeof(kVersions[0]);

// ------------------------------------------------------------------------------------------------
// CPU reference, accumulated in double (the i-k-j order streams through B and C rows).
static void matmul_cpu(int M, int N, int K, const float* A, const float* B, double* C) {
    for (int i = 0; i < M * N; ++i) C[i] = 0.0;
    for (int i = 0; i < M; ++i)
        for (int k = 0; k < K; ++k) {
            double a = A[(size_t)i * K + k];
            for (int j = 0; j < N; ++j) C[(size_t)i * N + j] += a * B[(size_t)k * N + j];
        }
}

// ------------------------------------------------------------------------------------------------
// v1: one thread per element. threadIdx.x runs along a row of C so that a warp reads 32
// consecutive floats of B (coalesced) and one broadcast value of A.
__global__ void matmul_naive(int M, int N, int K, const float* A, const float* B, float* C) {
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < M && col < N) {
        float sum = 0.0f;
        for (int k = 0; k < K; ++k) sum += A[(size_t)row * K + k] * B[(size_t)k * N + col];
        C[(size_t)row * N + col] = sum;
    }
}

// v2: the lecture's tiled kernel. Each phase loads one TILE_WIDTH x TILE_WIDTH tile of A and of B
// (one element per thread), waits, accumulates TILE_WIDTH products, waits again before the next
// phase overwrites the tiles. Out-of-range elements are loaded as 0 so they add nothing: that is
// all the bounds checks cost, and it makes the kernel right for any M, N, K.
#define TILE_WIDTH 16
__global__ void matmul_tiled(int M, int N, int K, const float* A, const float* B, float* C) {
    __shared__ float As[TILE_WIDTH][TILE_WIDTH];
    __shared__ float Bs[TILE_WIDTH][TILE_WIDTH];
    int tx = threadIdx.x, ty = threadIdx.y;
    int row = blockIdx.y * TILE_WIDTH + ty;
    int col = blockIdx.x * TILE_WIDTH + tx;
    float sum = 0.0f;
    for (int ph = 0; ph < (K + TILE_WIDTH - 1) / TILE_WIDTH; ++ph) {
        int ka = ph * TILE_WIDTH + tx, kb = ph * TILE_WIDTH + ty;
        As[ty][tx] = (row < M && ka < K) ? A[(size_t)row * K + ka] : 0.0f;
        Bs[ty][tx] = (kb < K && col < N) ? B[(size_t)kb * N + col] : 0.0f;
        __syncthreads();
        for (int k = 0; k < TILE_WIDTH; ++k) sum += As[ty][k] * Bs[k][tx];
        __syncthreads();
    }
    if (row < M && col < N) C[(size_t)row * N + col] = sum;
}

// v3: register blocking. A 256-thread block computes a BM x BN = 128 x 128 tile of C; thread
// (ty, tx) of a 16 x 16 grid owns the 8 x 8 elements at rows ty + 16 i and columns tx + 16 j
// (strided, so that a warp's loads and stores stay coalesced and its shared reads conflict-free).
// Per step of k it reads 8 values of A and 8 of B from shared memory into registers and does
// 64 FMAs: 16 shared loads per 64 FMAs instead of 2 per 1 in v2.
// Napkin math: one phase is 128 x 128 x 8 = 131072 FMAs for 2 x 128 x 8 floats loaded from
// global memory: 64 flops per float, four times v2's 16. And each thread has 64 independent
// accumulators, so the FMA pipes stay busy even with few warps per SM.
#define BM 128
#define BN 128
#define BK 8
#define TM 8
#define TN 8
__global__ void __launch_bounds__(256) matmul_regblock(int M, int N, int K, const float* A,
                                                        const float* B, float* C) {
    __shared__ float As[BK][BM + 1];  // stored transposed (k-major): As[k][row]; +1 avoids conflicts on the store
    __shared__ float Bs[BK][BN];
    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    float acc[TM][TN] = {};
    for (int k0 = 0; k0 < K; k0 += BK) {
        // 256 threads load 128 x 8 of A and 8 x 128 of B: 4 elements of each, 0 outside the matrix.
        for (int l = threadIdx.x; l < BM * BK; l += 256) {
            int r = l / BK, k = l % BK;  // A: consecutive threads along k (a row of A)
            int gr = row0 + r, gk = k0 + k;
            As[k][r] = (gr < M && gk < K) ? A[(size_t)gr * K + gk] : 0.0f;
            int kb = l / BN, c = l % BN;  // B: consecutive threads along a row of B
            int gkb = k0 + kb, gc = col0 + c;
            Bs[kb][c] = (gkb < K && gc < N) ? B[(size_t)gkb * N + gc] : 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            float a[TM], b[TN];
#pragma unroll
            for (int i = 0; i < TM; ++i) a[i] = As[k][ty + 16 * i];
#pragma unroll
            for (int j = 0; j < TN; ++j) b[j] = Bs[k][tx + 16 * j];
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] += a[i] * b[j];
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) {
            int r = row0 + ty + 16 * i, c = col0 + tx + 16 * j;
            if (r < M && c < N) C[(size_t)r * N + c] = acc[i][j];
        }
}

// ------------------------------------------------------------------------------------------------
// Launchers and the one dispatcher.
static cublasHandle_t g_cublas;

static void launch(int v, int M, int N, int K, const float* A, const float* B, float* C) {
    switch (v) {
    case 1: {
        dim3 block(32, 8), grid((N + 31) / 32, (M + 7) / 8);
        matmul_naive<<<grid, block>>>(M, N, K, A, B, C);
        break;
    }
    case 2: {
        dim3 block(TILE_WIDTH, TILE_WIDTH), grid((N + TILE_WIDTH - 1) / TILE_WIDTH, (M + TILE_WIDTH - 1) / TILE_WIDTH);
        matmul_tiled<<<grid, block>>>(M, N, K, A, B, C);
        break;
    }
    case 3: {
        dim3 grid((N + BN - 1) / BN, (M + BM - 1) / BM);
        matmul_regblock<<<grid, 256>>>(M, N, K, A, B, C);
        break;
    }
    case 4: {
        // Row-major C = A B is column-major C^T = B^T A^T: swap the operands, no transposes.
        const float one = 1.0f, zero = 0.0f;
        if (cublasSgemm(g_cublas, CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &one, B, N, A, K, &zero, C, N) !=
            CUBLAS_STATUS_SUCCESS) {
            std::fprintf(stderr, "cublasSgemm failed\n");
            std::exit(1);
        }
        break;
    }
    }
    CUDA_CHECK(cudaGetLastError());
}

// ------------------------------------------------------------------------------------------------
int main(int argc, char** argv) {
    slides::Bench bench(argc, argv, "matmul", "fp32", kVersions, kCount);
    if (cublasCreate(&g_cublas) != CUBLAS_STATUS_SUCCESS) { std::fprintf(stderr, "cublasCreate failed\n"); return 1; }
    // FP32 everywhere: cuBLAS may not turn to TF32 tensor cores (its default math mode already).
    cublasSetMathMode(g_cublas, CUBLAS_DEFAULT_MATH);

    // The check shape: a multiple of no tile size, small enough for the CPU (60 MFLOP).
    const int cm = 517, cn = 389, ck = 301;
    // The timed shape. Napkin math: 2 * 4096^3 = 137 GFLOP: ~0.1 s for v1, a few ms for cuBLAS.
    const int n = 4096;
    // FP32 accumulation over K <= 4096 of values in [-1, 1) gives ~1e-6; TF32 or a wrong index ~1e-3.
    const double tol = 1e-4;

    std::vector<float> hA((size_t)n * n), hB((size_t)n * n), hC((size_t)n * n);
    slides::fill_uniform(hA, 1);
    slides::fill_uniform(hB, 2);
    std::vector<float> cA((size_t)cm * ck), cB((size_t)ck * cn), cC((size_t)cm * cn);
    slides::fill_uniform(cA, 3);
    slides::fill_uniform(cB, 4);
    std::vector<double> cRef((size_t)cm * cn);
    matmul_cpu(cm, cn, ck, cA.data(), cB.data(), cRef.data());

    float *dA, *dB, *dC;
    CUDA_CHECK(cudaMalloc(&dA, hA.size() * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&dB, hB.size() * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&dC, hC.size() * sizeof(float)));

    for (int v : bench.selected()) {
        // 1. Check on the odd shape, output poisoned (NaN) so that an unwritten element fails.
        CUDA_CHECK(cudaMemcpy(dA, cA.data(), cA.size() * sizeof(float), cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaMemcpy(dB, cB.data(), cB.size() * sizeof(float), cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaMemset(dC, 0xff, cC.size() * sizeof(float)));
        launch(v, cm, cn, ck, dA, dB, dC);
        CUDA_CHECK(cudaMemcpy(cC.data(), dC, cC.size() * sizeof(float), cudaMemcpyDeviceToHost));
        if (!bench.check(v, slides::rel_error(cC.data(), cRef.data(), cC.size()), tol, "517x389x301")) continue;

        // 2. The timed size: one warm-up run, checked on sampled entries, then timed.
        CUDA_CHECK(cudaMemcpy(dA, hA.data(), hA.size() * sizeof(float), cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaMemcpy(dB, hB.data(), hB.size() * sizeof(float), cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaMemset(dC, 0xff, hC.size() * sizeof(float)));
        launch(v, n, n, n, dA, dB, dC);
        CUDA_CHECK(cudaMemcpy(hC.data(), dC, hC.size() * sizeof(float), cudaMemcpyDeviceToHost));
        double err = slides::sampled_rel_error(hC, 64, 5 + v, [&](size_t idx) {
            size_t i = idx / n, j = idx % n;
            double s = 0;
            for (int k = 0; k < n; ++k) s += double(hA[i * n + k]) * hB[(size_t)k * n + j];
            return s;
        });
        if (!bench.check(v, err, tol, "64 sampled entries of 4096^3")) continue;
        bench.time(v, [&] { launch(v, n, n, n, dA, dB, dC); }, 2.0 * n * n * n, "GFLOPS",
                   "4096x4096x4096");
    }
    cublasDestroy(g_cublas);
    CUDA_CHECK(cudaFree(dA));
    CUDA_CHECK(cudaFree(dB));
    CUDA_CHECK(cudaFree(dC));
    return 0;
}
