/*
Reference kernel for jacobi: the 3D Poisson problem by Jacobi sweeps, FP64, one GPU.

    for every interior point (i, j, k):
        u[i][j][k] = (u_old[i-1][j][k] + u_old[i+1][j][k] + u_old[i][j-1][k] + u_old[i][j+1][k]
                      + u_old[i][j][k-1] + u_old[i][j][k+1] + h*h*f[i][j][k]) / 6
    then u and u_old trade places; stop after max_iter sweeps or when ||u - u_old|| < tol.

Napkin math at n = 512: 510^3 = 1.3e8 updates per sweep. Each update needs u_old and f once and
writes u once: 24 bytes, 3.2 GB per sweep, 0.67 ms at 4.8 TB/s (0.8 ms at a measured ~4 TB/s).
The 8 FLOPs per update are nothing (1 GFLOP per sweep). So a sweep on its own can at best touch DRAM
with those 24 bytes and nothing more (every other read of u_old must hit a cache), and the way past
that bound is to do two sweeps in one pass over memory: 12 bytes per update, and the rims below.

Design:
- Two sweeps a pass (temporal blocking). A block of 32 x 16 threads holds a 32 x 16 tile of a plane
  (k, j) and walks a chunk of 64 planes in i. For each plane it computes the first sweep on the tile
  less its outer ring (30 x 14 points: each needs its four in-plane neighbours) and, one plane
  behind, the second sweep from the first on the tile less two rings (28 x 12), which it writes.
  Three planes of the field and three of the first sweep live in registers (the i-neighbours), the
  plane being worked on in shared memory, two of each by turns so that one __syncthreads a plane
  does. Tiles overlap by two points and chunks by two planes: 512 points read for 336 written
  (most rim reads hit L2, as the neighbouring tiles read the same points about the same time), the
  first sweep done 1.25 times over. The sums are those of a single sweep in the same order, so the
  field is bitwise the one a sweep at a time gives. At n = 512 on one H200, against the single
  sweep below in the same run: 100 sweeps in 57.3 ms (231,300 MLUPS, 116% of the DRAM's 4.8 TB/s
  counted at 24 bytes per update) against 83.5 ms (158,900), and the converging case's 21 sweeps
  in 13.1 ms (212,800) against 19.0 ms (146,400). Tiles of 32 x 8 threads ran at 192,600 and of
  32 x 32 at 159,600; chunks of 32 and 128 planes at 226,400 and 225,400.
- The single sweep (an odd count's last, and a converging run's expected last): a block of 32 x 8
  threads owns a (k, j) tile, and each thread walks a run of kRun planes in i, keeping u_old[i-1],
  u_old[i] and u_old[i+1] of its column in registers: the i-neighbours cost no load. The four
  in-plane neighbours are loads that hit L1 (each is also the centre of a neighbouring thread of the
  same block) or, at the tile edges, L2.
- A warp reads 32 consecutive k: 256 contiguous bytes per load, full sectors.
- Both kernels load through the read-only path by __ldg. Their const __restrict__ pointers already
  compile to ld.global.nc, but the explicit form compiles differently (32 registers a thread, 8
  blocks of 256 threads an SM) and ran faster in every grading: the fixed sweep at 120,100 MLUPS on
  one H100 against 117,000 (86.0% of DRAM) and 158,700 on one H200 against 151,200 (79.3%), the
  converging case at 110,700 to 110,900 on one H100 against 109,700 to 109,800.
- How many planes a thread walks (kRun) was measured at n = 512, 100 sweeps, blocks of 32 x 8:
  4 planes ran at 117,200 MLUPS on an H100 and 151,500 on an H200, 16 planes at 111,400 and
  150,100 (a device copy of the same bytes: 125,700 and 178,000). Short runs make more, shorter
  blocks (131072 at n = 512 against 32768); the two extra planes a run reads at its ends come
  from L2, not DRAM. The norm kernel walks 8: with 4 it makes twice the block sums and ran at
  109,400 to 109,700 against 111,800 to 112,300 (graded on one H100).
- The norm only when tol > 0 (a template flag, so the fixed-sweep kernels carry nothing for it):
  each thread sums its squared changes (in a pass, the first sweep's and the second's apart), each
  warp its threads' with shuffles, and each block its warps' through shared memory into its own
  place in an array: no atomics, so the norm is added in the same order every time and a run gives
  the same count every time. One block of 1024 threads then adds the blocks' sums, writes the norm
  into pinned host memory mapped into the device, and raises a flag on the device once it is below
  tol.
- The host does not wait for a sweep's norm before it queues the next: it keeps up to three sweeps
  queued ahead of the one whose norm it waits for (an event each launch), and a launch that starts
  after the flag went up returns at once, so the count stays exact and the GPU never waits for the
  host. A launch is a pass of two sweeps, or a single sweep where the host expects that sweep to
  be the last (below); it queues nothing past a sweep it expects to be the last, so a run that ends
  as predicted queues no sweep it does not need. Where the first of a pass's two sweeps is the last
  after all, that sweep is done again alone from the pass's input, which no later launch wrote.
- u and u_old trade places by pointer; after an odd number of sweeps the field is in u_old and
  one copy moves it to u: 2 x 1.07 GB at n = 512, ~0.7 ms, as much as 3% of the 21 sweeps of the
  graded converging case. There the count is not known in advance, but the norm of a Jacobi run
  falls by a near-constant factor per sweep: the host predicts from the last two norms it read
  which sweep will be the last (none comes after max_iter), and when the fields' turns would put
  that sweep's output in u_old, the sweep before it writes a third field (a scratch buffer, given
  the walls once: 6 faces, 12 MB) so that the last one writes u. A wrong guess costs only the copy.
- The converging case graded on one H100, two gradings each: 109,700 to 110,300 MLUPS for the
  host reading each norm back before the next sweep (one atomicAdd per warp into 64 slots, a
  one-warp kernel summing them); 110,700 to 110,900 with __ldg; 111,200 to 111,800 with the sweeps
  queued ahead as above; 111,800 to 112,300 (80.1 to 80.5% of DRAM) with the block sums in place
  of the atomics. Having the last block to finish sum the slots (a __threadfence and a ticket
  from one counter per block) ran at 104,800: every block holds its SM until its fence returns.
*/

