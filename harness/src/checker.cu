// checker.cu: decides correctness, in a process that holds no student code.
//
//   checker check    PLAN DUMP_DIR RESULTS   compare the runner's outputs with the truth
//   checker baseline PLAN RESULTS            time the library on the plan's timed cases
//
// For every case (and every timed run) it regenerates the inputs from the seed, computes the truth
// with the problem's CPU loop or its library call, and compares with what the runner handed over:
// relative error ||out - ref|| / ||ref|| against the case's tolerance; NaN never passes; elements
// still holding the poison (or, for in-place outputs, still holding their input) were never
// written; elements the problem protects must equal their input bit for bit.
#include <cmath>
#include <cstring>
#include <map>

#include "check.h"

namespace {

using namespace kit;

std::vector<unsigned char> read_file(const std::string& path, bool& ok) {
    std::vector<unsigned char> data;
    FILE* f = std::fopen(path.c_str(), "rb");
    ok = f != nullptr;
    if (!f) return data;
    // One read of the whole file: a full dump can be a gigabyte.
    if (std::fseek(f, 0, SEEK_END) == 0) {
        long size = std::ftell(f);
        std::rewind(f);
        if (size > 0) {
            data.resize((size_t)size);
            data.resize(std::fread(data.data(), 1, data.size(), f));
        }
    } else {
        ok = false;
    }
    std::fclose(f);
    return data;
}

// For every array of a case: the positions compared (empty: the whole array).
using Positions = std::vector<std::vector<size_t>>;

// Keeps only the elements at `positions` of host array i, in that order.
void keep_positions(HostArrays& h, size_t i, const std::vector<size_t>& positions) {
    const size_t esize = dtype_size(h.specs[i].dtype);
    std::vector<unsigned char> kept(positions.size() * esize);
    for (size_t j = 0; j < positions.size(); ++j)
        std::memcpy(&kept[j * esize], &h.storage[i][positions[j] * esize], esize);
    h.storage[i] = std::move(kept);
    h.ptrs[i] = h.storage[i].data();
}

// The truth for one call, with the inputs it started from, both on the host: for every output the
// whole array, or only the elements at its positions (a probe of a timed run).
struct Truth {
    std::unique_ptr<HostArrays> inputs, expected;
};

Truth compute_truth(const Problem& p, const Case& c, uint64_t seed, const Positions& positions) {
    const auto specs = p.arrays(c);
    if (c.reference == "cpu") {
        Truth t{std::make_unique<HostArrays>(specs), std::make_unique<HostArrays>(specs)};
        fill_inputs_host(c, seed, *t.inputs);
        t.expected->storage = t.inputs->storage;
        for (size_t i = 0; i < specs.size(); ++i) t.expected->ptrs[i] = t.expected->storage[i].data();
        p.reference_cpu(c, *t.expected);
        for (size_t i = 0; i < specs.size(); ++i)
            if (is_output(specs[i]) && !positions[i].empty()) {
                keep_positions(*t.inputs, i, positions[i]);
                keep_positions(*t.expected, i, positions[i]);
            }
        return t;
    }
    if (c.reference != "library") throw std::runtime_error("case " + c.id + ": unknown reference '" + c.reference + "'");
    // Only outputs are compared, so pure inputs never come to the host, and a probed output comes as
    // its probe: a timed run of a gigabyte field moves 64 KB here, not two gigabytes.
    auto sized = specs;
    for (size_t i = 0; i < specs.size(); ++i)
        if (!positions[i].empty()) sized[i].count = positions[i].size();
    Truth t{std::make_unique<HostArrays>(sized, true), std::make_unique<HostArrays>(sized, true)};
    DeviceArrays dev(specs);
    fill_inputs_device(c, seed, dev);
    poison_outputs_device(dev);
    for (size_t i = 0; i < specs.size(); ++i)
        if (specs[i].role == Role::inout)  // an in-place output is compared with its input
            copy_to_host(specs[i], dev.ptrs[i], positions[i], t.inputs->ptrs[i]);
    p.reference_library(c, dev, 0);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaDeviceSynchronize());
    for (size_t i = 0; i < specs.size(); ++i)
        if (is_output(specs[i])) copy_to_host(specs[i], dev.ptrs[i], positions[i], t.expected->ptrs[i]);
    return t;
}

