// The jacobi problem on one GPU or split over two, shared by assignments/jacobi and
// assignments/jacobi_2gpu: the arrays, the "radiator in a room" set-up, the boundary that must not
// change, the trusted GPU sweep the checker uses for large cases (and times as the baseline), and
// the rule for a sweep count one off.
//
// On g GPUs the field is cut into g slabs of whole planes i: GPU p holds planes [first(p),
// first(p+1)) of u, u_old and f, as arrays u<p>, u_old<p>, f<p> (plain u, u_old, f on one GPU).
// The number of sweeps the entry point returns is handed over as a one-element output, "sweeps".
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "kit.cuh"
#include "cpu_reference.h"

namespace {

// A field whose planes i < split are at lo and the rest at hi (split = n: one array).
struct Planes {
    double* lo;
    double* hi;
    long long split, nn;
    __host__ __device__ double* plane(long long i) const { return i < split ? lo + i * nn : hi + (i - split) * nn; }
};

__global__ void jacobi_fill_kernel(double* x, long long n, long long plane0, long long count, bool source,
                                   double noise, uint64_t seed) {
    const long long nn = n * n;
    for (long long q = blockIdx.x * (long long)blockDim.x + threadIdx.x; q < count; q += (long long)gridDim.x * blockDim.x) {
        long long i = plane0 + q / nn, j = q % nn / n, k = q % n;
        x[q] = source ? jacobi_source(n, i, j, k) : jacobi_start(n, i, j, k, noise, seed);
    }
}

// The checker's sweep: one thread per point of planes [i0, i1), plain enough to trust, and as fast
// as the plain kernel a student writes first (its speed is the baseline of the thresholds): the
// plane pointers are picked once per thread and the reads go through the read-only path (__ldg).
// Without the latter it ran 18% slower than that kernel on an H200. Adds the squared changes into
// *norm2 (one atomic per block) when norm2 is not null.
__global__ void jacobi_plain_sweep(long long n, long long i0, Planes u, Planes uo, Planes f, double h2, double* norm2) {
    long long k = 1 + blockIdx.x * (long long)blockDim.x + threadIdx.x;
    long long j = 1 + blockIdx.y * (long long)blockDim.y + threadIdx.y;
    long long i = i0 + blockIdx.z;
    double d2 = 0;
    if (k < n - 1 && j < n - 1) {
        long long p = j * n + k;
        const double *c = uo.plane(i), *below = uo.plane(i - 1), *above = uo.plane(i + 1), *src = f.plane(i);
        double old = __ldg(c + p);
        double v = (1.0 / 6.0) * (__ldg(below + p) + __ldg(above + p) + __ldg(c + p - n) + __ldg(c + p + n) +
                                  __ldg(c + p - 1) + __ldg(c + p + 1) + h2 * __ldg(src + p));
        u.plane(i)[p] = v;
        d2 = (v - old) * (v - old);
    }
    if (!norm2) return;
    __shared__ double partial[32];
    int t = threadIdx.y * blockDim.x + threadIdx.x;
    for (int o = 16; o > 0; o /= 2) d2 += __shfl_down_sync(0xffffffffu, d2, o);
    if (t % 32 == 0) partial[t / 32] = d2;
    __syncthreads();
    if (t == 0) {
        double s = 0;
        for (int w = 0; w < (int)(blockDim.x * blockDim.y) / 32; ++w) s += partial[w];
        atomicAdd(norm2, s);
    }
}

// Lets each of the first `gpus` GPUs read the others' memory (once per process).
inline void enable_peer_access(int gpus) {
    static bool done = false;
    if (done || gpus < 2) return;
    for (int a = 0; a < gpus; ++a)
        for (int b = 0; b < gpus; ++b) {
            if (a == b) continue;
            int can = 0;
            CUDA_CHECK(cudaDeviceCanAccessPeer(&can, a, b));
            if (!can) throw std::runtime_error("GPU " + std::to_string(a) + " cannot access GPU " + std::to_string(b));
            CUDA_CHECK(cudaSetDevice(a));
            cudaError_t e = cudaDeviceEnablePeerAccess(b, 0);
            if (e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled) CUDA_CHECK(e);
            (void)cudaGetLastError();
        }
    CUDA_CHECK(cudaSetDevice(0));
    done = true;
}

class JacobiProblem : public kit::Problem {
public:
    explicit JacobiProblem(int gpus) : gpus_(gpus) {}

    static long long first_plane(long long n, int part, int gpus) { return part == gpus ? n : part * (n / gpus); }

