/*
Reference kernel for jacobi: the 3D Poisson problem by Jacobi sweeps, FP64, one GPU.

    for every interior point (i, j, k):
        u[i][j][k] = (u_old[i-1][j][k] + u_old[i+1][j][k] + u_old[i][j-1][k] + u_old[i][j+1][k]
                      + u_old[i][j][k-1] + u_old[i][j][k+1] + h*h*f[i][j][k]) / 6
    then u and u_old trade places; stop after max_iter sweeps or when ||u - u_old|| < tol.

Napkin math at n = 512: 510^3 = 1.3e8 updates per sweep. Each update needs u_old and f once and
writes u once: 24 bytes, 3.2 GB per sweep, 0.67 ms at 4.8 TB/s (0.8 ms at a measured ~4 TB/s).
The 8 FLOPs per update are nothing (1 GFLOP per sweep). So the whole game is to touch DRAM with
those 24 bytes and nothing more: every other read of u_old must hit a cache.

Design:
- A block of 32 x 8 threads owns a (k, j) tile, and each thread walks a run of kRun planes in i,
  keeping u_old[i-1], u_old[i] and u_old[i+1] of its column in registers: the i-neighbours cost
  no load. The four in-plane neighbours are loads that hit L1 (each is also the centre of a
  neighbouring thread of the same block) or, at the tile edges, L2.
- A warp reads 32 consecutive k: 256 contiguous bytes per load, full sectors.
- How many planes a thread walks (kRun) was measured at n = 512, 100 sweeps, blocks of 32 x 8:
  4 planes ran at 117,200 MLUPS on an H100 and 151,500 on an H200, 16 planes at 111,400 and
  150,100 (a device copy of the same bytes: 125,700 and 178,000). Short runs make more, shorter
  blocks (131072 at n = 512 against 32768); the two extra planes a run reads at its ends come
  from L2, not DRAM. With the norm each block also
  makes an atomicAdd, so that sweep keeps runs of 16 planes: 32768 atomics per sweep, not
  131072.
- The norm only when tol > 0 (a template flag, so the fixed-sweep kernel carries nothing for it):
  each thread sums its squared changes, the block sums them with warp shuffles, and one atomicAdd
  per block (32768 per sweep) adds them up on the device. The host reads that one double after
  each sweep (pinned memory) to decide whether to go on: the count must be exact, so the decision
  cannot lag a sweep behind.
- u and u_old trade places by pointer; after an odd number of sweeps the field is in u_old and
  one copy moves it to u.
*/
#include <cmath>
#include <utility>

#include "cuda_check.cuh"

namespace {

constexpr int kBx = 32, kBy = 8;
// Planes per thread: see the docblock.
constexpr int run_for(bool norm) { return norm ? 16 : 4; }

template <bool kNorm, int kRun = run_for(kNorm)>
__global__ void __launch_bounds__(kBx* kBy) sweep_kernel(int n, const double* __restrict__ uo, const double* __restrict__ f,
                                                         double* __restrict__ u, double h2, double* norm2) {
    const long long nn = (long long)n * n;
    const int k = 1 + blockIdx.x * kBx + threadIdx.x;
    const int j = 1 + blockIdx.y * kBy + threadIdx.y;
    const int i0 = 1 + blockIdx.z * kRun;
    const int i1 = min(i0 + kRun, n - 1);
    double d2 = 0;
    if (k < n - 1 && j < n - 1) {
        long long p = i0 * nn + (long long)j * n + k;
        double below = uo[p - nn], here = uo[p];
        for (int i = i0; i < i1; ++i, p += nn) {
            const double above = uo[p + nn];
            const double v = (1.0 / 6.0) * (below + above + uo[p - n] + uo[p + n] + uo[p - 1] + uo[p + 1] + h2 * f[p]);
            u[p] = v;
            if (kNorm) d2 += (v - here) * (v - here);
            below = here;
            here = above;
        }
    }
    if (kNorm) {
        __shared__ double warp_sums[kBx * kBy / 32];
        for (int o = 16; o > 0; o /= 2) d2 += __shfl_down_sync(0xffffffffu, d2, o);
        const int t = threadIdx.y * kBx + threadIdx.x;
        if (t % 32 == 0) warp_sums[t / 32] = d2;
        __syncthreads();
        if (t == 0) {
            double s = 0;
            for (int w = 0; w < kBx * kBy / 32; ++w) s += warp_sums[w];
            atomicAdd(norm2, s);
        }
    }
}

}  // namespace

int jacobi(int n, int max_iter, double tol, double* u, double* u_old, const double* f) {
    if (max_iter <= 0) return 0;
    static double* norm2 = nullptr;  // on the device
    static double* norm2_host = nullptr;  // pinned: the copy back is a few microseconds
    if (!norm2) {
        CUDA_CHECK(cudaMalloc(&norm2, sizeof(double)));
        CUDA_CHECK(cudaMallocHost(&norm2_host, sizeof(double)));
    }
    const double h = 2.0 / (n - 1);
    const int inner = n - 2;
    const dim3 block(kBx, kBy);
    auto grid = [&](int run) {
        return dim3(inner > 0 ? (inner + kBx - 1) / kBx : 1, inner > 0 ? (inner + kBy - 1) / kBy : 1,
                    inner > 0 ? (inner + run - 1) / run : 1);
    };
    double* cur = u;       // holds the field
    double* next = u_old;  // the sweep writes here
    int sweeps = 0;
    while (sweeps < max_iter) {
        if (tol > 0) {
            CUDA_CHECK(cudaMemsetAsync(norm2, 0, sizeof(double)));
            if (inner > 0) sweep_kernel<true><<<grid(run_for(true)), block>>>(n, cur, f, next, h * h, norm2);
        } else if (inner > 0) {
            sweep_kernel<false><<<grid(run_for(false)), block>>>(n, cur, f, next, h * h, nullptr);
        }
        CUDA_CHECK(cudaGetLastError());
        std::swap(cur, next);
        ++sweeps;
        if (tol > 0) {
            CUDA_CHECK(cudaMemcpyAsync(norm2_host, norm2, sizeof(double), cudaMemcpyDeviceToHost));
            CUDA_CHECK(cudaStreamSynchronize(0));
            if (std::sqrt(*norm2_host) < tol) break;
        }
    }
    if (cur != u)
        CUDA_CHECK(cudaMemcpyAsync(u, cur, sizeof(double) * n * (size_t)n * n, cudaMemcpyDeviceToDevice));
    return sweeps;
}