#include <algorithm>
#include <cmath>
#include <utility>

#include "cuda_check.cuh"

namespace {

constexpr int kBx = 32, kBy = 8;
// Planes per thread: see the docblock.
constexpr int run_for(bool norm) { return norm ? 8 : 4; }
// Two sweeps a pass: tiles of 32 x kTj points, chunks of kPlanes planes (see the docblock); a tile
// writes its inner kOutK x kOutJ.
constexpr int kTj = 16, kPlanes = 64, kOutK = 32 - 4, kOutJ = kTj - 4;

// The sum of v over the block (a multiple of 32 threads, at most 1024), in the same order every
// time: each warp's by shuffles, then the warps' by the first warp. Thread 0 has it.
__device__ double block_sum(double v) {
    __shared__ double part[32];
    const int t = threadIdx.y * blockDim.x + threadIdx.x, warps = blockDim.x * blockDim.y / 32;
    for (int o = 16; o > 0; o /= 2) v += __shfl_down_sync(0xffffffffu, v, o);
    if (t % 32 == 0) part[t / 32] = v;
    __syncthreads();
    v = t < warps ? part[t] : 0;
    if (t < 32)
        for (int o = 16; o > 0; o /= 2) v += __shfl_down_sync(0xffffffffu, v, o);
    return v;
}

template <bool kNorm, int kRun = run_for(kNorm)>
__global__ void __launch_bounds__(kBx* kBy) sweep_kernel(int n, const double* __restrict__ uo, const double* __restrict__ f,
                                                         double* __restrict__ u, double h2, double* norm2) {
    // norm2 (kNorm): [0] is 1 once a sweep converged, then each block's sum of squared changes.
    if (kNorm && norm2[0] != 0) return;  // queued behind a sweep that converged: nothing to do
    const long long nn = (long long)n * n;
    const int k = 1 + blockIdx.x * kBx + threadIdx.x;
    const int j = 1 + blockIdx.y * kBy + threadIdx.y;
    double d2 = 0;
    auto ld = [](const double* a) { return __ldg(a); };  // see the docblock
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
    walk(1 + blockIdx.z * kRun);
    if (kNorm) {  // the block's sum of squared changes into norm2[1 + block]
        d2 = block_sum(d2);
        if (threadIdx.x == 0 && threadIdx.y == 0) norm2[1 + blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z)] = d2;
    }
}