void check_case(const Problem& p, const Case& c, const std::string& dir, JsonLines& out) {
    bool needs_gpu = c.reference == "library";
    if (needs_gpu) require_gpu();
    int runs = c.timed ? c.runs : 1;
    for (int r = 0; r < runs; ++r) {
        uint64_t seed = c.timed ? run_seed(c.seed, r) : c.seed;
        const auto specs = p.arrays(c);
        Positions positions(specs.size());
        for (size_t a = 0; a < specs.size(); ++a)
            if (is_output(specs[a])) positions[a] = handed_over(c, r, seed, specs[a].count);
        Truth truth = compute_truth(p, c, seed, positions);

        // What was handed over, array by array.
        std::vector<std::vector<unsigned char>> got(specs.size());
        std::vector<std::string> problem(specs.size());
        std::map<std::string, double> scalars;
        for (size_t a = 0; a < specs.size(); ++a) {
            const ArraySpec& s = specs[a];
            if (!is_output(s)) continue;
            size_t want_bytes = (positions[a].empty() ? s.count : positions[a].size()) * dtype_size(s.dtype);
            bool ok;
            got[a] = read_file(dump_path(dir, c, r, s.name), ok);
            if (!ok) problem[a] = "no output was handed over";
            else if (got[a].size() != want_bytes) problem[a] = "output file has the wrong size";
            else if (s.count == 1)
                scalars[s.name] = s.dtype == DType::f64 ? *(const double*)got[a].data() : *(const float*)got[a].data();
        }
        Case redo;
        if (p.retarget(c, *truth.expected, scalars, redo)) truth = compute_truth(p, redo, seed, positions);

        for (size_t a = 0; a < specs.size(); ++a) {
            const ArraySpec& s = specs[a];
            if (!is_output(s)) continue;
            out.begin().field("event", "check").field("case", c.id).field("run", r).field("array", s.name);
            if (!problem[a].empty()) {
                out.field("pass", false).field("reason", problem[a]).end();
                continue;
            }
            Comparison cmp = compare_array(s, truth.inputs->ptrs[a], truth.expected->ptrs[a], got[a].data(), positions[a],
                                           c.tol, [&](size_t i) { return p.is_protected(c, s.name, i); });
            write_comparison(out, cmp);
            if (s.count == 1) {  // a returned value (a count, a sum): both sides, for the report
                double want = s.dtype == DType::f64 ? *truth.expected->f64(s.name) : *truth.expected->f32(s.name);
                out.field("value", scalars[s.name]).field("expected", want);
            }
            out.end();
        }
    }
}

void baseline_case(const Problem& p, const Case& c, JsonLines& out) {
    require_gpu();
    DeviceArrays dev(p.arrays(c));
    auto prepare = [&](int r) { fill_inputs_device(c, run_seed(c.seed, r), dev); };
    std::vector<std::string> names = p.libraries();
    for (size_t which = 0; which < names.size(); ++which) {
        auto body = [&] { p.reference_library(c, dev, which); };
        std::vector<double> ms = time_runs(c.warmup, c.runs, prepare, body, [](int) {});
        out.begin()
            .field("event", "baseline")
            .field("case", c.id)
            .field("library", names[which])
            .field("times_ms", ms)
            .end();
    }
}

}  // namespace

int main(int argc, char** argv) {
    std::string mode = argc > 1 ? argv[1] : "";
    if (!((mode == "check" && argc == 5) || (mode == "baseline" && argc == 4))) {
        std::fprintf(stderr, "usage: %s check PLAN DUMP_DIR RESULTS\n       %s baseline PLAN RESULTS\n", argv[0], argv[0]);
        return kExitUsage;
    }
    try {
        std::vector<Case> cases = read_plan(argv[2]);
        JsonLines out(argv[argc - 1]);
        Problem& p = problem();
        for (const Case& c : cases) {
            if (mode == "check") check_case(p, c, argv[3], out);
            else if (c.timed) baseline_case(p, c, out);
        }
    } catch (const DeviceFault& f) {
        std::fprintf(stderr, "checker: library call failed: %s\n", cudaGetErrorString(f.err));
        return kExitHarnessError;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "checker: %s\n", e.what());
        return kExitHarnessError;
    }
    return kExitOk;
}
