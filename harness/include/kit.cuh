// kit.cuh: the harness shared by every assignment.
//
// Two programs per assignment, and neither trusts the other:
//   runner  = harness/src/{common,wire,shared_arrays,serve,runner}.cu + assignments/<name>/problem.cu
//             (-DKIT_RUNNER) + the student's kernel.o. It holds the student's code and does one thing:
//             call the entry point on the arrays it is given, when it is told to.
//   checker = harness/src/{common,wire,shared_arrays,serve,check,truth,hand,judge,checker}.cu + problem.cu
//             + cuBLAS/CUB. It holds no student code. As the judge it allocates each case's arrays and
//             shares them with the runner, fills the inputs from seeds it draws itself, rings the
//             runner, takes the outputs in hand itself (the clock stops only then), computes the truth
//             (CPU loop or library) and compares; as a server it runs the library routes the same way,
//             so that the baseline is timed by the same clock as the student.
// Nothing the grade depends on (time, inputs, which outputs are compared, the outputs, the results)
// passes through the runner's process: see wire.h and judge.cu.
//
// An assignment's problem.cu describes its arrays, how to call the student's entry point and how to
// compute the expected result; everything else (plan parsing, generation, poisoning, timing, the
// wire, comparison, exit codes) lives here once.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "cuda_check.cuh"

namespace kit {

// ---------------------------------------------------------------------------------------------
// Exit codes shared by the runner and the checker. The grader (grader/grader/protocol.py) reads
// these; a test there parses this block, so keep the `k... = N,` form.
enum ExitCode : int {
    kExitOk = 0,
    kExitUsage = 2,          // bad arguments or plan file
    kExitNoGpu = 3,          // no CUDA device could be opened
    kExitLaunchError = 4,    // the submission's kernel launch was rejected (bad grid, resources)
    kExitRuntimeError = 5,   // the submission faulted (illegal address, trap, ...)
    kExitHarnessError = 6,   // the harness itself failed (out of memory, unreadable file, ...)
};

// The checker could not get the GPU (or pinned host) memory one of its steps needs. In a grading the
// runner shares the GPU, so the judge writes this down as the runner's doing (judge.cu), not as the
// kit failing: a kernel.cu that takes the GPU's memory and keeps it gets a verdict, not a kit error.
struct OutOfMemory : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// ---------------------------------------------------------------------------------------------
// Deterministic, counter-based random numbers: value i of stream s is a pure function of
// (seed, s, i), identical on host and device, so the checker can regenerate any input the runner
// saw without a file of inputs changing hands.
__host__ __device__ inline uint64_t mix64(uint64_t x) {  // splitmix64 finaliser
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}
__host__ __device__ inline uint64_t hash3(uint64_t seed, uint64_t stream, uint64_t i) {
    return mix64(mix64(seed ^ mix64(stream)) + i);
}
// Uniform in [0, 1) with 53 random bits: exact in double, so host and device agree bit for bit.
__host__ __device__ inline double uniform01(uint64_t seed, uint64_t stream, uint64_t i) {
    return (double)(hash3(seed, stream, i) >> 11) * (1.0 / 9007199254740992.0);
}

// ---------------------------------------------------------------------------------------------
// Arrays of a problem.
enum class DType { f64, f32 };
// scratch: filled like an input, free for the code under test to overwrite, never compared.
enum class Role { in, out, inout, scratch };

// How an input is filled. Uniform values avoid zeros (which hide unwritten outputs and wrong
// indexing); integer values make sums exact in any order.
// custom: the problem fills the array itself (Problem::fill_custom), e.g. a physical set-up.
struct Fill {
    enum Kind { uniform, integers, constant, custom } kind = uniform;
    double lo = -1.0, hi = 1.0;  // uniform: [lo, hi); integers: lo..hi inclusive; constant: lo
};

struct ArraySpec {
    std::string name;
    DType dtype;
    size_t count;
    Role role;
    Fill fill = {};
    int device = 0;  // the GPU that holds it (multi-GPU problems)
};

inline size_t dtype_size(DType t) { return t == DType::f64 ? 8 : 4; }
// Bytes allocated for an array: at least one element, so that n = 1 and empty cases still get a
// valid pointer.
inline size_t alloc_bytes(const ArraySpec& s) { return std::max<size_t>(s.count, 1) * dtype_size(s.dtype); }
// Outputs are what a call hands over and the checker compares; inputs and scratch are neither.
inline bool is_output(const ArraySpec& s) { return s.role == Role::out || s.role == Role::inout; }

__host__ __device__ inline double fill_value(Fill f, uint64_t seed, uint64_t stream, uint64_t i) {
    switch (f.kind) {
    case Fill::integers: return f.lo + (double)(hash3(seed, stream, i) % (uint64_t)(f.hi - f.lo + 1));
    case Fill::constant: return f.lo;
    default: return f.lo + (f.hi - f.lo) * uniform01(seed, stream, i);
    }
}

// The poison written into pure outputs before every call: a quiet NaN with a payload no
// arithmetic produces, so "never written" and "computed NaN" can be told apart.
constexpr uint64_t kPoison64 = 0x7FF8DEADBEEF0BADull;
constexpr uint32_t kPoison32 = 0x7FC0DEADu;

// ---------------------------------------------------------------------------------------------
// One case of a plan: an id, a seed and named parameters (n, m, k, w, a tolerance, ...).
constexpr double kBurstGapMs = 400;  // between the bursts of timed runs: see time_runs

struct Case {
    std::string id;
    uint64_t seed = 0;
    bool timed = false;
    int warmup = 0, runs = 0;
    double gap_ms = kBurstGapMs;    // a timed case's bursts start at least this far apart (time_runs)
    double tol = 0;                 // relative error allowed in the outputs
    std::string reference = "cpu";  // "cpu" or "library": how the checker computes the truth
    std::map<std::string, double> params;

