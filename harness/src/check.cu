// check.cu: comparing an output with the truth (see check.h).
#include <cmath>
#include <cstring>

#include "check.h"

namespace kit {

namespace {

template <class T, class Bits>
Comparison compare_typed(const ArraySpec& spec, const T* input, const T* want, const T* got,
                         const std::vector<size_t>& positions, double tol,
                         const std::function<bool(size_t)>& is_protected, Bits poison) {
    Comparison c;
    double err2 = 0, ref2 = 0, worst = -1;
    size_t count = positions.empty() ? spec.count : positions.size();
    for (size_t j = 0; j < count; ++j) {
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
        err2 += d * d;
        ref2 += (double)w * (double)w;
        if (std::fabs(d) > worst) {
            worst = std::fabs(d);
            c.worst_index = (long long)i;
            c.worst_got = g;
            c.worst_want = w;
        }
    }
    c.rel_error = ref2 > 0 ? std::sqrt(err2 / ref2) : std::sqrt(err2);
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
