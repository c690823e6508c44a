// conv1d.cu: 1D convolution in FP32, the lecture's progression.
//
//   P[i] = sum_{j=0}^{w-1} N[i - w/2 + j] * M[j],  N read as 0 outside [0, n)   (w odd)
//
//   v1  the basic kernel, with bounds checks
//         One thread per output, w loads of N and w loads of M from global memory per output.
//         Napkin math: 2 loads per FMA; neighbouring threads read almost the same N values, so
//         L1 catches most of them, but every one is still a load instruction and a cache lookup.
//   v2  the tiled kernel: the block's input tile and its halo cells in shared memory
//         A block of T outputs needs T + w - 1 inputs; it loads each once from global memory
//         (coalesced) into shared memory, zero-filling the halo outside [0, n) once instead of
//         testing the bounds in the inner loop. The inner loop now reads shared memory only.
//   v3  v2 with the mask in constant memory
//         All threads of a warp read the same M[j] at the same time: exactly what the constant
//         cache broadcasts in one access, and it keeps M out of L1 and of the load pipeline.
//
// Checked against the CPU at n = 1 (w = 1) and n = 1,000,003 (w = 63), then on 256 sampled
// outputs of the timed n = 2^26, w = 63 run. Rate: GFLOPS = 2 n w / time (GB/s = 8 n / time
// in the notes: one read of N and one write of P).
#include "common.cuh"

using slides::Version;

static const Version kVersions[] = {
    {"basic kernel, bounds checks"},
    {"tiled, halo cells in shared memory"},
    {"tiled + mask in constant memory"},
};
static const int kCount = sizeof(kVersions) / sizeof(kVersions[0]);

#define MAX_MASK 255  // the assignment's limit on w
#define BLOCK 256     // outputs per block (v2, v3)

// ------------------------------------------------------------------------------------------------
static double conv1d_entry(int n, int w, const float* N, const float* M, long long i) {
    double s = 0;
    for (int j = 0; j < w; ++j) {
        long long x = i - w / 2 + j;
        if (x >= 0 && x < n) s += double(N[x]) * M[j];
    }
    return s;
}

static void conv1d_cpu(int n, int w, const float* N, const float* M, double* P) {
    for (int i = 0; i < n; ++i) P[i] = conv1d_entry(n, w, N, M, i);
}

// ------------------------------------------------------------------------------------------------
// v1: the basic kernel. The bounds test is in the inner loop: ghost cells count as 0.
__global__ void conv1d_basic(int n, int w, const float* N, const float* M, float* P) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float s = 0.0f;
    int start = i - w / 2;
    for (int j = 0; j < w; ++j) {
        int x = start + j;
        if (x >= 0 && x < n) s += N[x] * M[j];
    }
    P[i] = s;
}

// v2: the tiled kernel. tile[0 .. BLOCK + w - 2] holds N[block_start - w/2 ...], halo included,
// zero where outside [0, n). Dynamic shared memory: (BLOCK + w - 1) floats.
__global__ void conv1d_tiled(int n, int w, const float* N, const float* M, float* P) {
    extern __shared__ float tile[];
    int first = blockIdx.x * BLOCK - w / 2;
    for (int t = threadIdx.x; t < BLOCK + w - 1; t += BLOCK) {
        int x = first + t;
        tile[t] = (x >= 0 && x < n) ? N[x] : 0.0f;
    }
    __syncthreads();
    int i = blockIdx.x * BLOCK + threadIdx.x;
    if (i >= n) return;
    float s = 0.0f;
    for (int j = 0; j < w; ++j) s += tile[threadIdx.x + j] * M[j];
    P[i] = s;
}

// v3: as v2, with M in constant memory (copied once with cudaMemcpyToSymbol).
__constant__ float Mc[MAX_MASK];
__global__ void conv1d_tiled_const(int n, int w, const float* N, float* P) {
    extern __shared__ float tile[];
    int first = blockIdx.x * BLOCK - w / 2;
    for (int t = threadIdx.x; t < BLOCK + w - 1; t += BLOCK) {
        int x = first + t;
        tile[t] = (x >= 0 && x < n) ? N[x] : 0.0f;
    }
    __syncthreads();
    int i = blockIdx.x * BLOCK + threadIdx.x;
    if (i >= n) return;
    float s = 0.0f;
    for (int j = 0; j < w; ++j) s += tile[threadIdx.x + j] * Mc[j];
    P[i] = s;
}

