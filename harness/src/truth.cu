// truth.cu: the truth of a call, recomputed from its seed, and the comparison (see truth.h).
//
// For every output: relative error ||out - ref|| / ||ref|| against the case's tolerance; NaN never
// passes; elements still holding the poison (or, for in-place outputs, still holding their input)
// were never written; elements the problem protects must equal their input bit for bit.
#include <cstring>
#include <map>

#include "truth.h"

namespace kit {

namespace {

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

double scalar(const ArraySpec& s, const void* p) {
    return s.dtype == DType::f64 ? *(const double*)p : *(const float*)p;
}

}  // namespace

void check_outputs(const Problem& p, const Case& c, int run, uint64_t seed, const Outputs& o, JsonLines& out) {
    const auto specs = p.arrays(c);
    Truth truth = compute_truth(p, c, seed, o.positions);
    std::vector<std::string> problem(specs.size());
    std::map<std::string, double> scalars;  // what one-element outputs (a count, a sum) hold
    for (size_t a = 0; a < specs.size(); ++a) {
        const ArraySpec& s = specs[a];
        if (!is_output(s)) continue;
        size_t want_bytes = (o.positions[a].empty() ? s.count : o.positions[a].size()) * dtype_size(s.dtype);
        if (o.got[a].size() != want_bytes) problem[a] = "the judge read the wrong number of bytes";
        else if (s.count == 1) scalars[s.name] = scalar(s, o.got[a].data());
    }
    Case redo;
    if (p.retarget(c, *truth.expected, scalars, redo)) truth = compute_truth(p, redo, seed, o.positions);

    for (size_t a = 0; a < specs.size(); ++a) {
        const ArraySpec& s = specs[a];
        if (!is_output(s)) continue;
        out.begin().field("event", "check").field("case", c.id).field("run", run).field("array", s.name);
        if (!problem[a].empty()) {
            out.field("pass", false).field("reason", problem[a]).end();
            continue;
        }
        Comparison cmp = compare_array(s, truth.inputs->ptrs[a], truth.expected->ptrs[a], o.got[a].data(), o.positions[a],
                                       c.tol, [&](size_t i) { return p.is_protected(c, s.name, i); });
        write_comparison(out, cmp);
        if (s.count == 1)  // a returned value (a count, a sum): both sides, for the report
            out.field("value", scalars[s.name]).field("expected", scalar(s, truth.expected->ptrs[a]));
        out.end();
    }
}

}  // namespace kit
