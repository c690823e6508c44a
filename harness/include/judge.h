// judge.h: the trusted side of a grading run (checker side only; see judge.cu).
#pragma once

#include <string>
#include <vector>

#include "shared_arrays.h"

namespace kit {

struct JudgeOptions {
    std::string plan;         // the cases (public seeds only: the judge draws the secret ones)
    int socket = -1;          // connected to the runner (wire.h)
    int results = -1;         // where the results go (a pipe only the grader reads)
    Memory memory = Memory::device;
    bool baseline = false;    // the runner is the library server: time its routes, compare nothing
    std::string route;        // with baseline: time only the route of this name (empty: every route)
    bool fixed_secret = false;
    uint64_t secret = 0;      // with fixed_secret: every draw derives from it (reproducible runs)
    bool record_seeds = false;  // write the seeds drawn into the results (the kit's own tests)
    std::vector<std::string> forbidden;  // library file names (prefixes) the runner must not map
    std::vector<int> cpus;    // where the judging thread times each run (none: where it is); the runner has others
};

int judge(const JudgeOptions& opts);

}  // namespace kit
