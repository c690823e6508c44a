// expect: incorrect
// Each GPU sweeps only with the planes it holds: at the cut it reuses its own plane in place of the
// other GPU's. Without peer reads across the cut the two halves never exchange heat.
#include <algorithm>
#include <utility>

#include "cuda_check.cuh"

namespace {

constexpr int kBx = 32, kBy = 8, kRun = 16;

// A field cut in two at plane `split`: planes below it in lo (GPU 0), the rest in hi (GPU 1).
struct Halves {
    double* lo;
    double* hi;
    int split;
    long long nn;
    __device__ double* plane(int i) const { return i < split ? lo + i * nn : hi + (i - split) * nn; }
};

template <bool kNorm>
__global__ void __launch_bounds__(kBx* kBy) sweep_kernel(int n, int i_begin, int i_end, Halves uo, Halves f, Halves u,
                                                         double h2, double* norm2) {
    const int k = 1 + blockIdx.x * kBx + threadIdx.x;
    const int j = 1 + blockIdx.y * kBy + threadIdx.y;
    const int i0 = i_begin + blockIdx.z * kRun;
    const int i1 = min(i0 + kRun, i_end);
    double d2 = 0;
    if (k < n - 1 && j < n - 1) {
        const long long q = (long long)j * n + k;
        // (wrong: the plane across the cut lives on the other GPU, and this reads its own plane
        // in its place instead, as if the cut were a wall with no flux)
        auto own = [&](int i) { return (i >= i_begin || i == 0) && (i < i_end || i == n - 1); };
        double here = uo.plane(i0)[q];
        double below = own(i0 - 1) ? uo.plane(i0 - 1)[q] : here;
        for (int i = i0; i < i1; ++i) {
            const double* c = uo.plane(i);
            const double above = own(i + 1) ? uo.plane(i + 1)[q] : here;
            const double v = (1.0 / 6.0) * (below + above + c[q - n] + c[q + n] + c[q - 1] + c[q + 1] + h2 * f.plane(i)[q]);
            u.plane(i)[q] = v;
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

struct Gpu {
    double* norm2 = nullptr;       // on this GPU
    double* norm2_host = nullptr;  // pinned
    cudaEvent_t swept = nullptr;   // recorded after each sweep
};

}  // namespace

int jacobi_2gpu(int n, int max_iter, double tol, double* u0, double* u_old0, const double* f0, double* u1,
                double* u_old1, const double* f1) {
    if (max_iter <= 0) return 0;
    static Gpu gpu[2];
    for (int p = 0; p < 2; ++p)
        if (!gpu[p].norm2) {
            CUDA_CHECK(cudaSetDevice(p));
            CUDA_CHECK(cudaMalloc(&gpu[p].norm2, sizeof(double)));
            CUDA_CHECK(cudaMallocHost(&gpu[p].norm2_host, sizeof(double)));
            CUDA_CHECK(cudaEventCreateWithFlags(&gpu[p].swept, cudaEventDisableTiming));
        }
    const int split = n / 2;
    const long long nn = (long long)n * n;
    const double h = 2.0 / (n - 1);
    Halves cur{u0, u1, split, nn}, next{u_old0, u_old1, split, nn};
    const Halves f{const_cast<double*>(f0), const_cast<double*>(f1), split, nn};
    const int first[3] = {1, split, n - 1};  // GPU p sweeps interior planes [first[p], first[p+1])
    int sweeps = 0;
    while (sweeps < max_iter) {
        // Both waits are queued before either GPU records this sweep's event: each waits for the
        // other's previous sweep, not its current one, so the two halves run side by side.
        if (sweeps > 0)
            for (int p = 0; p < 2; ++p) {
                CUDA_CHECK(cudaSetDevice(p));
                CUDA_CHECK(cudaStreamWaitEvent(0, gpu[1 - p].swept, 0));
            }
        for (int p = 0; p < 2; ++p) {
            const int i_begin = std::max(first[p], 1), i_end = std::min(first[p + 1], n - 1);
            CUDA_CHECK(cudaSetDevice(p));
            if (tol > 0) CUDA_CHECK(cudaMemsetAsync(gpu[p].norm2, 0, sizeof(double)));
            if (i_end > i_begin && n > 2) {
                const dim3 block(kBx, kBy), grid((n - 2 + kBx - 1) / kBx, (n - 2 + kBy - 1) / kBy, (i_end - i_begin + kRun - 1) / kRun);
                if (tol > 0) sweep_kernel<true><<<grid, block>>>(n, i_begin, i_end, cur, f, next, h * h, gpu[p].norm2);
                else sweep_kernel<false><<<grid, block>>>(n, i_begin, i_end, cur, f, next, h * h, nullptr);
                CUDA_CHECK(cudaGetLastError());
            }
            if (tol > 0) CUDA_CHECK(cudaMemcpyAsync(gpu[p].norm2_host, gpu[p].norm2, sizeof(double), cudaMemcpyDeviceToHost));
            CUDA_CHECK(cudaEventRecord(gpu[p].swept, 0));
        }
        std::swap(cur, next);
        ++sweeps;
        if (tol > 0) {
            CUDA_CHECK(cudaEventSynchronize(gpu[0].swept));
            CUDA_CHECK(cudaEventSynchronize(gpu[1].swept));
            if (std::sqrt(*gpu[0].norm2_host + *gpu[1].norm2_host) < tol) break;
        }
    }
    if (cur.lo != u0) {  // an odd number of sweeps: the field is in u_old
        for (int p = 0; p < 2; ++p) {
            CUDA_CHECK(cudaSetDevice(p));
            const long long planes = p == 0 ? split : n - split;
            CUDA_CHECK(cudaMemcpyAsync(p == 0 ? u0 : u1, p == 0 ? cur.lo : cur.hi, sizeof(double) * planes * nn,
                                       cudaMemcpyDeviceToDevice));
        }
    }
    CUDA_CHECK(cudaSetDevice(0));
    return sweeps;
}
