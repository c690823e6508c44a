// truth.h: the judge's verdict on what one call left in its outputs (checker side only).
#pragma once

#include "check.h"

namespace kit {

// What a call left, as the judge took it in hand: for every array of the case, the positions read
// (empty: the whole array) and the values read there; both empty for arrays that are not outputs.
struct Outputs {
    Positions positions;
    std::vector<std::vector<unsigned char>> got;
};

// Recomputes the truth of case `c` from `seed` (its CPU loop, or its library route on the GPU) and
// writes one "check" record per output array of run `run`.
void check_outputs(const Problem& p, const Case& c, int run, uint64_t seed, const Outputs& o, JsonLines& out);

}  // namespace kit