    // An integer parameter (sizes, counts); a value with a fraction is an error.
    long long get(const std::string& key) const {
        double v = real(key);
        if (v != (double)(long long)v) throw std::runtime_error("case " + id + ": parameter '" + key + "' must be an integer");
        return (long long)v;
    }
    // A real parameter (e.g. a convergence tolerance).
    double real(const std::string& key) const {
        auto it = params.find(key);
        if (it == params.end()) throw std::runtime_error("case " + id + " has no parameter '" + key + "'");
        return it->second;
    }
    bool has(const std::string& key) const { return params.count(key) != 0; }
};

// Named pointers to a case's arrays, all on the host or all on the device.
struct Arrays {
    std::vector<ArraySpec> specs;
    std::vector<void*> ptrs;

    void* raw(const std::string& name) const {
        for (size_t i = 0; i < specs.size(); ++i)
            if (specs[i].name == name) return ptrs[i];
        throw std::runtime_error("no array named '" + name + "'");
    }
    double* f64(const std::string& name) const { return static_cast<double*>(raw(name)); }
    float* f32(const std::string& name) const { return static_cast<float*>(raw(name)); }
};

// Owns device allocations for a case.
struct DeviceArrays : Arrays {
    explicit DeviceArrays(const std::vector<ArraySpec>& s);
    ~DeviceArrays();
    DeviceArrays(const DeviceArrays&) = delete;
    DeviceArrays& operator=(const DeviceArrays&) = delete;
};

// Owns host allocations for a case. With outputs_only, pure inputs get no storage (null pointers):
// the checker's library path never needs them on the host, and they can be gigabytes.
struct HostArrays : Arrays {
    explicit HostArrays(const std::vector<ArraySpec>& s, bool outputs_only = false);
    std::vector<std::vector<unsigned char>> storage;
};

// ---------------------------------------------------------------------------------------------
// What an assignment defines (assignments/<name>/problem.cu), once for both sides.
struct Problem {
    virtual ~Problem() = default;
    virtual const char* name() const = 0;
    // The arrays of a case. The work counts (FLOPs, bytes) live in the task file, for the grader.
    virtual std::vector<ArraySpec> arrays(const Case& c) const = 0;

