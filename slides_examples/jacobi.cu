// jacobi.cu: Jacobi iteration for the 3D Poisson problem (FP64), the course's "radiator in a
// room" (SPEC section 4) as a progression.
//
// -Laplace(u) = f on [-1,1]^3, n^3 points including the boundary, h = 2/(n-1). u = 20 on every
// wall except 0 on y = -1; f = 200 in the radiator box, 0 elsewhere. One sweep:
//   u[i][j][k] = (uo[i-1][j][k] + uo[i+1][j][k] + uo[i][j-1][k] + uo[i][j+1][k]
//                 + uo[i][j][k-1] + uo[i][j][k+1] + h*h*f[i][j][k]) / 6
//
//   v1  one GPU thread does all points
//         The CPU loop on one GPU thread: it shows that a GPU thread is much slower than a CPU
//         core. Timed at n = 48, 10 sweeps, one run.
//   v2  one thread per point (fixed number of sweeps, no norm)
//         n^3 threads; a warp reads 32 consecutive k. Napkin math: 7 loads + 1 store per
//         update, but the neighbours come from L1/L2, so DRAM sees ~24 bytes (uo, f, u): the
//         sweep is bandwidth bound, and the % of DRAM peak says how close it gets.
//   v3  + the norm for convergence, one atomicAdd per point
//         sqrt(sum (u - uo)^2) every sweep to stop at a tolerance. Every point adds its square
//         to ONE double with atomicAdd: (n-2)^3 atomics on one address per sweep, serialized in
//         the L2. Slower than v2 by a lot: the lesson.
//   v4  the norm by a block reduction, then one atomicAdd per block
//         Each block sums its 256 squares with warp shuffles; 256x fewer atomics. The norm now
//         costs little more than v2.
//   v5  two GPUs with peer access (v4's kernel on each half)
//         The grid is cut into two slabs of planes, one per GPU. Each GPU reads the one plane
//         of its neighbour it needs straight from the other GPU's memory (peer access over
//         NVLink/PCIe), with no copies. Needs two GPUs where peer access works; otherwise it
//         is listed as skipped, with the reason.
//
// v3 to v5 are timed with a tolerance that is never reached, so they run the same number of
// sweeps as v2, norm included. Checked against the CPU at n = 34: v1, v2 on 20 sweeps (the
// field), v3 to v5 to convergence (the number of sweeps must match the CPU's exactly, and the
// field). Rate: GB/s = 24 bytes per update / time (MLUPS in the notes).
#include "common.cuh"

using slides::Version;

static const Version kVersions[] = {
    {"one GPU thread does all points"},
    {"one thread per point"},
    {"+ norm: one atomicAdd per point"},
    {"+ norm: block reduction, one atomicAdd per block"},
    {"two GPUs with peer access", true, "", 2},
};
static const int kCount = sizeof(kVersions) / sizeof(kVersions[0]);

#define BX 32  // threads along k (contiguous)
#define BY 8   // threads along j

// ------------------------------------------------------------------------------------------------
// The problem and the CPU reference.
static void setup(int n, std::vector<double>& u, std::vector<double>& f) {
    size_t nn = (size_t)n * n;
    u.assign(nn * n, 0.0);
    f.assign(nn * n, 0.0);
    double h = 2.0 / (n - 1);
    for (int i = 0; i < n; ++i)
        for (int j = 0; j < n; ++j)
            for (int k = 0; k < n; ++k) {
                double x = -1 + i * h, y = -1 + j * h, z = -1 + k * h;
                size_t p = i * nn + (size_t)j * n + k;
                bool wall = i == 0 || i == n - 1 || j == 0 || j == n - 1 || k == 0 || k == n - 1;
                if (wall) u[p] = j == 0 ? 0.0 : 20.0;
                if (x <= -3.0 / 8 && y <= -0.5 && z >= -2.0 / 3 && z <= 0.0) f[p] = 200.0;
            }
}

