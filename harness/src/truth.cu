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

double scalar(const ArraySpec& s, const void* p) {
    return s.dtype == DType::f64 ? *(const double*)p : *(const float*)p;
}

bool same_arrays(const std::vector<ArraySpec>& a, const std::vector<ArraySpec>& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
        if (a[i].name != b[i].name || a[i].dtype != b[i].dtype || a[i].count != b[i].count || a[i].role != b[i].role ||
            a[i].device != b[i].device)
            return false;
    return true;
}

// The library truth's arrays on the GPU, kept from one check to the next while a case's arrays stay
// the same: jacobi's three gigabytes are allocated once per case, not once per timed run. `before`
// holds what the in-place outputs started from (pure inputs and outputs get none); `truth_of` says
// which call's truth `dev` holds, so that a timed run's probe and its whole check share one.
struct Kept {
    std::unique_ptr<DeviceArrays> dev, before;
    std::string truth_of;
};
Kept& kept() {
    static Kept k;
    return k;
}

// The truth of case `c` on inputs from `seed` (library route 0), in the kept arrays, with what its
// in-place outputs started from in kept().before.
DeviceArrays& library_truth(const Problem& p, const Case& c, uint64_t seed) {
    const auto specs = p.arrays(c);
    Kept& k = kept();
    if (!k.dev || !same_arrays(k.dev->specs, specs)) {
        k.dev.reset();
        k.before.reset();
        k.truth_of.clear();
        k.dev = std::make_unique<DeviceArrays>(specs);
        k.before = std::make_unique<DeviceArrays>(only(specs, [](const ArraySpec& s) { return s.role == Role::inout; }));
    }
    DeviceArrays& dev = *k.dev;
    const std::string call = public_line(c) + " seed=" + std::to_string(seed);
    if (k.truth_of == call) return dev;
    k.truth_of.clear();
    fill_inputs_device(c, seed, dev);
    poison_outputs_device(dev);
    copy_on_device(dev, *k.before);  // an in-place output is compared with its input
    p.reference_library(c, dev, 0);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaDeviceSynchronize());
    k.truth_of = call;
    return dev;
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
    DeviceArrays& dev = library_truth(p, c, seed);
    for (size_t i = 0; i < specs.size(); ++i) {
        if (specs[i].role == Role::inout) copy_to_host(specs[i], kept().before->ptrs[i], positions[i], t.inputs->ptrs[i]);
        if (is_output(specs[i])) copy_to_host(specs[i], dev.ptrs[i], positions[i], t.expected->ptrs[i]);
    }
    return t;
}

// One "check" record: the comparison of output `s`, and for a one-element output (a count, a sum)
// both values, for the report.
void write_check(JsonLines& out, const Case& c, int run, const ArraySpec& s, const Comparison& cmp, double value,
                 double expected) {
    out.begin().field("event", "check").field("case", c.id).field("run", run).field("array", s.name);
    write_comparison(out, cmp);
    if (s.count == 1) out.field("value", value).field("expected", expected);
    out.end();
}

// The elements of output `s` of case `c` that must keep their input, as a mask on its GPU: gathered
// once per array while what they depend on stays the same (every check of jacobi's field at n = 512,
// fixed or converging, shares its walls: 0.3 s to gather).
const uint32_t* protected_bits(const Problem& p, const Case& c, const ArraySpec& s) {
    static std::string kept_for;
    static std::map<std::string, std::unique_ptr<ProtectedMask>> masks;
    std::string key = p.protected_key(c);
    if (key != kept_for) {
        masks.clear();
        kept_for = key;
    }
    std::unique_ptr<ProtectedMask>& m = masks[s.name];
    if (!m) m = std::make_unique<ProtectedMask>(s, [&](size_t i) { return p.is_protected(c, s.name, i); });
    return m->bits();
}

// What a check reads of one-element outputs (a count, a sum) on the host: the truth's as an Arrays
// whose other outputs are null, and the values handed over by name.
struct Scalars {
    Arrays expected;
    std::vector<double> storage;  // 8 bytes per array: room for either type
    std::map<std::string, double> got;

