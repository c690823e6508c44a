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
- The fixed sweep's loads go through the read-only path by __ldg. Its const __restrict__ pointers
  already compile to ld.global.nc, but the explicit form compiles differently and ran faster in
  every grading: 117,000 to 120,100 MLUPS on one H100 (86.0% of DRAM), 151,200 to 158,700 on one
  H200 (79.3%), two solo gradings each. The norm kernel ran 1% slower with it and keeps plain loads.
- How many planes a thread walks (kRun) was measured at n = 512, 100 sweeps, blocks of 32 x 8:
  4 planes ran at 117,200 MLUPS on an H100 and 151,500 on an H200, 16 planes at 111,400 and
  150,100 (a device copy of the same bytes: 125,700 and 178,000). Short runs make more, shorter
  blocks (131072 at n = 512 against 32768); the two extra planes a run reads at its ends come
  from L2, not DRAM.
- The norm only when tol > 0 (a template flag, so the fixed-sweep kernel carries nothing for it):
  each thread sums its squared changes, each warp sums its threads' with shuffles, and one
  atomicAdd per warp adds that into one of kSlots doubles; a one-warp kernel then sums the slots
  into the norm and zeroes them for the next sweep. The host reads that one double after each
  sweep (pinned memory) to decide whether to go on: the count must be exact, so the decision
  cannot lag a sweep behind.
