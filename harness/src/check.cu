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

// A whole gigabyte array is compared in parallel (on 16 cores a 512^3 field takes 0.1 s, not 1 s):
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
    Comparison& c = total.c;
    c.rel_error = total.ref2 > 0 ? std::sqrt(total.err2 / total.ref2) : std::sqrt(total.err2);
    c.pass = c.nonfinite == 0 && c.unwritten == 0 && c.protected_changed == 0 && c.rel_error <= tol;
    return c;
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