// Two sweeps in one pass over memory (see the docblock). A block of 32 x kTj threads holds a (k, j)
// tile with a rim of two points and walks the planes i of its chunk: for each plane it computes the
// first sweep on the tile less one rim point (30 x (kTj - 2)) and, one plane behind, the second sweep
// on the tile less two (28 x (kTj - 4)), which it writes. Tiles overlap by their rims. With kNorm,
// norm2 is as in sweep_kernel but holds two sums per block: the first sweep's, then the second's.
template <bool kNorm>
__global__ void __launch_bounds__(32 * kTj) two_sweeps_kernel(int n, const double* __restrict__ u0, const double* __restrict__ f,
                                                               double* __restrict__ u2, double h2, double* norm2) {
    if (kNorm && norm2[0] != 0) return;  // queued behind a sweep that converged
    __shared__ double s0[2][kTj][32], s1[2][kTj][32];  // a plane of the field and one of the first sweep, by turns
    const long long nn = (long long)n * n;
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int k = blockIdx.x * kOutK - 1 + tx, j = blockIdx.y * kOutJ - 1 + ty;  // may lie off the grid
    const bool in_grid = k >= 0 && k < n && j >= 0 && j < n;
    const bool wall = k == 0 || k == n - 1 || j == 0 || j == n - 1;
    const bool first = in_grid && tx >= 1 && tx <= 30 && ty >= 1 && ty <= kTj - 2;  // sweep 1 is computed here
    const bool second = first && !wall && tx >= 2 && tx <= 29 && ty >= 2 && ty <= kTj - 3;  // sweep 2 written here
    const int i0 = 1 + blockIdx.z * kPlanes, i1 = min(i0 + kPlanes, n - 1);  // the chunk: sweep 2 on [i0, i1)
    const long long col = (long long)j * n + k;
    auto ld = [&](const double* a, int i) { return __ldg(a + i * nn + col); };  // see the docblock
    // Sweep 1 is needed on planes [i0 - 1, i1], and reads the field on [i0 - 2, i1 + 1].
    double m = 0, c = 0, p = 0;     // the field on planes q - 1, q, q + 1
    double a1 = 0, b1 = 0, c1 = 0;  // sweep 1 on planes q - 2, q - 1, q
    double fq = 0, fb = 0;          // f on planes q and q - 1
    double d1 = 0, d2 = 0;          // the squared changes of sweeps 1 and 2 at the points written here
    if (in_grid) {
        if (i0 >= 2) m = ld(u0, i0 - 2);
        c = ld(u0, i0 - 1);
    }
    for (int q = i0 - 1, t = 0; q <= i1; ++q, ++t) {
        const int b = t & 1;  // which of the two planes of s0 and s1 this step writes
        if (in_grid && q + 1 < n) p = ld(u0, q + 1);
        if (first && !wall && q > 0 && q < n - 1) fq = ld(f, q);
        s0[b][ty][tx] = c;
        __syncthreads();  // s0[b] written; s1[b ^ 1] written by the step before
        if (first)
            c1 = wall || q == 0 || q == n - 1 ? c  // the walls never change
                 : (1.0 / 6.0) * (m + p + s0[b][ty - 1][tx] + s0[b][ty + 1][tx] + s0[b][ty][tx - 1] + s0[b][ty][tx + 1] + h2 * fq);
        if (second && q > i0) {  // sweep 2 on plane q - 1
            const double v = (1.0 / 6.0) * (a1 + c1 + s1[b ^ 1][ty - 1][tx] + s1[b ^ 1][ty + 1][tx] + s1[b ^ 1][ty][tx - 1] +
                                             s1[b ^ 1][ty][tx + 1] + h2 * fb);
            u2[(q - 1) * nn + col] = v;
            if (kNorm) {
                d1 += (b1 - m) * (b1 - m);
                d2 += (v - b1) * (v - b1);
            }
        }
        s1[b][ty][tx] = c1;  // read in the next step, after its __syncthreads
        a1 = b1, b1 = c1;
        m = c, c = p;
        fb = fq;
    }
    if (kNorm) {
        const long long block = blockIdx.x + gridDim.x * (blockIdx.y + (long long)gridDim.y * blockIdx.z);
        d1 = block_sum(d1);
        __syncthreads();  // block_sum's shared words are free again
        d2 = block_sum(d2);
        if (tx == 0 && ty == 0) norm2[1 + 2 * block] = d1, norm2[2 + 2 * block] = d2;
    }
}

