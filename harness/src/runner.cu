// runner.cu: the process that holds the student's code.
//
//   runner PLAN DUMP_DIR RESULTS
//
// For every case of PLAN: fresh inputs from the case's seed, outputs poisoned, the student's entry
// point called, the device drained and its errors classified, the outputs written to DUMP_DIR for
// the checker. Timed cases run warm-up calls, then timed calls on fresh inputs each, and hand over
// a probe of every timed run's output and the last run's output in full.
//
// RESULTS receives JSON lines (kit.cuh: JsonLines); the exit code says how it ended (kit::ExitCode).
// Nothing here decides correctness: that is the checker's job, in a process without student code.
#include <cstring>

#include "kit.cuh"

namespace {

using namespace kit;

// Errors that mean a launch was refused whatever reported them.
bool is_launch_error(cudaError_t e) {
    switch (e) {
    case cudaErrorInvalidConfiguration:
    case cudaErrorLaunchOutOfResources:
    case cudaErrorInvalidDeviceFunction:
    case cudaErrorNoKernelImageForDevice:
    case cudaErrorInvalidKernelImage:
    case cudaErrorCooperativeLaunchTooLarge:
    case cudaErrorMissingConfiguration: return true;
    default: return false;
    }
}

[[noreturn]] void report_fault(JsonLines& out, const Case& c, DeviceFault f) {
    cudaError_t err = f.err;
    bool launch = f.rejected || is_launch_error(err);
    out.begin()
        .field("event", launch ? "launch_error" : "runtime_error")
        .field("case", c.id)
        .field("cuda_error", cudaGetErrorName(err))
        .field("message", cudaGetErrorString(err))
        .end();
    std::exit(launch ? kExitLaunchError : kExitRuntimeError);
}

void write_file(const std::string& path, const void* data, size_t bytes) {
    FILE* f = std::fopen(path.c_str(), "wb");
    if (!f || std::fwrite(data, 1, bytes, f) != bytes || std::fclose(f) != 0) {
        std::fprintf(stderr, "runner: cannot write %s\n", path.c_str());
        std::exit(kExitHarnessError);
    }
}

// Hands the outputs of one call over to the checker: the whole array, or the probe positions.
void dump_outputs(const std::string& dir, const Case& c, int run, uint64_t seed, const Arrays& dev) {
    for (size_t a = 0; a < dev.specs.size(); ++a) {
        const ArraySpec& s = dev.specs[a];
        if (!is_output(s)) continue;
        std::vector<size_t> positions = handed_over(c, run, seed, s.count);
        std::vector<unsigned char> host((positions.empty() ? s.count : positions.size()) * dtype_size(s.dtype));
        copy_to_host(s, dev.ptrs[a], positions, host.data());
        write_file(dump_path(dir, c, run, s.name), host.data(), host.size());
    }
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 4) {
        std::fprintf(stderr, "usage: %s PLAN DUMP_DIR RESULTS\n", argv[0]);
        return kExitUsage;
    }
    const std::string plan = argv[1], dir = argv[2];
    std::vector<Case> cases;
    try {
        cases = read_plan(plan);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "runner: %s\n", e.what());
        return kExitUsage;
    }
    JsonLines out(argv[3]);
    require_gpu();
    Problem& p = problem();

    for (const Case& c : cases) {
        out.begin().field("event", "start").field("case", c.id).end();
        DeviceArrays dev(p.arrays(c));
        try {
            if (!c.timed) {
                fill_inputs_device(c, c.seed, dev);
                poison_outputs_device(dev);
                CUDA_CHECK(cudaDeviceSynchronize());
                double t0 = now_ms();
                p.run_submission(c, dev);
                if (DeviceFault f = settle()) throw f;
                double ms = now_ms() - t0;
                dump_outputs(dir, c, 0, c.seed, dev);
                out.begin().field("event", "done").field("case", c.id).field("ms", ms).end();
            } else {
                auto prepare = [&](int r) {
                    fill_inputs_device(c, run_seed(c.seed, r), dev);
                    poison_outputs_device(dev);
                };
                auto body = [&] { p.run_submission(c, dev); };
                auto after = [&](int r) { dump_outputs(dir, c, r, run_seed(c.seed, r), dev); };
                std::vector<double> ms = time_runs(c.warmup, c.runs, prepare, body, after);
                out.begin().field("event", "timed").field("case", c.id).field("times_ms", ms).end();
            }
        } catch (const DeviceFault& f) {
            report_fault(out, c, f);
        }
    }
    return kExitOk;
}
