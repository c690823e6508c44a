// truth.h: the judge's verdict on what one call left in its outputs (checker side only).
#pragma once

#include <memory>

#include "check.h"

namespace kit {

// What a call left, as the judge took it in hand: for every array of the case, the positions read
// (empty: the whole array) and the values read there; both empty for arrays that are not outputs.
// Whole outputs of GPU arrays stay on the GPU instead: `on_device` holds the judge's copy of each
// (pure inputs get no storage), and `got` is empty.
struct Outputs {
    Positions positions;
    std::vector<std::vector<unsigned char>> got;
    std::shared_ptr<DeviceArrays> on_device;
};

// `specs` with storage only for the arrays `keep` selects (the others get a count of 0).
std::vector<ArraySpec> only(std::vector<ArraySpec> specs, bool (*keep)(const ArraySpec&));

// Copies, on their GPUs, every array of `from` that `to` has storage for, and waits until it is done.
void copy_on_device(const Arrays& from, const Arrays& to);

// Recomputes the truth of case `c` from `seed` (its CPU loop, or its library route on the GPU) and
// writes one "check" record per output array of run `run`. A library truth of outputs on the GPU is
// compared there: at jacobi's graded size that saves copying three gigabytes to the host per check.
void check_outputs(const Problem& p, const Case& c, int run, uint64_t seed, const Outputs& o, JsonLines& out);

}  // namespace kit
