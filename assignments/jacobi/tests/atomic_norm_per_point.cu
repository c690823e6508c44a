// expect: correct
// expect-performance-below: 0.75
// The norm with one atomicAdd per point: right, but every update of the convergence sweeps queues
// on the same address, so the convergence variant runs ~200x below the reference and earns nothing;
// the fixed sweeps (tol = 0, no norm) still earn theirs: half the performance points in all.
#include <cmath>
#include <utility>

#include "cuda_check.cuh"

namespace {

constexpr int kBx = 32, kBy = 8, kRun = 16;

template <bool kNorm>
__global__ void __launch_bounds__(kBx* kBy) sweep_kernel(int n, const double* __restrict__ uo, const double* __restrict__ f,
                                                         double* __restrict__ u, double h2, double* norm2) {
    const long long nn = (long long)n * n;
    const int k = 1 + blockIdx.x * kBx + threadIdx.x;
    const int j = 1 + blockIdx.y * kBy + threadIdx.y;
    const int i0 = 1 + blockIdx.z * kRun;
    const int i1 = min(i0 + kRun, n - 1);
    if (k < n - 1 && j < n - 1) {
        long long p = i0 * nn + (long long)j * n + k;
        double below = uo[p - nn], here = uo[p];
        for (int i = i0; i < i1; ++i, p += nn) {
            const double above = uo[p + nn];
            const double v = (1.0 / 6.0) * (below + above + uo[p - n] + uo[p + n] + uo[p - 1] + uo[p + 1] + h2 * f[p]);
            u[p] = v;
            if (kNorm) atomicAdd(norm2, (v - here) * (v - here));  // one atomic per point: they all queue on one address
            below = here;
            here = above;
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
    const dim3 grid(inner > 0 ? (inner + kBx - 1) / kBx : 1, inner > 0 ? (inner + kBy - 1) / kBy : 1,
                    inner > 0 ? (inner + kRun - 1) / kRun : 1);
    double* cur = u;       // holds the field
    double* next = u_old;  // the sweep writes here
    int sweeps = 0;
    while (sweeps < max_iter) {
        if (tol > 0) {
            CUDA_CHECK(cudaMemsetAsync(norm2, 0, sizeof(double)));
            if (inner > 0) sweep_kernel<true><<<grid, block>>>(n, cur, f, next, h * h, norm2);
        } else if (inner > 0) {
            sweep_kernel<false><<<grid, block>>>(n, cur, f, next, h * h, nullptr);
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