- The norm kernel walks its run inside a loop over runs (z = blockIdx.z, z + gridDim.z, ...),
  though each block has one run at these launches: written as the fixed kernel is, it compiled to
  48 registers a thread, and an SM's 65,536 then hold 5 blocks of 256 threads; written as a loop,
  to 40 (6 blocks). Measured on one H100 (21 sweeps at n = 512, each norm read by the host):
  105,900 MLUPS for the block sum behind __syncthreads with one atomic per block on one address
  (the kernel before the slots), 106,100 for the slots at 48 registers, 110,100 at 40 registers
  asked for with launch bounds, 112,800 in the loop; the fixed sweep 117,100. Graded on that
  machine, the fixed sweep written as a loop lost 2% (114,900 MLUPS against 117,100). Runs of 8 planes did best with the slots: 16 ran at 110,600, and 4
  made a million atomics a sweep (109,300 even without the host's reads).
- u and u_old trade places by pointer; after an odd number of sweeps the field is in u_old and
  one copy moves it to u: 2 x 1.07 GB at n = 512, ~0.7 ms, as much as 3% of the 21 sweeps of the
  graded converging case. There the count is not known in advance, but the norm of a Jacobi run
  falls by a near-constant factor per sweep: the host predicts from the last two norms which sweep
  will be the last, and when the fields' turns would put that sweep's output in u_old, the sweep
  before it writes a third field (a scratch buffer, given the walls once: 6 faces, 12 MB) so that
  the last one writes u. A wrong guess costs only the copy. Timed on an H100 (three gradings
  each, with the norm kernel before the slots): 105,200 MLUPS converging against 102,700 with the
  copy. With the slots and the loop, on one H100: 111,739 (80.1% of DRAM) against 104,759.
*/
#include <cmath>
#include <utility>

#include "cuda_check.cuh"

namespace {

constexpr int kBx = 32, kBy = 8;
// Planes per thread, and the doubles the warps' squared changes are added into: see the docblock.
constexpr int run_for(bool norm) { return norm ? 8 : 4; }
constexpr int kSlots = 64;

template <bool kNorm, int kRun = run_for(kNorm)>
__global__ void __launch_bounds__(kBx* kBy) sweep_kernel(int n, const double* __restrict__ uo, const double* __restrict__ f,
                                                         double* __restrict__ u, double h2, double* norm2) {
    const long long nn = (long long)n * n;
    const int k = 1 + blockIdx.x * kBx + threadIdx.x;
    const int j = 1 + blockIdx.y * kBy + threadIdx.y;
    double d2 = 0;
    // The fixed sweep reads through __ldg, the norm kernel plainly: graded on one H100, 120,100 MLUPS
    // against 117,000 (and 158,700 against 151,200 on an H200); the norm kernel lost 1% with it.
    auto ld = [](const double* a) { return kNorm ? *a : __ldg(a); };
    auto walk = [&](int i0) {  // the run of planes [i0, i0 + kRun)
        const int i1 = min(i0 + kRun, n - 1);
        if (k < n - 1 && j < n - 1) {
            long long p = i0 * nn + (long long)j * n + k;
            double below = ld(uo + p - nn), here = ld(uo + p);
            for (int i = i0; i < i1; ++i, p += nn) {
                const double above = ld(uo + p + nn);
                const double v = (1.0 / 6.0) * (below + above + ld(uo + p - n) + ld(uo + p + n) + ld(uo + p - 1) + ld(uo + p + 1) + h2 * ld(f + p));
                u[p] = v;
                if (kNorm) d2 += (v - here) * (v - here);
                below = here;
                here = above;
            }
        }
    };
    // One run per block either way; the norm kernel written as a loop over runs compiles to fewer
    // registers and runs faster, the fixed one slower (see the docblock).
    if constexpr (kNorm)
        for (int z = blockIdx.z; z * kRun < n - 2; z += gridDim.z) walk(1 + z * kRun);
    else
        walk(1 + blockIdx.z * kRun);
    if (kNorm) {
        for (int o = 16; o > 0; o /= 2) d2 += __shfl_down_sync(0xffffffffu, d2, o);
        const int warp = (threadIdx.y * kBx + threadIdx.x) / 32;
        if (threadIdx.x % 32 == 0)  // consecutive warps and blocks add into different slots
            atomicAdd(norm2 + (blockIdx.x * (kBx * kBy / 32) + warp + 7 * blockIdx.y + 13 * blockIdx.z) % kSlots, d2);
    }
}

// norm2[kSlots] = the sum of the slots norm2[0, kSlots), which go back to zero: one warp.
__global__ void gather_norm(double* norm2) {
    double s = 0;
    for (int i = threadIdx.x; i < kSlots; i += 32) {
        s += norm2[i];
        norm2[i] = 0;
    }
    for (int o = 16; o > 0; o /= 2) s += __shfl_down_sync(0xffffffffu, s, o);
    if (threadIdx.x == 0) norm2[kSlots] = s;
}

// The walls of `from` into `to` (every point with a coordinate 0 or n - 1): a scratch field needs
// them before a sweep reads it.
__global__ void walls_kernel(int n, const double* __restrict__ from, double* __restrict__ to) {
    const long long nn = (long long)n * n;
    const int a = blockIdx.x * blockDim.x + threadIdx.x, b = blockIdx.y;
    if (a >= n) return;
    const long long faces[6] = {(long long)b * n + a, (n - 1) * nn + (long long)b * n + a,     // i = 0, n - 1
                                b * nn + a, b * nn + (long long)(n - 1) * n + a,               // j = 0, n - 1
                                b * nn + (long long)a * n, b * nn + (long long)a * n + n - 1}; // k = 0, n - 1
    for (long long p : faces) to[p] = from[p];
}

}  // namespace

int jacobi(int n, int max_iter, double tol, double* u, double* u_old, const double* f) {
    if (max_iter <= 0) return 0;
    static double* norm2 = nullptr;  // on the device: kSlots slots, then their sum
    static double* norm2_host = nullptr;  // pinned: the copy back is a few microseconds
    static double* scratch = nullptr;  // the third field (see the docblock), made on first need
    static size_t scratch_bytes = 0;
    if (!norm2) {
        CUDA_CHECK(cudaMalloc(&norm2, sizeof(double) * (kSlots + 1)));
        CUDA_CHECK(cudaMemset(norm2, 0, sizeof(double) * (kSlots + 1)));
        CUDA_CHECK(cudaMallocHost(&norm2_host, sizeof(double)));
    }
    const size_t bytes = sizeof(double) * n * (size_t)n * n;
    const double h = 2.0 / (n - 1);
    const int inner = n - 2;
    const dim3 block(kBx, kBy);
    auto grid = [&](int run) {
        return dim3(inner > 0 ? (inner + kBx - 1) / kBx : 1, inner > 0 ? (inner + kBy - 1) / kBy : 1,
                    inner > 0 ? (inner + run - 1) / run : 1);
    };
    double* cur = u;  // holds the field
    int sweeps = 0;
    if (tol <= 0) {  // exactly max_iter sweeps, u and u_old in turn
        double* next = u_old;
        for (; sweeps < max_iter; ++sweeps) {
            if (inner > 0) sweep_kernel<false><<<grid(run_for(false)), block>>>(n, cur, f, next, h * h, nullptr);
            std::swap(cur, next);
        }
        CUDA_CHECK(cudaGetLastError());
    } else {
        double last = -1, before = -1;  // the squared norms of the last two sweeps
        // Whether the sweep `ahead` sweeps from now is expected to be the last: the norm keeps
        // falling by the factor of the last two sweeps.
        auto expected_last = [&](int ahead) {
            if (last < 0 || before <= 0) return false;
            double estimate = last;
            for (int i = 0; i < ahead; ++i) estimate *= last / before;
            return std::sqrt(estimate) < tol;
        };
        bool scratch_has_walls = false;
        auto third = [&] {  // the scratch field, with the walls
            if (scratch_bytes < bytes) {
                if (scratch) CUDA_CHECK(cudaFree(scratch));
                CUDA_CHECK(cudaMalloc(&scratch, bytes));
                scratch_bytes = bytes;
            }
            if (!scratch_has_walls) {
                walls_kernel<<<dim3((n + 127) / 128, n), 128>>>(n, u, scratch);
                scratch_has_walls = true;
            }
            return scratch;
        };
        while (sweeps < max_iter) {
            double* next;
            if (expected_last(1) && cur != u)
                next = u;
            else if (expected_last(2) && sweeps + 1 < max_iter)  // the sweep after this one should write u
                next = cur == u_old ? third() : u_old;
            else
                next = cur == u ? u_old : u;  // in turn
            if (inner > 0) sweep_kernel<true><<<grid(run_for(true)), block>>>(n, cur, f, next, h * h, norm2);
            gather_norm<<<1, 32>>>(norm2);
            CUDA_CHECK(cudaGetLastError());
            cur = next;
            ++sweeps;
            CUDA_CHECK(cudaMemcpyAsync(norm2_host, norm2 + kSlots, sizeof(double), cudaMemcpyDeviceToHost));
            CUDA_CHECK(cudaStreamSynchronize(0));
            before = last;
            last = *norm2_host;
            if (std::sqrt(last) < tol) break;
        }
    }
    if (cur != u) CUDA_CHECK(cudaMemcpyAsync(u, cur, bytes, cudaMemcpyDeviceToDevice));
    return sweeps;
}
