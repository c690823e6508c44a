// check.cu: comparing an output with the truth (see check.h).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "check.h"

namespace kit {

namespace {

// A comparison in progress: the counts, the two sums the relative error is made of, and the worst
// element. Plain numbers, so that the GPU's blocks hand theirs back as they are.
struct Tally {
    unsigned long long compared = 0, nonfinite = 0, unwritten = 0, protected_count = 0, protected_changed = 0;
    double err2 = 0, ref2 = 0, worst = -1;
    long long worst_index = -1;
    double worst_got = 0, worst_want = 0;

    // Element i, its output `g`, truth `w` and input `in`, by the rules of check.h: written once, for
    // the host's loop and the GPU's alike. Elements come in index order: the first of equals stays.
    template <class T, class Bits>
    __host__ __device__ void add(Role role, size_t i, T g, T w, T in, bool is_protected, Bits poison) {
        Bits gb, wb, ib;
        memcpy(&gb, &g, sizeof g);
        memcpy(&wb, &w, sizeof w);
        memcpy(&ib, &in, sizeof in);
        ++compared;
        if (is_protected) {
            ++protected_count;
            if (gb != ib) ++protected_changed;
            return;
        }
        bool still_poison = role == Role::out && gb == poison;
        bool still_input = role == Role::inout && gb == ib && wb != ib;
        if (still_poison || still_input) {
            ++unwritten;
            return;
        }
        if (!isfinite((double)g) && isfinite((double)w)) {
            ++nonfinite;
            return;
        }
        double d = (double)g - (double)w;
        err2 += d * d;
        ref2 += (double)w * (double)w;
        if (fabs(d) > worst) {
            worst = fabs(d);
            worst_index = (long long)i;
            worst_got = g;
            worst_want = w;
        }
    }

    // Another part of the array; of two equal worst errors the lower index wins, as in one pass in
    // index order.
    __host__ __device__ void add(const Tally& t) {
        compared += t.compared;
        nonfinite += t.nonfinite;
        unwritten += t.unwritten;
        protected_count += t.protected_count;
        protected_changed += t.protected_changed;
        err2 += t.err2;
        ref2 += t.ref2;
        if (t.worst > worst || (t.worst == worst && t.worst >= 0 && t.worst_index < worst_index)) {
            worst = t.worst;
            worst_index = t.worst_index;
            worst_got = t.worst_got;
            worst_want = t.worst_want;
        }
    }

    // The verdict on the whole array.
    Comparison finish(double tol) const {
        Comparison c;
        c.compared = compared;
        c.nonfinite = nonfinite;
        c.unwritten = unwritten;
        c.protected_count = protected_count;
        c.protected_changed = protected_changed;
        c.rel_error = ref2 > 0 ? std::sqrt(err2 / ref2) : std::sqrt(err2);
        c.worst_index = worst_index;
        c.worst_got = worst_got;
        c.worst_want = worst_want;
        c.pass = nonfinite == 0 && unwritten == 0 && protected_changed == 0 && c.rel_error <= tol;
        return c;
    }
};

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
        for (size_t j = (size_t)k * kChunk; j < std::min(count, (size_t)(k + 1) * kChunk); ++j) {
            size_t i = positions.empty() ? j : positions[j];
            part[k].add(spec.role, i, got[j], want[j], input[j], is_protected(i), poison);
        }
    Tally total;
    for (const Tally& t : part) total.add(t);
    return total.finish(tol);
}

// On the GPU: one block per stretch of kDeviceStretch elements, its threads' tallies added up in a
// fixed tree; the host adds the blocks in array order.
constexpr int kDeviceThreads = 256;
constexpr size_t kDeviceStretch = size_t(1) << 16;

template <class T, class Bits>
__global__ void compare_kernel(Role role, size_t count, const T* input, const T* want, const T* got,
                               const uint32_t* protected_bits, Bits poison, Tally* out) {
    __shared__ Tally part[kDeviceThreads];
    Tally t;
    const size_t begin = blockIdx.x * kDeviceStretch, end = count - begin < kDeviceStretch ? count : begin + kDeviceStretch;
    for (size_t i = begin + threadIdx.x; i < end; i += kDeviceThreads)
        t.add(role, i, got[i], want[i], input ? input[i] : T(0),
              protected_bits && (protected_bits[i / 32] >> (i % 32) & 1u), poison);
    part[threadIdx.x] = t;
    __syncthreads();
    for (int half = kDeviceThreads / 2; half > 0; half /= 2) {
        if (threadIdx.x < half) part[threadIdx.x].add(part[threadIdx.x + half]);
        __syncthreads();
    }
    if (threadIdx.x == 0) out[blockIdx.x] = part[0];
}

template <class T, class Bits>
Comparison compare_typed_device(const ArraySpec& spec, const T* input, const T* want, const T* got, double tol,
                                const uint32_t* protected_bits, Bits poison) {
    const size_t blocks = (spec.count + kDeviceStretch - 1) / kDeviceStretch;
    std::vector<Tally> part(blocks);
    if (blocks > 0) {
        CUDA_CHECK(cudaSetDevice(spec.device));
        Tally* parts = nullptr;
        CUDA_CHECK(cudaMalloc(&parts, blocks * sizeof(Tally)));
        compare_kernel<<<(unsigned)blocks, kDeviceThreads>>>(spec.role, spec.count, input, want, got, protected_bits,
                                                             poison, parts);
        CUDA_CHECK(cudaGetLastError());
        CUDA_CHECK(cudaMemcpy(part.data(), parts, blocks * sizeof(Tally), cudaMemcpyDeviceToHost));
        CUDA_CHECK(cudaFree(parts));
        CUDA_CHECK(cudaSetDevice(0));
    }
    Tally total;
    for (const Tally& t : part) total.add(t);
    return total.finish(tol);
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