    std::string part_name(const char* base, int part) const {
        return gpus_ == 1 ? std::string(base) : std::string(base) + std::to_string(part);
    }

    std::vector<kit::ArraySpec> arrays(const kit::Case& c) const override {
        const long long n = c.get("n");
        std::vector<kit::ArraySpec> a;
        kit::Fill custom{kit::Fill::custom};
        for (int p = 0; p < gpus_; ++p) {
            size_t count = (size_t)(first_plane(n, p + 1, gpus_) - first_plane(n, p, gpus_)) * n * n;
            a.push_back({part_name("u", p), kit::DType::f64, count, kit::Role::inout, custom, p});
            a.push_back({part_name("u_old", p), kit::DType::f64, count, kit::Role::scratch, custom, p});
            a.push_back({part_name("f", p), kit::DType::f64, count, kit::Role::in, custom, p});
        }
        a.push_back({"sweeps", kit::DType::f64, 1, kit::Role::out});
        return a;
    }

    // Which part an array is, and whether it is the source.
    void locate(const std::string& name, int& part, bool& source) const {
        source = name[0] == 'f';
        part = gpus_ == 1 ? 0 : name.back() - '0';
    }

    void fill_custom(const kit::Case& c, uint64_t seed, size_t index, kit::Arrays& a, bool device) const override {
        const kit::ArraySpec& s = a.specs[index];
        const long long n = c.get("n");
        const double noise = c.real("noise");
        int part;
        bool source;
        locate(s.name, part, source);
        const long long plane0 = first_plane(n, part, gpus_);
        double* x = static_cast<double*>(a.ptrs[index]);
        if (device) {
            unsigned blocks = (unsigned)std::min<long long>(((long long)s.count + 255) / 256, 65535);
            jacobi_fill_kernel<<<blocks, 256>>>(x, n, plane0, (long long)s.count, source, noise, seed);
            CUDA_CHECK(cudaGetLastError());
            return;
        }
        const long long nn = n * n;
        for (long long q = 0; q < (long long)s.count; ++q) {
            long long i = plane0 + q / nn, j = q % nn / n, k = q % n;
            x[q] = source ? jacobi_source(n, i, j, k) : jacobi_start(n, i, j, k, c.real("noise"), seed);
        }
    }

    std::string protected_key(const kit::Case& c) const override { return "n=" + std::to_string(c.get("n")); }

    bool is_protected(const kit::Case& c, const std::string& array, size_t index) const override {
        if (array == "sweeps") return false;
        const long long n = c.get("n");
        int part;
        bool source;
        locate(array, part, source);
        long long q = (long long)index + first_plane(n, part, gpus_) * n * n;
        return jacobi_is_wall(n, q / (n * n), q % (n * n) / n, q % n);
    }

#ifndef KIT_RUNNER
    // The sequential loop, on the whole field gathered from the parts.
    void reference_cpu(const kit::Case& c, kit::Arrays& h) const override {
        const long long n = c.get("n"), nn = n * n;
        std::vector<double> u(nn * n), u_old(nn * n), f(nn * n);
        for (int p = 0; p < gpus_; ++p) {
            long long off = first_plane(n, p, gpus_) * nn, count = first_plane(n, p + 1, gpus_) * nn - off;
            std::copy(h.f64(part_name("u", p)), h.f64(part_name("u", p)) + count, u.begin() + off);
            std::copy(h.f64(part_name("f", p)), h.f64(part_name("f", p)) + count, f.begin() + off);
        }
        norms_.clear();
        int sweeps = jacobi_sequential((int)n, (int)c.get("max_iter"), c.real("tol"), u.data(), u_old.data(), f.data(), &norms_);
        for (int p = 0; p < gpus_; ++p) {
            long long off = first_plane(n, p, gpus_) * nn, count = first_plane(n, p + 1, gpus_) * nn - off;
            std::copy(u.begin() + off, u.begin() + off + count, h.f64(part_name("u", p)));
        }
        *h.f64("sweeps") = sweeps;
    }