// ------------------------------------------------------------------------------------------------
// M is copied to constant memory by the caller (it is part of the set-up, as in the lecture).
static void launch(int v, int n, int w, const float* N, const float* M, float* P) {
    int blocks = (n + BLOCK - 1) / BLOCK;
    size_t smem = (BLOCK + w - 1) * sizeof(float);
    switch (v) {
    case 1: conv1d_basic<<<blocks, BLOCK>>>(n, w, N, M, P); break;
    case 2: conv1d_tiled<<<blocks, BLOCK, smem>>>(n, w, N, M, P); break;
    case 3: conv1d_tiled_const<<<blocks, BLOCK, smem>>>(n, w, N, P); break;
    }
    CUDA_CHECK(cudaGetLastError());
}

// ------------------------------------------------------------------------------------------------
int main(int argc, char** argv) {
    slides::Bench bench(argc, argv, "conv1d", "fp32", kVersions, kCount);
    const int n = 1 << 26, w = 63;  // timed: 8.5 GFLOP, 512 MB of traffic
    const double tol = 1e-5;         // FP32 sums of 63 products: ~1e-7

    std::vector<float> hN(n), hM(MAX_MASK), hP(n);
    slides::fill_uniform(hN, 21);
    slides::fill_uniform(hM, 22);
    float *dN, *dM, *dP;
    CUDA_CHECK(cudaMalloc(&dN, (size_t)n * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&dM, MAX_MASK * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&dP, (size_t)n * sizeof(float)));
    CUDA_CHECK(cudaMemcpy(dN, hN.data(), (size_t)n * sizeof(float), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(dM, hM.data(), MAX_MASK * sizeof(float), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpyToSymbol(Mc, hM.data(), MAX_MASK * sizeof(float)));

    // The check cases share N and M with the timed one (a prefix of N): (n, w).
    const int cases[][2] = {{1, 1}, {1000003, 63}};
    std::vector<std::vector<double>> refs;
    for (auto& c : cases) {
        refs.emplace_back(c[0]);
        conv1d_cpu(c[0], c[1], hN.data(), hM.data(), refs.back().data());
    }

    for (int v : bench.selected()) {
        bool ok = true;
        for (size_t c = 0; c < refs.size() && ok; ++c) {
            int cn = cases[c][0], cw = cases[c][1];
            CUDA_CHECK(cudaMemset(dP, 0xff, (size_t)n * sizeof(float)));  // NaN: unwritten fails
            launch(v, cn, cw, dN, dM, dP);
            std::vector<float> out(cn);
            CUDA_CHECK(cudaMemcpy(out.data(), dP, cn * sizeof(float), cudaMemcpyDeviceToHost));
            char what[48];
            std::snprintf(what, sizeof what, "n=%d, w=%d", cn, cw);
            ok = bench.check(v, slides::rel_error(out.data(), refs[c].data(), cn), tol, what);
        }
        if (!ok) continue;
        CUDA_CHECK(cudaMemset(dP, 0xff, (size_t)n * sizeof(float)));
        launch(v, n, w, dN, dM, dP);
        CUDA_CHECK(cudaMemcpy(hP.data(), dP, (size_t)n * sizeof(float), cudaMemcpyDeviceToHost));
        double err = slides::sampled_rel_error(hP, 256, 23 + v, [&](size_t i) {
            return conv1d_entry(n, w, hN.data(), hM.data(), (long long)i);
        });
        if (!bench.check(v, err, tol, "256 sampled outputs of n=2^26")) continue;
        bench.time(v, [&] { launch(v, n, w, dN, dM, dP); }, 2.0 * n * w, "GFLOPS", "n=2^26, w=63");
        if (!bench.check_only()) {
            char note[48];
            std::snprintf(note, sizeof note, "%.0f GB/s", 8.0 * n / 1e9 / (bench.ms(v) * 1e-3));
            bench.add_note(v, note);
        }
    }
    CUDA_CHECK(cudaFree(dN));
    CUDA_CHECK(cudaFree(dM));
    CUDA_CHECK(cudaFree(dP));
    return 0;
}