// Sweeps until max_iter, or until the norm of the update is below tol (tol = 0: max_iter
// sweeps). Returns the number of sweeps; the final field is in u.
static int jacobi_cpu(int n, int max_iter, double tol, std::vector<double>& u, const std::vector<double>& f) {
    size_t nn = (size_t)n * n;
    double h2 = (2.0 / (n - 1)) * (2.0 / (n - 1));
    std::vector<double> cur = u, nxt = u;  // each sweep reads cur and writes nxt
    int it = 0;
    while (it < max_iter) {
        double norm = 0;
        for (int i = 1; i < n - 1; ++i)
            for (int j = 1; j < n - 1; ++j)
                for (int k = 1; k < n - 1; ++k) {
                    size_t p = i * nn + (size_t)j * n + k;
                    nxt[p] = (1.0 / 6.0) * (cur[p - nn] + cur[p + nn] + cur[p - n] + cur[p + n] + cur[p - 1] +
                                            cur[p + 1] + h2 * f[p]);
                    norm += (nxt[p] - cur[p]) * (nxt[p] - cur[p]);
                }
        ++it;
        std::swap(cur, nxt);
        if (tol > 0 && std::sqrt(norm) < tol) break;
    }
    u = cur;
    return it;
}

// ------------------------------------------------------------------------------------------------
// v1: one thread, one sweep (the host launches one kernel per sweep).
__global__ void sweep_single_thread(int n, double h2, double* u, const double* uo, const double* f) {
    size_t nn = (size_t)n * n;
    for (int i = 1; i < n - 1; ++i)
        for (int j = 1; j < n - 1; ++j)
            for (int k = 1; k < n - 1; ++k) {
                size_t p = i * nn + (size_t)j * n + k;
                u[p] = (1.0 / 6.0) * (uo[p - nn] + uo[p + nn] + uo[p - n] + uo[p + n] + uo[p - 1] +
                                      uo[p + 1] + h2 * f[p]);
            }
}

// A block's sum by warp shuffles (valid in thread 0). Every thread of the block must call it.
__device__ inline double block_sum(double x) {
    __shared__ double warp_sums[BX * BY / 32];
    int t = threadIdx.y * BX + threadIdx.x, lane = t % 32, warp = t / 32;
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) x += __shfl_down_sync(0xffffffffu, x, off);
    if (lane == 0) warp_sums[warp] = x;
    __syncthreads();
    x = t < BX * BY / 32 ? warp_sums[t] : 0.0;
    if (warp == 0)
#pragma unroll
        for (int off = 16; off > 0; off >>= 1) x += __shfl_down_sync(0xffffffffu, x, off);
    return x;
}

// v2 to v5: one thread per point of planes [i_begin, i_end) of a slab that holds global planes
// [base, base + planes). The planes just outside the slab come from `below` and `above` (the
// other GPU's memory in v5; never used in v2 to v4, where the slab is the whole grid).
// NORM: 0 none (v2), 1 one atomicAdd per point (v3), 2 block reduction + one atomicAdd (v4, v5).
template <int NORM>
__global__ void __launch_bounds__(BX * BY) sweep(int n, double h2, int i_begin, int base, int planes,
                                                 double* u, const double* uo, const double* f,
                                                 const double* below, const double* above, double* norm) {
    size_t nn = (size_t)n * n;
    int k = blockIdx.x * BX + threadIdx.x, j = blockIdx.y * BY + threadIdx.y, i = i_begin + blockIdx.z;
    int li = i - base;  // the plane within this slab
    double d2 = 0.0;
    const bool interior = j >= 1 && j < n - 1 && k >= 1 && k < n - 1;  // i is interior by the grid
    if (interior) {
        size_t p = (size_t)j * n + k;
        const double* c = uo + li * nn;
        const double* lo = li == 0 ? below : c - nn;
        const double* hi = li == planes - 1 ? above : c + nn;
        double v = (1.0 / 6.0) * (lo[p] + hi[p] + c[p - n] + c[p + n] + c[p - 1] + c[p + 1] + h2 * f[li * nn + p]);
        u[li * nn + p] = v;
        d2 = (v - c[p]) * (v - c[p]);
    }
    if (NORM == 1) {
        if (interior) atomicAdd(norm, d2);
    } else if (NORM == 2) {
        d2 = block_sum(d2);  // no early return above: every thread takes part
        if (threadIdx.x == 0 && threadIdx.y == 0) atomicAdd(norm, d2);
    }
}