    // The plain sweep on every GPU, each over its own planes, reading its neighbours' planes
    // through peer access; the norm, where tol > 0, summed on the host after every sweep.
    void reference_library(const kit::Case& c, kit::Arrays& d, size_t) const override {
        const long long n = c.get("n"), nn = n * n;
        const int max_iter = (int)c.get("max_iter");
        const double tol = c.real("tol"), h = 2.0 / (n - 1);
        enable_peer_access(gpus_);
        auto planes = [&](const char* base) {
            long long split = gpus_ == 1 ? n : first_plane(n, 1, gpus_);
            return Planes{d.f64(part_name(base, 0)), d.f64(part_name(base, gpus_ - 1)), split, nn};
        };
        Planes u = planes("u"), uo = planes("u_old"), f = planes("f");
        double* norm2[2] = {kit_norm_buffer(0), gpus_ > 1 ? kit_norm_buffer(1) : nullptr};
        int sweeps = 0;
        norms_.clear();
        Planes cur = u, next = uo;  // the field is in cur; a sweep writes next, then they swap
        while (sweeps < max_iter) {
            for (int p = 0; p < gpus_; ++p) {
                long long i0 = std::max(1LL, first_plane(n, p, gpus_)), i1 = std::min(n - 1, first_plane(n, p + 1, gpus_));
                CUDA_CHECK(cudaSetDevice(p));
                if (tol > 0) CUDA_CHECK(cudaMemsetAsync(norm2[p], 0, sizeof(double)));
                if (i1 > i0 && n > 2) {
                    dim3 block(32, 8), grid((unsigned)((n - 2 + 31) / 32), (unsigned)((n - 2 + 7) / 8), (unsigned)(i1 - i0));
                    jacobi_plain_sweep<<<grid, block>>>(n, i0, next, cur, f, h * h, tol > 0 ? norm2[p] : nullptr);
                    CUDA_CHECK(cudaGetLastError());
                }
            }
            // Each GPU's next sweep reads the other's planes at the cut, and the norm is read now:
            // wait for both. One GPU without a norm needs no wait (its stream keeps the order).
            if (gpus_ > 1 || tol > 0)
                for (int p = gpus_ - 1; p >= 0; --p) {  // ends on GPU 0
                    CUDA_CHECK(cudaSetDevice(p));
                    CUDA_CHECK(cudaDeviceSynchronize());
                }
            std::swap(cur, next);
            ++sweeps;
            if (tol > 0) {
                double total = 0, part;
                for (int p = 0; p < gpus_; ++p) {
                    CUDA_CHECK(cudaMemcpy(&part, norm2[p], sizeof(double), cudaMemcpyDeviceToHost));
                    total += part;
                }
                norms_.push_back(std::sqrt(total));
                if (norms_.back() < tol) break;
            }
        }
        if (cur.lo != u.lo)  // an odd number of sweeps: the field is in u_old
            for (int p = 0; p < gpus_; ++p) {
                long long count = (first_plane(n, p + 1, gpus_) - first_plane(n, p, gpus_)) * nn;
                CUDA_CHECK(cudaMemcpy(d.f64(part_name("u", p)), d.f64(part_name("u_old", p)), count * sizeof(double),
                                      cudaMemcpyDeviceToDevice));
            }
        double s = sweeps;
        CUDA_CHECK(cudaMemcpy(d.f64("sweeps"), &s, sizeof s, cudaMemcpyHostToDevice));
    }
    std::vector<std::string> libraries() const override {
        return {gpus_ == 1 ? "plain kernel (one thread per point)" : "plain kernel on two GPUs (peer access)"};
    }

    // With tol > 0 the count must be the truth's, or one off where the norm at the sweep that
    // decides it is within rounding of tol; the field is then checked against that many sweeps.
    bool retarget(const kit::Case& c, const kit::Arrays& expected, const std::map<std::string, double>& got,
                  kit::Case& redo) const override {
        const double tol = c.real("tol");
        auto it = got.find("sweeps");
        if (tol <= 0 || it == got.end()) return false;
        const long long want = (long long)*expected.f64("sweeps"), max_iter = c.get("max_iter");
        const double have = it->second;
        auto near = [&](long long k) {
            return k >= 1 && k <= (long long)norms_.size() && jacobi_norm_within_rounding(norms_[k - 1], tol, c.get("n"));
        };
        bool one_more = have == want + 1 && want + 1 <= max_iter && near(want);
        bool one_less = have == want - 1 && near(want - 1);
        if (!one_more && !one_less) return false;
        redo = c;
        redo.params["tol"] = 0;
        redo.params["max_iter"] = have;
        return true;
    }
#endif

private:
    // One double per GPU for the norm, kept for the life of the process.
    static double* kit_norm_buffer(int device) {
        static double* buf[2] = {};
        if (!buf[device]) {
            CUDA_CHECK(cudaSetDevice(device));
            CUDA_CHECK(cudaMalloc(&buf[device], sizeof(double)));
            CUDA_CHECK(cudaSetDevice(0));
        }
        return buf[device];
    }

    int gpus_;
    mutable std::vector<double> norms_;  // the truth's norm after each sweep, for retarget()
};

}  // namespace
