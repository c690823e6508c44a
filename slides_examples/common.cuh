// common.cuh: what every lecture example shares, so that each family's .cu file holds only its
// kernels and their story.
//
//   - command line: --json FILE, --version K, --check-only, --list
//   - random fill on the host (the same numbers on every run and every GPU)
//   - the check: relative error ||out - ref|| / ||ref|| against the CPU reference; NaN never passes
//   - timing: cudaEvents around one call, the L2 cache flushed before each run, the median kept
//   - results: one line per version on stdout, and the same as JSON for report.py
//
// How a family's main() uses it:
//
//   Bench b(argc, argv, "matmul", "fp32", versions, count);   // parses the flags
//   for (int v : b.selected()) {                              // every version, or the one of --version
//       ... run version v once on the check sizes, compare with the CPU ...
//       if (!b.check(v, rel_err, tol)) continue;              // failed: reported, never timed
//       ... run once at the timed size (the warm-up) ...
//       b.time(v, [&] { launch(v, ...); }, work, "GFLOPS", "n=4096");
//   }
//
// The peak a rate is compared with is not known here: report.py looks the device name up in
// assignments/gpus.json. This file writes the name, the driver and runtime versions and the date.
#pragma once

#include "cuda_check.cuh"  // the kit's one CUDA_CHECK(expr) macro (harness/include/)

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