    // Runner side: call the student's entry point on device arrays.
    virtual void run_submission(const Case&, Arrays& dev) const;

    // Checker side: overwrite the outputs of `host` (whose inputs are filled) with the truth.
    virtual void reference_cpu(const Case&, Arrays& host) const;
    // Checker side: the same on the device through library route `which` (an index into
    // libraries()); route 0 is the truth for "library" cases, and every route is a timed baseline.
    virtual void reference_library(const Case&, Arrays& dev, size_t which) const;
    virtual std::vector<std::string> libraries() const { return {"library"}; }
    // Checker side: elements of an output that must keep their input value (e.g. a triangle).
    virtual bool is_protected(const Case&, const std::string& array, size_t index) const { return false; }
    // What is_protected depends on: the checker keeps its masks while this stays the same (by
    // default every parameter of the case).
    virtual std::string protected_key(const Case& c) const;

    // Both sides: fill array `index` (whose Fill is custom) from `seed`, on the device or the host.
    // Host and device must produce the same bits.
    virtual void fill_custom(const Case&, uint64_t seed, size_t index, Arrays& arrays, bool device) const;

    // Checker side, for problems with more than one right answer. `expected` is the truth for `c`;
    // `got` holds the value handed over for every one-element output. Return true, with `redo` set,
    // when the answer handed over is also acceptable but its truth is that of case `redo` (jacobi: a
    // sweep count one off where the norm crossed tol within rounding).
    virtual bool retarget(const Case& c, const Arrays& expected, const std::map<std::string, double>& got,
                          Case& redo) const {
        return false;
    }
};

Problem& problem();  // the one problem linked into this binary

struct ProblemRegistration {
    explicit ProblemRegistration(Problem* p);
};
#define KIT_REGISTER_PROBLEM(Type) static ::kit::ProblemRegistration kit_registration_##Type(new Type())

// ---------------------------------------------------------------------------------------------
// Shared machinery (harness/src/common.cu).
std::vector<Case> read_plan(const std::string& path);  // "-": standard input
// One plan line ("case id=... k=v ..."); `where` names it in errors.
Case parse_case(const std::string& line, const std::string& where);
// A case as a plan line without its seed, its tolerance or whether it is timed: what the judge tells
// a runner about a case (its id and sizes).
std::string public_line(const Case& c);

void fill_inputs_device(const Case& c, uint64_t seed, Arrays& dev);
void fill_inputs_host(const Case& c, uint64_t seed, Arrays& host);
void poison_outputs_device(Arrays& dev);
// The same for outputs in host memory (the judge's --memory host, which the CPU tests use).
void poison_outputs_host(Arrays& host);

// A timed run's outputs are compared at kProbeCount positions the judge draws after the run (the
// last run's in full): cheap enough to check every timed run, unknowable to the runner beforehand.
constexpr int kProbeCount = 4096;
std::vector<size_t> probe_positions(uint64_t seed, size_t count);
// For every array of a case, the element positions read (empty: none, or the whole array).
using Positions = std::vector<std::vector<size_t>>;
// Copies device array `s` (at `dev`) to `host`: the whole array when `positions` is empty, else only
// the elements at `positions`, in that order, gathered on the array's GPU first, so that the probe
// of a gigabyte output moves 32 KB instead of the gigabyte.
void copy_to_host(const ArraySpec& s, const void* dev, const std::vector<size_t>& positions, void* host);
// Launches the gather of `count` elements of device array `s` at the device positions `pos` into `out`
// (device or mapped host memory), on the current stream of the array's GPU.
void gather_async(const ArraySpec& s, const void* dev, const size_t* pos, size_t count, void* out);

// A CUDA error left by the code under test, as settle() finds it.
struct DeviceFault {
    cudaError_t err = cudaSuccess;
    bool rejected = false;  // a launch or call refused up front (bad configuration): nothing ran
    explicit operator bool() const { return err != cudaSuccess; }
};

// Waits for all work on every GPU the case's arrays live on and returns the first error. A fault
// while running is sticky and reported by the sync; a launch refused at configuration time (too
// many threads, too much shared memory) is reported only by cudaGetLastError, while the sync
// succeeds. Leaves device 0 current.
DeviceFault settle();
// settle() for the kit's own GPU work: an error there is the kit's, thrown as "`who` failed: ...".
void settle_or_throw(const char* who);
// What the CUDA driver logged about its latest errors (its own words, e.g. which OS call failed), as
// "; the driver says: ..." (at most `limit` characters of them) to append to an error's text; "" where
// it logged nothing. A bare error code such as cudaErrorOperatingSystem says little; this says why.
std::string driver_says(size_t limit = 300);
// How many GPUs (0..k-1) the arrays allocated so far live on.
int devices_in_use();
void note_device_in_use(int device);

// Times `body` `runs` times after `warmup` untimed calls. Before each call `prepare(i)` sets up
// fresh inputs and leaves the device idle with its L2 cache flushed (untimed; untimed calls get
// negative i); `body()` returns once the call's work is finished and its outputs are in the caller's
// hands: the clock covers exactly that. `after(i, last)` runs untimed after each timed run, `last`
// on the final one. Returns milliseconds per timed run. `around(i, at)` runs at three moments of each
// timed run (RunMoment): before prepare(i) writes its inputs, just before the clock starts and just
// after it stops (the judge reads there which processes waited for a CPU during the run, and how much
// CPU the program's other threads used). Only what costs a fixed, short time may run between the
// inputs and the clock: from the moment they are written, a program with a kernel left resident can
// see them, and every microsecond the clock waits is one it can compute in.
//
// Slow calls get fewer runs: once the timed calls add up to `budget_ms` and kMinTimedRuns are done,
// the timing stops. Why: a kernel 50x slower than it should be (an atomic per point in jacobi, 5 s
// a call) took 11 calls and a minute of GPU time to say what three calls say as well; calls that
// long vary little from one to the next. A well-written kernel never comes near the budget
// (jacobi's reference: 10 runs of 0.1 s), and a submission gains nothing from it: the runs it
// loses are the slow ones.
//
// The timed runs come in kTimedBursts bursts that start at least kBurstGapMs apart: after a burst
// that took less, the caller does its own pending work until the gap would end (the judge checks the
// runs taken so far), the device idles for the rest, then takes kRewarmCalls untimed calls before the
// next burst.
// Why: a GPU's speed drifts from one moment to the next, a device-to-device copy's too. Traced on an
// H100, the medians of bursts 0.4 s apart varied by 0.8% (copy) to 1.5% (conv1d, w = 63), one
// standard deviation, and 20 runs of a 0.2 ms kernel taken back to back all fall into one moment:
// conv1d's reference, graded five times, spread 11% at w = 7 back to back and 3% in bursts. The
// first call after an idle gap ran ~1.5% slow, hence two untimed calls there. Ten bursts would halve
// the noise within a grading (simulated on the trace), but five gradings with ten spread no less: the
// drift from one grading to the next dominates, and five keep a grading short. Calls so long that the
// device would idle for less than its re-warming calls take (two calls a burst and two to re-warm:
// calls over 400 / 6 = 67 ms, as jacobi's 85 to 100 ms at n = 512 on an H200) are spread out by
// themselves: their bursts follow each other with no pause and no untimed calls. Those untimed calls
// were 8 of jacobi's 20 at n = 512, 0.7 s of each timing and of the library's; graded three times
// each way on an H200, the reference's rates were the same without them (158,520 to 158,663 MLUPS
// before, 158,694 to 158,791 after) and the grading took 8.7 to 8.8 s in place of 10.4. Short ones wait up
// to 1.6 s per timed case. A measurement that keeps only its least time (the judge's empty call) has
// no drift to average out: it asks for one burst. A plan can ask for a shorter gap (gap_ms, from
// `batch --burst-gap-ms`): the same bursts, checks and re-warming, with less of the drift averaged
// out; the kit's own tests grade their class so.
constexpr int kTimedBursts = 5;
constexpr int kRewarmCalls = 2;
constexpr double kTimedBudgetMs = 10000;
constexpr int kMinTimedRuns = 3;
// Timed runs per burst: the runs split into at most `bursts` bursts, all full but the last.
inline int burst_size(int runs, int bursts = kTimedBursts) { return (runs + bursts - 1) / bursts; }
struct NoGapWork {
    void operator()(int, double) const {}
};
enum class RunMoment { before_inputs, before_clock, after_clock };
struct NoAround {
    void operator()(int, RunMoment) const {}
};
template <class Prepare, class Body, class After, class GapWork = NoGapWork, class Around = NoAround>
std::vector<double> time_runs(int warmup, int runs, Prepare prepare, Body body, After after, int bursts = kTimedBursts,
                              double budget_ms = kTimedBudgetMs, GapWork gap_work = {}, Around around = {},
                              double gap_ms = kBurstGapMs);
void pause_ms(double ms);

double now_ms();
void flush_l2();

// JSON lines: one object per line, flushed as written, so a crash loses at most the line in
// progress and the grader can tell which case was running.
class JsonLines {
public:
    explicit JsonLines(const std::string& path);
    explicit JsonLines(int fd);  // a descriptor the grader handed over (the judge's results pipe)
    ~JsonLines();
    JsonLines& begin();
    JsonLines& field(const char* key, const std::string& value);
    JsonLines& field(const char* key, const char* value) { return field(key, std::string(value)); }
    JsonLines& field(const char* key, double value);
    JsonLines& field(const char* key, long long value);
    JsonLines& field(const char* key, int value) { return field(key, (long long)value); }
    JsonLines& field(const char* key, bool value);
    JsonLines& field(const char* key, const std::vector<double>& values);
    void end();

private:
    FILE* f_;
    std::string line_;
};

// Opens the device or exits with kExitNoGpu and a one-line message.
void require_gpu();

// ---------------------------------------------------------------------------------------------
template <class Prepare, class Body, class After, class GapWork, class Around>
std::vector<double> time_runs(int warmup, int runs, Prepare prepare, Body body, After after, int bursts,
                              double budget_ms, GapWork gap_work, Around around, double gap_ms) {
    int untimed_calls = 0;   // untimed calls get prepare(-1), prepare(-2), ...: their own inputs
    auto untimed = [&] {
        prepare(-1 - untimed_calls++);
        body();
    };
    for (int i = 0; i < warmup; ++i) untimed();
    std::vector<double> ms;
    const int per_burst = burst_size(runs, bursts);
    double burst_start = now_ms(), timed_ms = 0;
    for (int i = 0; i < runs; ++i) {
        if (i > 0 && i % per_burst == 0) {
            // Re-warming takes about as long as the burst's own calls did, prepare() included; it
            // starts where the gap less its length ends.
            const double rewarm_ms = kRewarmCalls * (now_ms() - burst_start) / per_burst;
            const double rewarm_at = burst_start + gap_ms - rewarm_ms;
            if (rewarm_at - now_ms() >= rewarm_ms) {  // the device would idle longer than re-warming takes
                gap_work(i, rewarm_at);  // runs 0 .. i-1 taken
                pause_ms(rewarm_at - now_ms());
                for (int k = 0; k < kRewarmCalls; ++k) untimed();
            }
            burst_start = now_ms();
        }
        around(i, RunMoment::before_inputs);
        prepare(i);
        around(i, RunMoment::before_clock);
        double t0 = now_ms();
        body();
        double t1 = now_ms();
        around(i, RunMoment::after_clock);
        ms.push_back(t1 - t0);
        timed_ms += t1 - t0;
        const bool last = i == runs - 1 || (i + 1 >= kMinTimedRuns && timed_ms >= budget_ms);
        after(i, last);
        if (last) break;
    }
    return ms;
}

}  // namespace kit