// ------------------------------------------------------------------------------------------------
// One GPU (v1 to v4). u and uo hold the same initial field; returns the number of sweeps; the
// final field ends in u.
static int jacobi_one_gpu(int v, int n, int max_iter, double tol, double* u, double* uo,
                          const double* f, double* dnorm) {
    double h2 = (2.0 / (n - 1)) * (2.0 / (n - 1));
    double *cur = uo, *nxt = u;  // each sweep reads cur and writes nxt
    dim3 block(BX, BY), grid((n + BX - 1) / BX, (n + BY - 1) / BY, n - 2);
    int it = 0;
    while (it < max_iter) {
        if (v >= 3) CUDA_CHECK(cudaMemsetAsync(dnorm, 0, sizeof(double)));
        switch (v) {
        case 1: sweep_single_thread<<<1, 1>>>(n, h2, nxt, cur, f); break;
        case 2: sweep<0><<<grid, block>>>(n, h2, 1, 0, n, nxt, cur, f, nullptr, nullptr, dnorm); break;
        case 3: sweep<1><<<grid, block>>>(n, h2, 1, 0, n, nxt, cur, f, nullptr, nullptr, dnorm); break;
        case 4: sweep<2><<<grid, block>>>(n, h2, 1, 0, n, nxt, cur, f, nullptr, nullptr, dnorm); break;
        }
        CUDA_CHECK(cudaGetLastError());
        ++it;
        std::swap(cur, nxt);
        if (v >= 3 && tol > 0) {
            double norm;  // the host waits for every sweep here: the price of checking the norm
            CUDA_CHECK(cudaMemcpy(&norm, dnorm, sizeof(double), cudaMemcpyDeviceToHost));
            if (std::sqrt(norm) < tol) break;
        }
    }
    if (cur != u) CUDA_CHECK(cudaMemcpyAsync(u, cur, (size_t)n * n * n * sizeof(double), cudaMemcpyDeviceToDevice));
    return it;
}

// Two GPUs (v5): GPU g holds planes [base[g], base[g] + planes[g]) of u, uo and f.
struct TwoGpus {
    int n = 0, base[2] = {0, 0}, planes[2] = {0, 0};
    double *u[2] = {}, *uo[2] = {}, *f[2] = {}, *norm[2] = {};

    // Empty when peer access works both ways; otherwise why not.
    static std::string unavailable(int count) {
        if (count < 2) return "needs two GPUs (found " + std::to_string(count) + ")";
        int a = 0, b = 0;
        CUDA_CHECK(cudaDeviceCanAccessPeer(&a, 0, 1));
        CUDA_CHECK(cudaDeviceCanAccessPeer(&b, 1, 0));
        if (!a || !b) return "needs two GPUs with peer access (GPU 0 and 1 cannot access each other)";
        return "";
    }

    void init(int n_, const std::vector<double>& hu, const std::vector<double>& hf) {
        n = n_;
        size_t nn = (size_t)n * n;
        base[0] = 0, planes[0] = n / 2, base[1] = n / 2, planes[1] = n - n / 2;
        for (int g = 0; g < 2; ++g) {
            CUDA_CHECK(cudaSetDevice(g));
            cudaError_t e = cudaDeviceEnablePeerAccess(1 - g, 0);
            if (e == cudaErrorPeerAccessAlreadyEnabled) (void)cudaGetLastError();
            else CUDA_CHECK(e);
            size_t bytes = planes[g] * nn * sizeof(double);
            CUDA_CHECK(cudaMalloc(&u[g], bytes));
            CUDA_CHECK(cudaMalloc(&uo[g], bytes));
            CUDA_CHECK(cudaMalloc(&f[g], bytes));
            CUDA_CHECK(cudaMalloc(&norm[g], sizeof(double)));
            CUDA_CHECK(cudaMemcpy(u[g], hu.data() + base[g] * nn, bytes, cudaMemcpyHostToDevice));
            CUDA_CHECK(cudaMemcpy(uo[g], hu.data() + base[g] * nn, bytes, cudaMemcpyHostToDevice));
            CUDA_CHECK(cudaMemcpy(f[g], hf.data() + base[g] * nn, bytes, cudaMemcpyHostToDevice));
        }
        CUDA_CHECK(cudaSetDevice(0));
    }