namespace slides {

// ------------------------------------------------------------------------------------------------
// Random fill: splitmix64, so a seed gives the same inputs on every machine.
inline uint64_t splitmix64(uint64_t& state) {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// Uniform in [lo, hi).
template <typename T>
void fill_uniform(std::vector<T>& x, uint64_t seed, double lo = -1.0, double hi = 1.0) {
    uint64_t s = seed;
    for (auto& v : x) v = T(lo + (hi - lo) * double(splitmix64(s) >> 11) * (1.0 / 9007199254740992.0));
}

// ------------------------------------------------------------------------------------------------
// The check. Relative error in the 2-norm, accumulated in double; NaN or Inf anywhere fails.
template <typename T, typename R>
double rel_error(const T* out, const R* ref, size_t n) {
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < n; ++i) {
        double o = double(out[i]), r = double(ref[i]);
        if (!std::isfinite(o)) return INFINITY;
        num += (o - r) * (o - r);
        den += r * r;
    }
    if (den == 0.0) return num == 0.0 ? 0.0 : INFINITY;
    return std::sqrt(num / den);
}

// ------------------------------------------------------------------------------------------------
// One version of a progression, as the family's file declares it.
struct Version {
    const char* name;  // short, as the table shows it
    bool in_progression = true;  // false: an aside (e.g. the historic incorrect form), no speedups
    const char* note = "";       // shown in the table's notes column
    int gpus = 1;                // GPUs the version runs on: its % of peak is against that many
};

struct Result {
    std::string status = "not run";  // passed, failed, skipped, not run
    std::string size, unit, note;
    double ms = 0, rate = 0, error = -1;  // error: the relative error of the check (-1: none)
    int runs = 0;
};

inline std::string json_escape(const std::string& s) {
    std::string o;
    for (char c : s) {
        if (c == '"' || c == '\\') { o += '\\'; o += c; }
        else if (c == '\n') o += "\\n";
        else if ((unsigned char)c < 0x20) o += ' ';
        else o += c;
    }
    return o;
}

inline double finite_or_0(double x) { return std::isfinite(x) ? x : 0.0; }  // JSON has no inf/nan

// What the JSON says about the run, besides the versions.
struct Meta {
    std::string family, peak_kind, device;
    int major = 0, minor = 0, sms = 0, device_count = 0, driver_api = 0, runtime = 0;
    std::string date;
    bool check_only = false;
};

// Writes the results of a family as JSON (what report.py reads); only = K keeps version K alone.
// Written to FILE.tmp, then renamed: a reader never sees half a file.
inline void write_results_json(const std::string& path, const Meta& m, const Version* versions,
                               const Result* results, int count, int only = 0) {
    std::string tmp = path + ".tmp";
    FILE* f = std::fopen(tmp.c_str(), "w");
    if (!f) { std::fprintf(stderr, "cannot write %s\n", tmp.c_str()); std::exit(1); }
    std::fprintf(f, "{\n  \"family\": \"%s\",\n  \"peak\": \"%s\",\n", json_escape(m.family).c_str(),
                 json_escape(m.peak_kind).c_str());
    std::fprintf(f,
                 "  \"device\": {\"name\": \"%s\", \"compute_capability\": \"%d.%d\", "
                 "\"sms\": %d, \"count\": %d, \"driver_api\": \"%d.%d\", \"runtime\": \"%d.%d\"},\n",
                 json_escape(m.device).c_str(), m.major, m.minor, m.sms, m.device_count,
                 m.driver_api / 1000, m.driver_api % 1000 / 10, m.runtime / 1000, m.runtime % 1000 / 10);
    std::fprintf(f, "  \"date\": \"%s\",\n  \"check_only\": %s,\n  \"versions\": [",
                 json_escape(m.date).c_str(), m.check_only ? "true" : "false");
    const char* sep = "\n";
    for (int k = 1; k <= count; ++k) {
        if (only != 0 && only != k) continue;  // --version K: the others are left out, not "not run"
        const Result& r = results[k - 1];
        const std::string note = r.note.empty() ? versions[k - 1].note : r.note;
        std::fprintf(f,
                     "%s    {\"version\": %d, \"name\": \"%s\", \"in_progression\": %s, "
                     "\"status\": \"%s\", \"size\": \"%s\", \"ms\": %.6g, \"rate\": %.6g, "
                     "\"unit\": \"%s\", \"runs\": %d, \"error\": %.3g, \"note\": \"%s\", \"gpus\": %d}",
                     sep, k, json_escape(versions[k - 1].name).c_str(),
                     versions[k - 1].in_progression ? "true" : "false", json_escape(r.status).c_str(),
                     json_escape(r.size).c_str(), finite_or_0(r.ms), finite_or_0(r.rate), json_escape(r.unit).c_str(), r.runs,
                     std::isfinite(r.error) ? r.error : 1e308, json_escape(note).c_str(), versions[k - 1].gpus);
        sep = ",\n";
    }
    std::fprintf(f, "\n  ]\n}\n");
    std::fclose(f);
    std::rename(tmp.c_str(), path.c_str());
}

// ------------------------------------------------------------------------------------------------
// Bench: the command line, the device, the timer and the results of one family.
class Bench {
  public:
    Bench(int argc, char** argv, const char* family, const char* peak_kind, const Version* versions,
          int count)
        : family_(family), peak_kind_(peak_kind), versions_(versions), count_(count),
          results_(count) {
        std::setvbuf(stdout, nullptr, _IOLBF, 0);  // one line at a time, also through a pipe (tee)
        for (int i = 1; i < argc; ++i) {
            std::string a = argv[i];
            if (a == "--json" && i + 1 < argc) json_ = argv[++i];
            else if (a == "--version" && i + 1 < argc) only_ = std::atoi(argv[++i]);
            else if (a == "--check-only") check_only_ = true;
            else if (a == "--list") list_ = true;
            else {
                std::fprintf(stderr,
                             "usage: %s [--json FILE] [--version K] [--check-only] [--list]\n"
                             "  --json FILE   also write the results as JSON (read by report.py)\n"
                             "  --version K   run version K only (1..%d)\n"
                             "  --check-only  check every version against the CPU, time nothing\n"
                             "  --list        list the versions and exit (needs no GPU)\n",
                             argv[0], count);
                std::exit(2);
            }
        }
        if (list_) {
            for (int v = 1; v <= count_; ++v)
                std::printf("%d\t%s%s\n", v, versions_[v - 1].name,
                            versions_[v - 1].in_progression ? "" : "\t(aside)");
            std::exit(0);
        }
        if (only_ != 0 && (only_ < 1 || only_ > count_)) {
            std::fprintf(stderr, "%s: no version %d (there are 1..%d; --list names them)\n", family,
                         only_, count_);
            std::exit(2);
        }
        int devices = 0;
        cudaError_t err = cudaGetDeviceCount(&devices);
        if (err != cudaSuccess || devices == 0) {
            std::fprintf(stderr, "%s: no CUDA GPU: %s\n", family,
                         err != cudaSuccess ? cudaGetErrorString(err) : "no device");
            std::exit(3);
        }
        device_count_ = devices;
        CUDA_CHECK(cudaSetDevice(0));
        CUDA_CHECK(cudaGetDeviceProperties(&prop_, 0));
        CUDA_CHECK(cudaDriverGetVersion(&driver_api_));
        CUDA_CHECK(cudaRuntimeGetVersion(&runtime_));
        std::time_t now = std::time(nullptr);
        char buf[32];
        std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
        date_ = buf;
        // Napkin math: the L2 is 50 MB on an H100/H200. Writing twice its size between runs
        // evicts the previous run's data, so every run starts from DRAM, as a first call would.
        flush_bytes_ = size_t(std::max(prop_.l2CacheSize, 1 << 20)) * 2;
        CUDA_CHECK(cudaMalloc(&flush_, flush_bytes_));
        CUDA_CHECK(cudaEventCreate(&start_));
        CUDA_CHECK(cudaEventCreate(&stop_));
        std::printf("%s on %s (sm_%d%d, %d SMs, %d GPU%s), CUDA runtime %d.%d, driver API %d.%d, %s\n",
                    family, prop_.name, prop_.major, prop_.minor, prop_.multiProcessorCount,
                    devices, devices == 1 ? "" : "s", runtime_ / 1000, runtime_ % 1000 / 10,
                    driver_api_ / 1000, driver_api_ % 1000 / 10, date_.c_str());
        write_json();  // every version "not run": if the program dies, the report still says so
    }

