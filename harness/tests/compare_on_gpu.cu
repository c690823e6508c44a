// compare_on_gpu: the checker's comparison of whole outputs on the GPU next to the one on the host,
// on arrays made to trip every rule. For each scenario it prints two JSON lines, "side": "host" and
// "side": "device", with the same fields as a check record; grader/tests/test_gpu_compare.py
// asserts that they agree. Needs a GPU.
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "check.h"

using namespace kit;

namespace {

// Over four of the host's chunks and many of the GPU's blocks, with a partial block at the end.
const size_t kCount = (size_t(1) << 22) + 12345;

template <class T>
void* to_device(const std::vector<T>& v) {
    void* p = nullptr;
    CUDA_CHECK(cudaMalloc(&p, v.size() * sizeof(T)));
    CUDA_CHECK(cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
    return p;
}

template <class T>
void both_sides(JsonLines& out, const std::string& scenario, const ArraySpec& s, const std::vector<T>& in,
                const std::vector<T>& want, const std::vector<T>& got, double tol,
                const std::function<bool(size_t)>& is_protected) {
    Comparison host = compare_array(s, in.data(), want.data(), got.data(), {}, tol, is_protected);
    out.begin().field("scenario", scenario).field("side", "host");
    write_comparison(out, host);
    out.end();
    void *din = s.role == Role::inout ? to_device(in) : nullptr, *dwant = to_device(want), *dgot = to_device(got);
    ProtectedMask mask(s, is_protected);
    Comparison device = compare_array_device(s, din, dwant, dgot, tol, mask.bits());
    out.begin().field("scenario", scenario).field("side", "device");
    write_comparison(out, device);
    out.end();
    for (void* p : {din, dwant, dgot})
        if (p) CUDA_CHECK(cudaFree(p));
}

// An FP64 field updated in place whose first and last 1000 elements are walls: errors of one size
// in several blocks and threads (the first in index order must be reported), elements left as
// their input, a NaN, a changed wall.
void field_in_place(JsonLines& out) {
    const size_t n = kCount;
    ArraySpec s{"u", DType::f64, n, Role::inout};
    std::vector<double> in(n), want(n), got(n);
    for (size_t i = 0; i < n; ++i) {
        in[i] = 1.0 + (double)(i % 97) / 97;
        want[i] = got[i] = 2.0 + std::sin((double)i);
    }
    auto walls = [n](size_t i) { return i < 1000 || i >= n - 1000; };
    for (size_t i = 0; i < n; ++i)
        if (walls(i)) want[i] = got[i] = in[i];
    both_sides(out, "equal", s, in, want, got, 1e-10, walls);
    // The same error (exactly 0.5) late in the array, in the second block from a later thread, from
    // an earlier one (the first in index order: this is the worst) and from that thread again, later.
    const size_t late = (size_t(3) << 20) + 5, later_thread = (1 << 16) + 300, first = (1 << 16) + 44,
                 same_thread = first + 256;
    for (size_t i : {late, later_thread, first, same_thread}) {
        want[i] = 2.0;
        got[i] = 2.5;
    }
    got[first] = 1.5;
    got[777777] += 1e-9;
    both_sides(out, "errors of one size", s, in, want, got, 1e-6, walls);
    got[(2 << 20) + 1] = got[2 << 20] = in[2 << 20] = in[(2 << 20) + 1];  // left as the input
    got[12345] = std::numeric_limits<double>::quiet_NaN();
    got[n - 1] = std::nextafter(got[n - 1], 1e300);  // a wall changed by one ulp
    both_sides(out, "unwritten, nan and a wall", s, in, want, got, 1e-3, walls);
}

// An FP32 output, nothing protected: the poison left in places, an infinity, and a truth that is
// NaN where the output is NaN too.
void pure_output(JsonLines& out) {
    const size_t n = kCount;
    ArraySpec s{"P", DType::f32, n, Role::out};
    float poison;
    std::memcpy(&poison, &kPoison32, 4);
    std::vector<float> in(n, 0.0f), want(n), got(n);
    for (size_t i = 0; i < n; ++i) want[i] = got[i] = (float)std::cos((double)i) * 3.0f;
    auto nothing = [](size_t) { return false; };
    got[5] *= 1.0001f;
    both_sides(out, "within tolerance", s, in, want, got, 1e-3, nothing);
    for (size_t i = 100000; i < 100100; ++i) got[i] = poison;
    got[n - 2] = std::numeric_limits<float>::infinity();
    want[4000000] = got[4000000] = std::numeric_limits<float>::quiet_NaN();
    both_sides(out, "poison, infinity and a nan truth", s, in, want, got, 1e-3, nothing);
}

}  // namespace

int main() {
    require_gpu();
    JsonLines out(1);
    field_in_place(out);
    pure_output(out);
    return 0;
}