// The sums of the blocks' sums into host memory, in the same order every time: a launch of `per`
// sweeps (1 or 2) left block b's sum for its sweep w in norm2[1 + per * b + w]; sweep w's total goes to
// *out[w]. norm2[0] = 1 once one of them is below tol. One block of 1024 threads.
__global__ void gather_norm(double* norm2, long long blocks, int per, double* out0, double* out1, double tol) {
    if (norm2[0] != 0) return;
    double sum[2] = {0, 0};
    for (int w = 0; w < per; ++w) {
        double v = 0;
        for (long long i = threadIdx.x; i < blocks; i += blockDim.x) v += norm2[1 + i * per + w];
        sum[w] = block_sum(v);
        __syncthreads();  // block_sum's shared words are free again
    }
    if (threadIdx.x == 0) {
        *out0 = sum[0];
        if (per == 2) *out1 = sum[1];
        if (sqrt(sum[0]) < tol || (per == 2 && sqrt(sum[1]) < tol)) norm2[0] = 1;  // the host decides the same
    }
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
    const size_t bytes = sizeof(double) * n * (size_t)n * n;
    const double h = 2.0 / (n - 1);
    const int inner = n - 2;
    const dim3 block(kBx, kBy), pair_block(32, kTj);
    auto cover = [&](int per) { return inner > 0 ? (inner + per - 1) / per : 1; };  // blocks of `per` over the interior
    auto grid = [&](int run) { return dim3(cover(kBx), cover(kBy), cover(run)); };
    const dim3 pair_grid(cover(kOutK), cover(kOutJ), cover(kPlanes));
    double* cur = u;  // holds the field
    int sweeps = 0;
    if (tol <= 0) {  // exactly max_iter sweeps, two a pass, u and u_old in turn
        double* next = u_old;
        for (; sweeps < max_iter; std::swap(cur, next)) {
            const int pass = max_iter - sweeps >= 2 ? 2 : 1;  // the sweeps of this launch
            if (inner > 0 && pass == 2)
                two_sweeps_kernel<false><<<pair_grid, pair_block>>>(n, cur, f, next, h * h, nullptr);
            else if (inner > 0)
                sweep_kernel<false><<<grid(run_for(false)), block>>>(n, cur, f, next, h * h, nullptr);
            sweeps += pass;
        }
        CUDA_CHECK(cudaGetLastError());
    } else if (inner <= 0) {
        return 1;  // no interior point: the first sweep changes nothing
    } else {  // until the norm is below tol (see the docblock)
        constexpr int kRing = 8;  // sweep s's norm lands in norms[s % kRing], its launch in launches[s % kRing]
        static double* norm2 = nullptr;  // on the device: the flag, then each block's sums
        static long long norm2_size = 0;
        static double* norms = nullptr;  // pinned and mapped
        static cudaEvent_t done[kRing];  // the launch whose last sweep is s has ended once done[s % kRing] has passed
        static double* scratch = nullptr;  // the third field (see the docblock), made on first need
        static size_t scratch_bytes = 0;
        const dim3 g1 = grid(run_for(true));
        const long long nb1 = (long long)g1.x * g1.y * g1.z, nb2 = (long long)pair_grid.x * pair_grid.y * pair_grid.z;
        if (norm2_size < 1 + std::max(nb1, 2 * nb2)) {
            if (norm2) CUDA_CHECK(cudaFree(norm2));
            norm2_size = 1 + std::max(nb1, 2 * nb2);
            CUDA_CHECK(cudaMalloc(&norm2, sizeof(double) * norm2_size));
        }
        if (!norms) {
            CUDA_CHECK(cudaHostAlloc(&norms, sizeof(double) * kRing, cudaHostAllocMapped));
            for (auto& e : done) CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
        }
        double* norms_dev = nullptr;
        CUDA_CHECK(cudaHostGetDevicePointer(&norms_dev, norms, 0));
        CUDA_CHECK(cudaMemsetAsync(norm2, 0, sizeof(double)));  // the flag down
        double last = -1, before = -1;  // the squared norms of the last two sweeps the host has read
        // Whether `sweep` is expected to be the last: the norm keeps falling by the factor of the last two.
        auto expected_last = [&](int sweep) {
            if (sweep >= max_iter) return true;
            if (last < 0 || before <= 0) return false;
            double estimate = last;
            for (int i = sweeps; i < sweep; ++i) estimate *= last / before;
            return std::sqrt(estimate) < tol;
        };
        // A launch from sweep s: one sweep where s is expected to be the last, else two.
        auto count_from = [&](int s) { return expected_last(s) ? 1 : 2; };
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
        struct Launch {
            int first, last;  // its sweeps
            double *in, *out;
        } launches[kRing];
        int launched = 0;  // sweeps queued
        auto launch = [&] {
            const int s = launched + 1, count = count_from(s), e = s + count - 1;
            double* next;
            if (expected_last(e) && cur != u)
                next = u;
            else if (e < max_iter && expected_last(e + count_from(e + 1) - 1))  // the next launch, so it can write u
                next = cur == u_old ? third() : u_old;
            else
                next = cur == u ? u_old : u;
            if (count == 2) {
                two_sweeps_kernel<true><<<pair_grid, pair_block>>>(n, cur, f, next, h * h, norm2);
                gather_norm<<<1, 1024>>>(norm2, nb2, 2, norms_dev + s % kRing, norms_dev + e % kRing, tol);
            } else {
                sweep_kernel<true><<<g1, block>>>(n, cur, f, next, h * h, norm2);
                gather_norm<<<1, 1024>>>(norm2, nb1, 1, norms_dev + s % kRing, nullptr, tol);
            }
            CUDA_CHECK(cudaGetLastError());
            CUDA_CHECK(cudaEventRecord(done[e % kRing]));
            for (int x = s; x <= e; ++x) launches[x % kRing] = {s, e, cur, next};
            cur = next;  // the next launch's input
            launched = e;
        };
        auto top_up = [&] {  // up to three sweeps past the last norm read, none past one expected to be the last
            while (launched < max_iter && launched < sweeps + 3 && !(launched > sweeps && expected_last(launched))) launch();
        };
        top_up();
        while (sweeps < launched) {  // sweeps: those whose norm the host has read
            const int s = ++sweeps;
            CUDA_CHECK(cudaEventSynchronize(done[launches[s % kRing].last % kRing]));
            before = last;
            last = norms[s % kRing];
            if (std::sqrt(last) < tol) break;
            top_up();
        }
        const Launch l = launches[sweeps % kRing];
        cur = l.out;
        if (sweeps < l.last) {  // the first of two sweeps was the last: it is done again alone
            cur = l.in == u ? l.out : u;
            sweep_kernel<false><<<grid(run_for(false)), block>>>(n, l.in, f, cur, h * h, nullptr);
            CUDA_CHECK(cudaGetLastError());
        }
    }
    if (cur != u) CUDA_CHECK(cudaMemcpyAsync(u, cur, bytes, cudaMemcpyDeviceToDevice));
    return sweeps;
}