    ~Bench() {
        cudaFree(flush_);
        cudaEventDestroy(start_);
        cudaEventDestroy(stop_);
    }

    const cudaDeviceProp& prop() const { return prop_; }
    int device_count() const { return device_count_; }
    bool check_only() const { return check_only_; }

    // The versions to run: all, or the one --version names.
    std::vector<int> selected() const {
        std::vector<int> v;
        for (int k = 1; k <= count_; ++k)
            if (only_ == 0 || only_ == k) v.push_back(k);
        return v;
    }

    // Records the check of version v. A failed version is reported and never timed.
    bool check(int v, double err, double tol, const std::string& what = "") {
        Result& r = results_[v - 1];
        r.error = std::isfinite(err) ? std::max(r.error, err) : INFINITY;
        bool ok = std::isfinite(err) && err <= tol;
        if (!ok) {
            char buf[256];
            std::snprintf(buf, sizeof buf, "check failed%s%s: relative error %.3g > %.1g",
                          what.empty() ? "" : " on ", what.c_str(), err, tol);
            r.status = "failed";
            r.note = join(versions_[v - 1].note, buf);
            std::printf("  v%d %-44s FAILED  %s\n", v, versions_[v - 1].name, buf);
            write_json();
        }
        return ok;
    }

    // A check that is not a relative error (an iteration count, an exact sum).
    bool check_that(int v, bool ok, const std::string& message) {
        if (ok) return true;
        Result& r = results_[v - 1];
        r.status = "failed";
        r.note = join(versions_[v - 1].note, "check failed: " + message);
        std::printf("  v%d %-44s FAILED  %s\n", v, versions_[v - 1].name, message.c_str());
        write_json();
        return false;
    }

    void skip(int v, const std::string& why) {
        Result& r = results_[v - 1];
        r.status = "skipped";
        r.note = join(versions_[v - 1].note, "skipped: " + why);
        std::printf("  v%d %-44s skipped: %s\n", v, versions_[v - 1].name, why.c_str());
        write_json();
    }