    // As jacobi_one_gpu; the final field is in u[0], u[1].
    int run(int max_iter, double tol) {
        size_t nn = (size_t)n * n;
        double h2 = (2.0 / (n - 1)) * (2.0 / (n - 1));
        double *cur[2] = {uo[0], uo[1]}, *nxt[2] = {u[0], u[1]};
        int it = 0;
        while (it < max_iter) {
            for (int g = 0; g < 2; ++g) {
                CUDA_CHECK(cudaSetDevice(g));
                CUDA_CHECK(cudaMemsetAsync(norm[g], 0, sizeof(double)));
                int i_begin = std::max(base[g], 1), i_end = std::min(base[g] + planes[g], n - 1);
                // The neighbour's plane just below / above this slab, read over peer access.
                const double* below = g == 1 ? cur[0] + (planes[0] - 1) * nn : nullptr;
                const double* above = g == 0 ? cur[1] : nullptr;
                dim3 block(BX, BY), grid((n + BX - 1) / BX, (n + BY - 1) / BY, i_end - i_begin);
                if (i_end > i_begin)
                    sweep<2><<<grid, block>>>(n, h2, i_begin, base[g], planes[g], nxt[g], cur[g], f[g], below, above, norm[g]);
                CUDA_CHECK(cudaGetLastError());
            }
            // Both GPUs must finish the sweep before either reads the other's new plane.
            double total = 0;
            for (int g = 0; g < 2; ++g) {
                double part;
                CUDA_CHECK(cudaSetDevice(g));
                CUDA_CHECK(cudaMemcpy(&part, norm[g], sizeof(double), cudaMemcpyDeviceToHost));
                total += part;
            }
            ++it;
            std::swap(cur[0], nxt[0]);
            std::swap(cur[1], nxt[1]);
            if (tol > 0 && std::sqrt(total) < tol) break;
        }
        for (int g = 0; g < 2; ++g) {
            CUDA_CHECK(cudaSetDevice(g));
            if (cur[g] != u[g]) CUDA_CHECK(cudaMemcpy(u[g], cur[g], planes[g] * nn * sizeof(double), cudaMemcpyDeviceToDevice));
        }
        CUDA_CHECK(cudaSetDevice(0));
        return it;
    }

    void gather(std::vector<double>& hu) {
        size_t nn = (size_t)n * n;
        for (int g = 0; g < 2; ++g) {
            CUDA_CHECK(cudaSetDevice(g));
            CUDA_CHECK(cudaMemcpy(hu.data() + base[g] * nn, u[g], planes[g] * nn * sizeof(double), cudaMemcpyDeviceToHost));
        }
        CUDA_CHECK(cudaSetDevice(0));
    }

    void release() {
        for (int g = 0; g < 2; ++g) {
            CUDA_CHECK(cudaSetDevice(g));
            for (double* p : {u[g], uo[g], f[g], norm[g]}) CUDA_CHECK(cudaFree(p));
        }
        CUDA_CHECK(cudaSetDevice(0));
    }
};

