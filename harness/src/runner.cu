// runner.cu: the process that holds the student's code.
//
//   runner SOCKET_FD     serve the judge (wire.h): call the entry point when told to, nothing more
//   runner --alone PLAN  run each case of PLAN once on its own arrays (for compute-sanitizer and
//                        Nsight Compute, whose findings are the only thing read from such a run; the
//                        entry point's call is the NVTX range "submission", so that a profile can
//                        leave out the kit's own kernels that fill the inputs)
//
// The runner holds no clock, no seed, no results file and no say in which outputs are compared: the
// judge (checker.cu) fills the inputs, rings the doorbell, takes the outputs in hand itself and
// writes the results. The runner's exit code only says how it ended (kit::ExitCode).
#include <nvtx3/nvToolsExt.h>

#include <cstring>

#include "kit.cuh"
#include "serve.h"

namespace {

using namespace kit;

// Every case of the plan once, on inputs from its seed: a fault is reported on stderr and in the
// exit code, as for the judge.
int alone(const std::string& plan) {
    std::vector<Case> cases = read_plan(plan);
    require_gpu();
    Problem& p = problem();
    for (const Case& c : cases) {
        DeviceArrays dev(p.arrays(c));
        fill_inputs_device(c, c.seed, dev);
        poison_outputs_device(dev);
        CUDA_CHECK(cudaDeviceSynchronize());
        nvtxRangePushA("submission");
        p.run_submission(c, dev);
        nvtxRangePop();
        if (DeviceFault f = settle()) {
            std::fprintf(stderr, "runner: case %s: %s%s\n", c.id.c_str(), cudaGetErrorString(f.err),
                         driver_says().c_str());
            return is_launch_fault(f) ? kExitLaunchError : kExitRuntimeError;
        }
    }
    return kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
    try {
        if (argc == 3 && std::strcmp(argv[1], "--alone") == 0) return alone(argv[2]);
        if (argc == 2) {
            Problem& p = problem();
            return serve(std::atoi(argv[1]), [&](const Case& c, Arrays& a) { p.run_submission(c, a); });
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "runner: %s\n", e.what());
        return kExitUsage;
    }
    std::fprintf(stderr, "usage: %s SOCKET_FD | %s --alone PLAN\n", argv[0], argv[0]);
    return kExitUsage;
}