    // Times fn (one call of version v, already checked and warmed up): the L2 flushed before
    // each run, cudaEvents around the call, runs repeated until max_runs or budget_ms, the median
    // kept. work / 1e9 / seconds is the rate (GFLOPS or GB/s). With --check-only nothing is timed.
    template <typename F>
    void time(int v, F&& fn, double work, const char* unit, const std::string& size,
              int max_runs = 25, double budget_ms = 1000.0, const std::string& extra_note = "") {
        Result& r = results_[v - 1];
        r.size = size;
        r.unit = unit;
        if (check_only_) {
            r.status = "passed";
            r.note = join(versions_[v - 1].note, join("check only, not timed", extra_note));
            std::printf("  v%d %-44s passed (rel err %.2g)\n", v, versions_[v - 1].name,
                        std::max(r.error, 0.0));
            write_json();
            return;
        }
        std::vector<float> ms;
        double total = 0;
        while ((int)ms.size() < max_runs && (ms.empty() || total < budget_ms)) {
            CUDA_CHECK(cudaMemsetAsync(flush_, (int)ms.size() & 0xff, flush_bytes_));
            CUDA_CHECK(cudaEventRecord(start_));
            fn();
            CUDA_CHECK(cudaEventRecord(stop_));
            CUDA_CHECK(cudaEventSynchronize(stop_));
            CUDA_CHECK(cudaGetLastError());
            float t = 0;
            CUDA_CHECK(cudaEventElapsedTime(&t, start_, stop_));
            ms.push_back(t);
            total += t;
        }
        std::sort(ms.begin(), ms.end());
        r.ms = ms[ms.size() / 2];
        r.runs = (int)ms.size();
        r.rate = work / 1e9 / (r.ms * 1e-3);
        r.status = "passed";
        std::string runs = r.runs == 1 ? "one timed run" : "";
        r.note = join(versions_[v - 1].note, join(extra_note, runs));
        std::printf("  v%d %-44s %10.3f ms  %10.1f %-6s  %s  (%d run%s, rel err %.2g)\n", v,
                    versions_[v - 1].name, r.ms, r.rate, unit, size.c_str(), r.runs,
                    r.runs == 1 ? "" : "s", std::max(r.error, 0.0));
        write_json();
    }

    // Adds to the notes of a timed version (e.g. the rate in a second unit).
    void add_note(int v, const std::string& note) {
        Result& r = results_[v - 1];
        r.note = join(r.note.empty() ? versions_[v - 1].note : r.note, note);
        write_json();
    }
    double rate(int v) const { return results_[v - 1].rate; }
    double ms(int v) const { return results_[v - 1].ms; }

  private:
    static std::string join(const std::string& a, const std::string& b) {
        if (a.empty()) return b;
        if (b.empty()) return a;
        return a + "; " + b;
    }

    void write_json() const {
        if (json_.empty()) return;
        Meta m{family_, peak_kind_, prop_.name, prop_.major, prop_.minor, prop_.multiProcessorCount,
               device_count_, driver_api_, runtime_, date_, check_only_};
        write_results_json(json_, m, versions_, results_.data(), count_, only_);
    }

    const char* family_;
    const char* peak_kind_;
    const Version* versions_;
    int count_;
    std::vector<Result> results_;
    std::string json_, date_;
    int only_ = 0;
    bool check_only_ = false, list_ = false;
    cudaDeviceProp prop_{};
    int device_count_ = 0, driver_api_ = 0, runtime_ = 0;
    void* flush_ = nullptr;
    size_t flush_bytes_ = 0;
    cudaEvent_t start_{}, stop_{};
};

// Sampled check for sizes the CPU cannot redo whole: `samples` entries chosen by the seed,
// each computed on the CPU by entry(i), compared in the same relative 2-norm.
template <typename T, typename F>
double sampled_rel_error(const std::vector<T>& out, int samples, uint64_t seed, F&& entry) {
    std::vector<double> got, want;
    uint64_t s = seed;
    for (int k = 0; k < samples; ++k) {
        size_t i = size_t(splitmix64(s) % out.size());
        got.push_back(double(out[i]));
        want.push_back(entry(i));
    }
    return rel_error(got.data(), want.data(), got.size());
}

}  // namespace slides