// ------------------------------------------------------------------------------------------------
int main(int argc, char** argv) {
    slides::Bench bench(argc, argv, "jacobi", "dram", kVersions, kCount);
    const int nc = 34, check_sweeps = 20;  // check size
    const double check_tol = 1e-2;         // convergence check (v3 to v5)
    const int check_max_iter = 20000;
    const int n = 256, sweeps = 20;        // timed: 16.4 M updates per sweep
    const int n_single = 48, sweeps_single = 10;  // v1's timed size: ~1 M updates on one thread
    const double never = 1e-300;          // a tolerance no sweep reaches: the norm is computed, never met
    const double field_tol = 1e-10;

    // CPU references at the check size.
    std::vector<double> cu0, cf, ref_fixed, ref_conv;
    setup(nc, cu0, cf);
    ref_fixed = cu0;
    jacobi_cpu(nc, check_sweeps, 0.0, ref_fixed, cf);
    ref_conv = cu0;
    const int ref_iters = jacobi_cpu(nc, check_max_iter, check_tol, ref_conv, cf);
    std::printf("  CPU at n=%d: %d sweeps to reach a norm below %g\n", nc, ref_iters, check_tol);

    std::vector<double> hu, hf;
    setup(n, hu, hf);
    size_t bytes = (size_t)n * n * n * sizeof(double);
    double *du, *duo, *df, *dnorm;
    CUDA_CHECK(cudaMalloc(&du, bytes));
    CUDA_CHECK(cudaMalloc(&duo, bytes));
    CUDA_CHECK(cudaMalloc(&df, bytes));
    CUDA_CHECK(cudaMalloc(&dnorm, sizeof(double)));
    auto load = [&](int m, const std::vector<double>& u0, const std::vector<double>& f0) {
        size_t b = (size_t)m * m * m * sizeof(double);
        CUDA_CHECK(cudaMemcpy(du, u0.data(), b, cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaMemcpy(duo, u0.data(), b, cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaMemcpy(df, f0.data(), b, cudaMemcpyHostToDevice));
    };

    for (int v : bench.selected()) {
        const bool converge = v >= 3;
        const int check_iters = converge ? check_max_iter : check_sweeps;
        const double tol = converge ? check_tol : 0.0;
        const std::vector<double>& ref = converge ? ref_conv : ref_fixed;
        std::vector<double> out(cu0.size());
        int iters;
        char size[64];

        if (v == 5) {
            std::string why = TwoGpus::unavailable(bench.device_count());
            if (!why.empty()) { bench.skip(v, why); continue; }
            TwoGpus two;
            two.init(nc, cu0, cf);
            iters = two.run(check_iters, tol);
            two.gather(out);
            two.release();
        } else {
            load(nc, cu0, cf);
            iters = jacobi_one_gpu(v, nc, check_iters, tol, du, duo, df, dnorm);
            CUDA_CHECK(cudaMemcpy(out.data(), du, out.size() * sizeof(double), cudaMemcpyDeviceToHost));
        }
        char msg[96];
        std::snprintf(msg, sizeof msg, "n=%d: %d sweeps, the CPU needed %d", nc, iters, converge ? ref_iters : check_sweeps);
        if (!bench.check_that(v, iters == (converge ? ref_iters : check_sweeps), msg)) continue;
        if (!bench.check(v, slides::rel_error(out.data(), ref.data(), out.size()), field_tol, "the field at n=34")) continue;

        // The timed size. Every run does the same number of sweeps (the tolerance is never met).
        const int m = v == 1 ? n_single : n, s = v == 1 ? sweeps_single : sweeps;
        std::snprintf(size, sizeof size, "n=%d, %d sweeps", m, s);
        double updates = double(m - 2) * (m - 2) * (m - 2) * s;
        if (v == 5) {
            TwoGpus two;
            two.init(m, hu, hf);
            two.run(1, never);  // warm-up
            bench.time(v, [&] { two.run(s, never); }, 24.0 * updates, "GB/s", size, 25, 1000.0);
            two.release();
        } else {
            std::vector<double> u0, f0;
            if (v == 1) setup(m, u0, f0);
            load(m, v == 1 ? u0 : hu, v == 1 ? f0 : hf);
            jacobi_one_gpu(v, m, 1, never, du, duo, df, dnorm);  // warm-up
            bench.time(v, [&] { jacobi_one_gpu(v, m, s, never, du, duo, df, dnorm); }, 24.0 * updates, "GB/s",
                       size, v == 1 ? 1 : 25, 1000.0);
        }
        if (!bench.check_only()) {
            char note[48];
            std::snprintf(note, sizeof note, "%.0f MLUPS", updates / 1e6 / (bench.ms(v) * 1e-3));
            bench.add_note(v, note);
        }
    }
    for (double* p : {du, duo, df, dnorm}) CUDA_CHECK(cudaFree(p));
    return 0;
}