    Scalars(const std::vector<ArraySpec>& specs, const Arrays& truth, const Arrays& outputs)
        : expected{specs, std::vector<void*>(specs.size(), nullptr)}, storage(specs.size()) {
        for (size_t a = 0; a < specs.size(); ++a) {
            if (!is_output(specs[a]) || specs[a].count != 1) continue;
            copy_to_host(specs[a], truth.ptrs[a], {}, &storage[a]);
            expected.ptrs[a] = &storage[a];
            double v = 0;
            copy_to_host(specs[a], outputs.ptrs[a], {}, &v);
            got[specs[a].name] = scalar(specs[a], &v);
        }
    }
};

void check_on_device(const Problem& p, const Case& c, int run, uint64_t seed, const Outputs& o, JsonLines& out) {
    const auto specs = p.arrays(c);
    DeviceArrays* truth = &library_truth(p, c, seed);
    auto scalars = std::make_unique<Scalars>(specs, *truth, *o.on_device);
    Case redo;
    if (p.retarget(c, scalars->expected, scalars->got, redo)) {
        truth = &library_truth(p, redo, seed);
        scalars = std::make_unique<Scalars>(specs, *truth, *o.on_device);
    }
    for (size_t a = 0; a < specs.size(); ++a) {
        const ArraySpec& s = specs[a];
        if (!is_output(s)) continue;
        const void* input = s.role == Role::inout ? kept().before->ptrs[a] : nullptr;
        Comparison cmp = compare_array_device(s, input, truth->ptrs[a], o.on_device->ptrs[a], c.tol,
                                              protected_bits(p, c, s));
        write_check(out, c, run, s, cmp, scalars->got[s.name],
                    s.count == 1 ? scalar(s, scalars->expected.ptrs[a]) : 0);
    }
}

// The outputs copied from the GPU to the host, for a truth computed on the CPU (small cases).
Outputs on_host(const Outputs& o) {
    Outputs h{o.positions, std::vector<std::vector<unsigned char>>(o.on_device->specs.size()), nullptr};
    for (size_t a = 0; a < h.got.size(); ++a) {
        const ArraySpec& s = o.on_device->specs[a];
        if (!is_output(s)) continue;
        h.got[a].resize(s.count * dtype_size(s.dtype));
        if (!h.got[a].empty()) copy_to_host(s, o.on_device->ptrs[a], {}, h.got[a].data());
    }
    return h;
}

}  // namespace

std::vector<ArraySpec> only(std::vector<ArraySpec> specs, bool (*keep)(const ArraySpec&)) {
    for (ArraySpec& s : specs)
        if (!keep(s)) s.count = 0;
    return specs;
}

void copy_on_device(const Arrays& from, const Arrays& to) {
    for (size_t i = 0; i < to.specs.size(); ++i) {
        const ArraySpec& s = to.specs[i];
        if (s.count == 0) continue;
        CUDA_CHECK(cudaSetDevice(s.device));
        CUDA_CHECK(cudaMemcpy(to.ptrs[i], from.ptrs[i], s.count * dtype_size(s.dtype), cudaMemcpyDeviceToDevice));
        CUDA_CHECK(cudaDeviceSynchronize());
    }
    CUDA_CHECK(cudaSetDevice(0));
}

void check_outputs(const Problem& p, const Case& c, int run, uint64_t seed, const Outputs& o, JsonLines& out) {
    if (o.on_device && c.reference == "library") return check_on_device(p, c, run, seed, o, out);
    if (o.on_device) return check_outputs(p, c, run, seed, on_host(o), out);
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
        if (!problem[a].empty()) {
            out.begin().field("event", "check").field("case", c.id).field("run", run).field("array", s.name)
                .field("pass", false).field("reason", problem[a]).end();
            continue;
        }
        Comparison cmp = compare_array(s, truth.inputs->ptrs[a], truth.expected->ptrs[a], o.got[a].data(), o.positions[a],
                                       c.tol, [&](size_t i) { return p.is_protected(c, s.name, i); });
        write_check(out, c, run, s, cmp, scalars[s.name], s.count == 1 ? scalar(s, truth.expected->ptrs[a]) : 0);
    }
}

}  // namespace kit
