// check.cu: comparing an output with the truth (see check.h).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "check.h"

namespace kit {

namespace {

// A comparison in progress: the counts and the worst element, and the two sums the relative error
// is made of. One per chunk of the array, added up in chunk order.
struct Tally {
    Comparison c;
    double err2 = 0, ref2 = 0, worst = -1;

    // Ties keep the earlier element, as one pass over the whole array would.
    void add(const Tally& t) {
        c.compared += t.c.compared;
        c.nonfinite += t.c.nonfinite;
        c.unwritten += t.c.unwritten;
        c.protected_count += t.c.protected_count;
        c.protected_changed += t.c.protected_changed;
        err2 += t.err2;
        ref2 += t.ref2;
        if (t.worst > worst) {
            worst = t.worst;
            c.worst_index = t.c.worst_index;
            c.worst_got = t.c.worst_got;
            c.worst_want = t.c.worst_want;
        }
    }
};

// The verdict on a whole tally.
Comparison finish(Tally& total, double tol) {
    Comparison& c = total.c;
    c.rel_error = total.ref2 > 0 ? std::sqrt(total.err2 / total.ref2) : std::sqrt(total.err2);
    c.pass = c.nonfinite == 0 && c.unwritten == 0 && c.protected_changed == 0 && c.rel_error <= tol;
    return c;
}

// Elements [begin, end) of the compared ones.
template <class T, class Bits>
Tally compare_range(const ArraySpec& spec, const T* input, const T* want, const T* got,
                    const std::vector<size_t>& positions, size_t begin, size_t end,
                    const std::function<bool(size_t)>& is_protected, Bits poison) {
    Tally t;
    Comparison& c = t.c;
    for (size_t j = begin; j < end; ++j) {
        size_t i = positions.empty() ? j : positions[j];
        T g = got[j], w = want[j], in = input[j];
        Bits gb, wb, ib;
        std::memcpy(&gb, &g, sizeof g);
        std::memcpy(&wb, &w, sizeof w);
        std::memcpy(&ib, &in, sizeof in);
        ++c.compared;
        if (is_protected(i)) {
            ++c.protected_count;
            if (gb != ib) ++c.protected_changed;
            continue;
        }
        bool still_poison = spec.role == Role::out && gb == poison;
        bool still_input = spec.role == Role::inout && gb == ib && wb != ib;
        if (still_poison || still_input) {
            ++c.unwritten;
            continue;
        }
        if (!std::isfinite((double)g) && std::isfinite((double)w)) {
            ++c.nonfinite;
            continue;
        }
        double d = (double)g - (double)w;
        t.err2 += d * d;
        t.ref2 += (double)w * (double)w;
        if (std::fabs(d) > t.worst) {
            t.worst = std::fabs(d);
            c.worst_index = (long long)i;
            c.worst_got = g;
            c.worst_want = w;
        }
    }
    return t;
}

// A large array on the host is compared in parallel (on 16 cores a 512^3 field took 0.1 s, not 1 s):
// fixed chunks, added up in chunk order, so the result does not depend on the number of threads.
template <class T, class Bits>
Comparison compare_typed(const ArraySpec& spec, const T* input, const T* want, const T* got,
                         const std::vector<size_t>& positions, double tol,
                         const std::function<bool(size_t)>& is_protected, Bits poison) {
    const size_t count = positions.empty() ? spec.count : positions.size();
    constexpr size_t kChunk = 1 << 20;
    const long long chunks = (long long)((count + kChunk - 1) / kChunk);
    std::vector<Tally> part(chunks);
#pragma omp parallel for schedule(dynamic, 1) if (chunks > 1)
    for (long long k = 0; k < chunks; ++k)
        part[k] = compare_range(spec, input, want, got, positions, (size_t)k * kChunk,
                                std::min(count, (size_t)(k + 1) * kChunk), is_protected, poison);
    Tally total;
    for (const Tally& t : part) total.add(t);
    return finish(total, tol);
}

// ---------------------------------------------------------------------------------------------
// On the GPU: the same rules, one block per stretch of kDeviceStretch elements.

// A block's tally, plain numbers only (it is copied back to the host).
struct DeviceTally {
    unsigned long long compared, nonfinite, unwritten, protected_count, protected_changed;
    double err2, ref2, worst;
    long long worst_index;
    double worst_got, worst_want;
};

constexpr int kDeviceThreads = 256;
constexpr size_t kDeviceStretch = size_t(1) << 16;

// `b` into `a`; of two equal worst errors the lower index wins, as in one pass in index order.
__device__ void merge(DeviceTally& a, const DeviceTally& b) {
    a.compared += b.compared;
    a.nonfinite += b.nonfinite;
    a.unwritten += b.unwritten;
    a.protected_count += b.protected_count;
    a.protected_changed += b.protected_changed;
    a.err2 += b.err2;
    a.ref2 += b.ref2;
    if (b.worst > a.worst || (b.worst == a.worst && b.worst >= 0 && b.worst_index < a.worst_index)) {
        a.worst = b.worst;
        a.worst_index = b.worst_index;
        a.worst_got = b.worst_got;
        a.worst_want = b.worst_want;
    }
}

template <class T, class Bits>
__global__ void compare_kernel(Role role, size_t count, const T* input, const T* want, const T* got,
                               const uint32_t* protected_bits, Bits poison, DeviceTally* out) {
    __shared__ DeviceTally part[kDeviceThreads];
    DeviceTally t{0, 0, 0, 0, 0, 0.0, 0.0, -1.0, -1, 0.0, 0.0};
    const size_t begin = blockIdx.x * kDeviceStretch, end = count - begin < kDeviceStretch ? count : begin + kDeviceStretch;
    for (size_t i = begin + threadIdx.x; i < end; i += kDeviceThreads) {
        T g = got[i], w = want[i], in = input ? input[i] : T(0);
        Bits gb, wb, ib;
        memcpy(&gb, &g, sizeof g);
        memcpy(&wb, &w, sizeof w);
        memcpy(&ib, &in, sizeof in);
        ++t.compared;
        if (protected_bits && (protected_bits[i / 32] >> (i % 32) & 1u)) {
            ++t.protected_count;
            if (gb != ib) ++t.protected_changed;
            continue;
        }
        bool still_poison = role == Role::out && gb == poison;
        bool still_input = role == Role::inout && gb == ib && wb != ib;
        if (still_poison || still_input) {
            ++t.unwritten;
            continue;
        }
        if (!isfinite((double)g) && isfinite((double)w)) {
            ++t.nonfinite;
            continue;
        }
        double d = (double)g - (double)w;
        t.err2 += d * d;
        t.ref2 += (double)w * (double)w;
        if (fabs(d) > t.worst) {  // a thread's elements come in index order: the first of equals stays
            t.worst = fabs(d);
            t.worst_index = (long long)i;
            t.worst_got = g;
            t.worst_want = w;
        }
    }
    part[threadIdx.x] = t;
    __syncthreads();
    for (int half = kDeviceThreads / 2; half > 0; half /= 2) {
        if (threadIdx.x < half) merge(part[threadIdx.x], part[threadIdx.x + half]);
        __syncthreads();
    }
    if (threadIdx.x == 0) out[blockIdx.x] = part[0];
}

template <class T, class Bits>
Comparison compare_typed_device(const ArraySpec& spec, const T* input, const T* want, const T* got, double tol,
                                const uint32_t* protected_bits, Bits poison) {
    const size_t blocks = (spec.count + kDeviceStretch - 1) / kDeviceStretch;
    Tally total;
    if (blocks == 0) {
        Comparison& c = total.c;
        c.pass = true;
        return c;
    }
    CUDA_CHECK(cudaSetDevice(spec.device));
    DeviceTally* parts = nullptr;
    CUDA_CHECK(cudaMalloc(&parts, blocks * sizeof(DeviceTally)));
    compare_kernel<<<(unsigned)blocks, kDeviceThreads>>>(spec.role, spec.count, input, want, got, protected_bits,
                                                         poison, parts);
    CUDA_CHECK(cudaGetLastError());
    std::vector<DeviceTally> host(blocks);
    CUDA_CHECK(cudaMemcpy(host.data(), parts, blocks * sizeof(DeviceTally), cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaFree(parts));
    CUDA_CHECK(cudaSetDevice(0));
    for (const DeviceTally& d : host) {
        Tally t;
        t.c.compared = d.compared;
        t.c.nonfinite = d.nonfinite;
        t.c.unwritten = d.unwritten;
        t.c.protected_count = d.protected_count;
        t.c.protected_changed = d.protected_changed;
        t.err2 = d.err2;
        t.ref2 = d.ref2;
        t.worst = d.worst;
        t.c.worst_index = d.worst_index;
        t.c.worst_got = d.worst_got;
        t.c.worst_want = d.worst_want;
        total.add(t);  // in array order: of equal worst errors the earlier block's stays
    }
    return finish(total, tol);
}

}  // namespace

Comparison compare_array(const ArraySpec& spec, const void* input, const void* want, const void* got,
                         const std::vector<size_t>& positions, double tol,
                         const std::function<bool(size_t)>& is_protected) {
    if (spec.dtype == DType::f64)
        return compare_typed(spec, (const double*)input, (const double*)want, (const double*)got, positions, tol,
                             is_protected, kPoison64);
    return compare_typed(spec, (const float*)input, (const float*)want, (const float*)got, positions, tol,
                         is_protected, kPoison32);
}

Comparison compare_array_device(const ArraySpec& spec, const void* input, const void* want, const void* got,
                                double tol, const uint32_t* protected_bits) {
    if (spec.dtype == DType::f64)
        return compare_typed_device(spec, (const double*)input, (const double*)want, (const double*)got, tol,
                                    protected_bits, kPoison64);
    return compare_typed_device(spec, (const float*)input, (const float*)want, (const float*)got, tol,
                                protected_bits, kPoison32);
}

ProtectedMask::ProtectedMask(const ArraySpec& spec, const std::function<bool(size_t)>& is_protected) {
    const long long words = (long long)((spec.count + 31) / 32);
    std::vector<uint32_t> host(words);
    long long any = 0;
#pragma omp parallel for schedule(static) reduction(+ : any)
    for (long long w = 0; w < words; ++w) {
        uint32_t bits = 0;
        for (size_t b = 0; b < 32 && (size_t)w * 32 + b < spec.count; ++b)
            if (is_protected((size_t)w * 32 + b)) bits |= 1u << b;
        host[w] = bits;
        any += bits != 0;
    }
    if (!any) return;
    CUDA_CHECK(cudaSetDevice(spec.device));
    CUDA_CHECK(cudaMalloc(&bits_, words * sizeof(uint32_t)));
    CUDA_CHECK(cudaMemcpy(bits_, host.data(), words * sizeof(uint32_t), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaSetDevice(0));
}

ProtectedMask::~ProtectedMask() {
    if (bits_) cudaFree(bits_);
}

void write_comparison(JsonLines& out, const Comparison& c) {
    out.field("pass", c.pass)
        .field("compared", (long long)c.compared)
        .field("nonfinite", (long long)c.nonfinite)
        .field("unwritten", (long long)c.unwritten)
        .field("protected", (long long)c.protected_count)
        .field("protected_changed", (long long)c.protected_changed)
        .field("rel_error", c.rel_error)
        .field("worst_index", c.worst_index)
        .field("worst_got", c.worst_got)
        .field("worst_want", c.worst_want);
}

}  // namespace kit
