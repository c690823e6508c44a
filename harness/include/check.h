// check.h: comparing an output with the truth (used by the checker, tested on the host).
#pragma once

#include <functional>

#include "kit.cuh"

namespace kit {

// What one output array looks like next to the truth. Plain numbers: the grader words them.
struct Comparison {
    size_t compared = 0;           // elements compared (all of them, or the probe positions)
    size_t nonfinite = 0;          // NaN or infinite where the truth is finite (never passes)
    size_t unwritten = 0;          // still the poison, or still the input where the value had to change
    size_t protected_count = 0;    // compared elements that must keep their input value
    size_t protected_changed = 0;  // ... and did not
    double rel_error = 0;          // ||got - want|| / ||want|| over the finite, unprotected elements
    long long worst_index = -1;    // element with the largest absolute error (position in the array)
    double worst_got = 0, worst_want = 0;
    bool pass = false;
};

// `input`, `want`, `got`: the array before the call, the truth after it and what the code under test
// left, all three either whole or, when `positions` is not empty, only the values at those positions
// in that order (a probe of a timed run: the truth of a gigabyte array is then never copied whole).
Comparison compare_array(const ArraySpec& spec, const void* input, const void* want, const void* got,
                         const std::vector<size_t>& positions, double tol,
                         const std::function<bool(size_t)>& is_protected);

// The same comparison for whole arrays on the GPU that holds them (spec.device), done there: the
// checker never copies a gigabyte output to the host. `input` may be null for a pure output; the
// protected elements are the set bits of `protected_bits` (device memory; null: none). Each block
// adds up a fixed stretch of the array in a fixed order and the host adds the blocks in array order,
// so a result never depends on timing; its relative error may differ from compare_array's in the
// last bits (another order of the same sums).
Comparison compare_array_device(const ArraySpec& spec, const void* input, const void* want, const void* got,
                                double tol, const uint32_t* protected_bits);

// The elements `is_protected` marks, as a bit mask on the GPU of `spec` (bit i % 32 of word i / 32),
// gathered once per case on every core; null where nothing is protected.
class ProtectedMask {
public:
    ProtectedMask(const ArraySpec& spec, const std::function<bool(size_t)>& is_protected);
    ~ProtectedMask();
    ProtectedMask(const ProtectedMask&) = delete;
    ProtectedMask& operator=(const ProtectedMask&) = delete;
    const uint32_t* bits() const { return bits_; }

private:
    uint32_t* bits_ = nullptr;
};

void write_comparison(JsonLines& out, const Comparison& c);

}  // namespace kit
