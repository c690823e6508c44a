// judge.cu: a runner timed and checked from outside its process.
//
//   checker judge PLAN --socket FD --results FD [--memory host] [--baseline [--route NAME]] [--secret S]
//                 [--record-seeds] [--forbid libcublas,libcufft,...] [--cpus 15]
//
// PLAN is "-" in a grading: the grader writes it to the judge's standard input, so that no file a
// runner (or something it left running) could rewrite stands between the grader and the judge.
//
// For each case of PLAN the judge allocates the arrays and maps them into the runner
// (shared_arrays.h), then for every call:
//   1. fills the inputs from a seed it has just drawn from the kernel's random source, poisons the
//      outputs, flushes L2 and waits until the GPU is idle: the runner cannot know the inputs before
//      they are written, and they are written only now;
//   2. starts its clock and rings the doorbell;
//   3. when the runner answers "done", reads the outputs itself at positions it has drawn (for a
//      timed run: 4096 per output, gathered on the GPU into its own pinned memory), and stops the
//      clock once they are in its hands. A "done" said early does not stop the clock: the GPU
//      time-slices between the two processes, so the judge's read waits for the runner's kernel or
//      sees outputs not yet written, which fail the comparison;
//   4. recomputes the truth of every run from its seed and compares (whole outputs with a library
//      truth on the GPU, in its own copy of them; see truth.h): untimed calls at once, timed runs in
//      the gaps between bursts and after the last, all of them before the next case begins.
// What the round trip itself costs (ringing, the switches between the two processes' GPU contexts,
// the judge's read: ~0.3 ms on an H100) is measured by the grader with an empty call served by the
// checker, a process it trusts, with no runner alive, and taken off every timed run of the
// student and of the library alike. (What a runner can still save: a few microseconds of its own
// launch. A kernel it leaves resident to poll for the inputs gains nothing: while it runs, the judge's
// work waits, its read of the last call's outputs too, which is on the clock (hostile_resident_sum.cu);
// kernels queued one by one never find a moment between the judge's poison and its clock (prepare()).)
// Around each timed run (outside the clock) the judge reads how long its own thread and the runner's
// waited for a CPU that other processes had, and how much CPU the runner's other threads and
// processes used meanwhile (counted before the inputs are written: what that costs is the runner's
// to choose): the grader tells a run slowed by a busy machine from one the program slowed itself
// (performance.py).
// Between cases the judge reads the runner's memory map: a forbidden library mapped is reported, and
// so is code that no file of the system holds (wire::foreign_code: a library copied into memory or
// into the work folder, under any name).
// Where one of the judge's own allocations finds the GPU's memory gone (a runner that took it and
// keeps it), the session ends with an "out_of_memory" record: the runner's verdict, not a kit error.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <deque>
#include <functional>
#include <fstream>
#include <sstream>

#include "hand.h"
#include "judge.h"
#include "truth.h"
#include "wire.h"

namespace kit {

namespace {

using wire::Kind;
using wire::Message;

// The runner's fault, as it reported it: ends the judge's session after it is written down.
struct RunnerFault {
    std::string kind, error, message;
    // From the runner's message "launch|runtime CUDA_ERROR_NAME message".
    static RunnerFault from(const std::string& text) {
        std::istringstream words(text);
        RunnerFault f;
        words >> f.kind >> f.error;
        std::getline(words, f.message);
        return f;
    }
};

// Every seed and every probe position comes from here, drawn when it is needed.
class Secrets {
public:
    Secrets(bool fixed, uint64_t secret) : fixed_(fixed), secret_(secret) {}
    uint64_t draw() { return fixed_ ? hash3(secret_, 0x5EC2E7, n_++) : wire::random64(); }

private:
    bool fixed_;
    uint64_t secret_, n_ = 0;
};

class Judge {
public:
    Judge(const JudgeOptions& o, Problem& p, JsonLines& out)
        : o_(o), p_(p), out_(out), ch_(o.socket), secrets_(o.fixed_secret, o.secret) {
        // Before "ready": the runner's hello may be sent the moment it starts, and only messages sent
        // after this carry their sender's pid.
        ch_.want_credentials();
    }

    void run(const std::vector<Case>& cases) {
        Message m;
        ch_.receive(m, -1);
        if (m.kind != Kind::hello || m.pid <= 0) throw wire::ProtocolError("expected the runner's hello");
        runner_pid_ = m.pid;
        for (int fd : m.fds) close(fd);
        int bell_fd = -1;
        bell_ = wire::make_doorbell(bell_fd);
        ch_.send(Kind::hello, std::string("memory=") + memory_name(o_.memory), {bell_fd});
        close(bell_fd);
        const std::vector<std::string>& routes = p_.libraries();
        if (!o_.route.empty() && std::find(routes.begin(), routes.end(), o_.route) == routes.end())
            throw std::runtime_error("no library route named '" + o_.route + "'");
        for (const Case& c : cases) {
            if (!o_.baseline) {
                // A case's checks are all made, and written, before the next case begins: a runner
                // that hangs there, and is stopped, cannot take an earlier case's verdict along.
                check_pending();
                try {
                    one_case(c, 0);
                } catch (const RunnerFault&) {
                    check_pending();  // the runs taken before the fault still get their verdicts
                    throw;
                } catch (const wire::ProtocolError&) {
                    check_pending();
                    throw;
                }
                continue;
            }
            // Route -1 is an empty call (one empty kernel): what the round trip itself costs, the two
            // switches between the processes' GPU contexts included, for the grader to take off.
            // A grading times only the baseline its score is drawn from (each route timed costs a
            // second or two of bursts); the bench and calibration time them all.
            for (long route = -1; route < (long)routes.size(); ++route)
                if (route < 0 || o_.route.empty() || routes[route] == o_.route) one_case(c, route);
        }
        check_pending();
        ch_.send(Kind::bye, "");
    }

    const Case* current = nullptr;

private:
    void one_case(const Case& c, long route) {
        current = &c;
        out_.begin().field("event", "start").field("case", c.id).end();
        SharedArrays arrays(p_.arrays(c), o_.memory);
        std::string sizes;
        for (size_t b : arrays.bytes) sizes += (sizes.empty() ? "" : ",") + std::to_string(b);
        std::string line = public_line(c) + (o_.baseline ? " route=" + std::to_string(route) : "");
        ch_.send(Kind::begin, line + "\n" + sizes, arrays.fds);
        expect(Kind::ready);
        if (!c.timed) untimed_case(c, arrays);
        else timed_case(c, arrays, route);
        wire::ring(bell_, wire::kEndCase);
        expect(Kind::ended);
        if (!o_.baseline) look_for_libraries(c);
    }

    void untimed_case(const Case& c, SharedArrays& arrays) {
        uint64_t seed = mix64(c.seed ^ secrets_.draw());
        record_seed(c, 0, seed);
        prepare(c, seed, arrays);
        double t0 = now_ms();
        call();
        double ms = now_ms() - t0;
        Outputs o = whole(arrays);
        out_.begin().field("event", "done").field("case", c.id).field("ms", ms).end();
        check_outputs(p_, c, 0, seed, o, out_);
        out_.begin().field("event", "checked").field("case", c.id).end();
    }

    void timed_case(const Case& c, SharedArrays& arrays, long route) {
        Hand hand(arrays, o_.memory);
        std::vector<uint64_t> seeds(c.runs);
        std::vector<Outputs> taken(c.runs);
        Outputs last;
        int current_run = -1;
        auto prep = [&](int i) {
            uint64_t seed = secrets_.draw();
            current_run = i;
            if (i >= 0) {
                seeds[i] = seed;
                record_seed(c, i, seed);
                taken[i].positions = probes(arrays);
                hand.aim(taken[i].positions);
            }
            prepare(c, seed, arrays);
        };
        auto body = [&] {
            call();
            if (current_run >= 0) hand.take();  // the clock stops with the outputs in hand
        };
        auto after = [&](int i, bool final_run) {
            taken[i].got = hand.values();
            if (o_.baseline) return;
            if (final_run) last = whole(arrays);
            pending_.push_back([this, &c, i, seed = seeds[i], o = std::move(taken[i])] {
                check_outputs(p_, c, i, seed, o, out_);
            });
        };
        // Checks made in a gap are written as they are made, then "resumed": the runner's calls are
        // due again (the grader's time limits follow the last record: the judge's own work is not
        // counted against the runner's case limit, and a runner that hangs later is still stopped
        // by it, its wrong outputs so far on record).
        auto in_gap = [&](int, double until_ms) {
            const size_t before = pending_.size();
            check_pending(until_ms);
            if (pending_.size() != before) out_.begin().field("event", "resumed").field("case", c.id).end();
        };
        // Per run: how long the two threads the round trip depends on waited for a CPU (the judge's,
        // this one, and the one that said hello: the runner's, or the checker's serving the library),
        // and how much CPU the rest of that process and what it started used meanwhile (a program that
        // slows its own timing). -1: the system does not say. The runner's other threads are counted
        // before the inputs are written: where it has no cgroup of its own that means one file per
        // thread, as many as it chose to start, and 6000 idle threads made that read take milliseconds
        // in which a kernel it left resident computed the call from the inputs, off the clock
        // (tests/hostile_judge_stall.cu). Between the inputs and the clock only the two waits are read,
        // one file each.
        // From the inputs to the clock's stop this thread is on its own CPUs (--cpus), which the runner
        // does not have: two threads spinning on one CPU wait for each other (grader/cpus.py). Only
        // then: the OpenMP threads of its checks are made on the CPUs it has when they start, and held
        // on one CPU for the whole session, its checks of conv1d's outputs took 0.21 s in place of 0.05.
        std::vector<double> waits, others;
        double wait0 = 0, others0 = 0;
        auto around = [&](int, RunMoment at) {
            if (at == RunMoment::before_inputs) {
                others0 = o_.baseline ? 0 : wire::others_cpu_ms(runner_pid_);
                cpus_.pin();
                return;
            }
            if (at == RunMoment::after_clock) cpus_.unpin();
            const double w = wire::cpu_wait_ms(0) + wire::cpu_wait_ms(runner_pid_);
            if (at == RunMoment::before_clock) {
                wait0 = w;
                return;
            }
            const double o = o_.baseline ? 0 : wire::others_cpu_ms(runner_pid_);
            waits.push_back(std::isfinite(w - wait0) ? w - wait0 : -1);
            others.push_back(std::isfinite(o - others0) ? std::max(0.0, o - others0) : -1);
        };
        // The empty call is taken at its least, which needs no bursts: back to back it costs
        // milliseconds, in bursts as long as the case's own timed runs.
        std::vector<double> ms = time_runs(c.warmup, c.runs, prep, body, after, route < 0 ? 1 : kTimedBursts,
                                           kTimedBudgetMs, in_gap, around, c.gap_ms);
        if (o_.baseline) {
            out_.begin().field("event", route < 0 ? "overhead" : "baseline").field("case", c.id)
                .field("library", route < 0 ? "empty call" : p_.libraries()[route]).field("times_ms", ms)
                .field("wait_ms", waits).end();
            return;
        }
        out_.begin().field("event", "timed").field("case", c.id).field("times_ms", ms).field("wait_ms", waits)
            .field("others_cpu_ms", others).end();
        const int done = (int)ms.size();  // fewer than c.runs where the calls were slow (time_runs)
        pending_.push_back([this, &c, run = done - 1, seed = seeds[done - 1], o = std::move(last)] {
            check_outputs(p_, c, run, seed, o, out_);  // the probe's truth, whole
        });
        pending_.push_back([this, &c] { out_.begin().field("event", "checked").field("case", c.id).end(); });
    }

    // The checks of the case's timed runs not made yet, in order, then its "checked": made in the
    // gaps between its bursts, and what is left once its timing is over (jacobi's 0.1 s calls leave
    // no gaps; its converging case's 30 ms calls leave about a second).
    std::deque<std::function<void()>> pending_;

    // Makes pending checks until `until_ms` (by now_ms()); the last one may end after it (it would
    // take as long later).
    void check_pending(double until_ms = INFINITY) {
        while (!pending_.empty() && now_ms() < until_ms) {
            std::function<void()> next = std::move(pending_.front());
            pending_.pop_front();
            next();
        }
    }

    // Fresh inputs from `seed`, outputs poisoned, caches flushed, the GPU idle, with no wait in between:
    // a runner's kernel queued for an idle moment after the poison would compute the call off the clock
    // (reduce's hostile_flood_sum.cu: 22 of 27 calls so on an H100, with a wait there).
    void prepare(const Case& c, uint64_t seed, Arrays& a) {
        if (o_.memory == Memory::host) {
            fill_inputs_host(c, seed, a);
            poison_outputs_host(a);
            return;
        }
        fill_inputs_device(c, seed, a);
        poison_outputs_device(a);
        flush_l2();
        idle();
    }

    void idle() {
        if (o_.memory != Memory::device) return;
        settle_or_throw("the judge's GPU work");
    }

    // Rings the runner and waits for its "done" (or its fault, or its end).
    void call() {
        const uint32_t n = wire::ring(bell_, wire::kCall);
        for (unsigned i = 1;; ++i) {
            if (bell_->done.load(std::memory_order_acquire) == n) return;
            if ((i & 4095) == 0 && ch_.readable()) {
                Message m;
                ch_.receive(m, 0);  // ProtocolError when the runner has gone
                if (m.kind != Kind::fault) throw wire::ProtocolError("an unexpected message during a call");
                throw RunnerFault::from(m.text);
            }
            wire::cpu_relax();
        }
    }

    void expect(Kind kind) {
        Message m;
        ch_.receive(m, -1);
        for (int fd : m.fds) close(fd);
        if (m.kind == Kind::fault) throw RunnerFault::from(m.text);
        if (m.kind != kind) throw wire::ProtocolError("an unexpected message");
    }

    // Probe positions for every output, drawn now.
    Positions probes(const Arrays& a) {
        Positions p(a.specs.size());
        for (size_t i = 0; i < a.specs.size(); ++i)
            if (is_output(a.specs[i])) p[i] = probe_positions(secrets_.draw(), a.specs[i].count);
        return p;
    }

    // Every output, whole, as the judge read it: on the GPU into arrays of its own there (the runner
    // shares the case's arrays), in host memory into the host.
    Outputs whole(const Arrays& a) {
        Outputs o{Positions(a.specs.size()), std::vector<std::vector<unsigned char>>(a.specs.size()), nullptr};
        if (o_.memory == Memory::device) {
            o.on_device = std::make_shared<DeviceArrays>(only(a.specs, is_output));
            copy_on_device(a, *o.on_device);  // read now, not when the GPU gets to it
            return o;
        }
        for (size_t i = 0; i < a.specs.size(); ++i) {
            const ArraySpec& s = a.specs[i];
            if (!is_output(s)) continue;
            o.got[i].resize(s.count * dtype_size(s.dtype));
            if (!o.got[i].empty()) std::memcpy(o.got[i].data(), a.ptrs[i], o.got[i].size());
        }
        return o;
    }

    void record_seed(const Case& c, int run, uint64_t seed) {
        if (o_.record_seeds)
            out_.begin().field("event", "seed").field("case", c.id).field("run", run).field("seed", std::to_string(seed)).end();
    }

    // The runner's processes, each one's mapped libraries against the forbidden list.
    void look_for_libraries(const Case& c) {
        wire::Forbidden bad = wire::forbidden_library(runner_pid_, o_.forbidden, work_);
        if (bad.kind.empty()) return;
        out_.begin().field("event", "forbidden_library").field("case", c.id).field("kind", bad.kind)
            .field("library", bad.what).end();
        throw Stop{};
    }

public:
    struct Stop {};  // a verdict was written: the session ends here

private:
    const JudgeOptions& o_;
    Problem& p_;
    JsonLines& out_;
    wire::Channel ch_;
    Secrets secrets_;
    wire::Doorbell* bell_ = nullptr;
    int runner_pid_ = 0;
    wire::ThreadCpus cpus_{o_.cpus};                // made on the thread that times, with the CPUs it has
    const std::string work_ = current_folder();   // the runner's work folder, which it can write

    static std::string current_folder() {
        char buf[4096];
        return getcwd(buf, sizeof buf) ? buf : "";
    }
};

}  // namespace

int judge(const JudgeOptions& o) {
    wire::seal_process();
    JsonLines out(o.results);
    std::vector<Case> cases = read_plan(o.plan);
    Problem& p = problem();
    Judge j(o, p, out);
    out.begin().field("event", "ready").end();  // the grader starts the runner: both open the GPU side by side
    size_t free_at_start = 0, total = 0;
    if (o.memory == Memory::device) {
        require_gpu();
        cudaMemGetInfo(&free_at_start, &total);  // before the runner's first call could take any
    }
    // The judge's own allocations (its arrays, the truth, its library's workspace) share the GPU with
    // the runner: one that fails for want of memory ends the session with a record saying so.
    cuda_check_hook = [](cudaError_t err, const char* expr) {
        if (err == cudaErrorMemoryAllocation) throw OutOfMemory(std::string(expr) + ": " + cudaGetErrorString(err));
    };
    try {
        j.run(cases);
    } catch (const OutOfMemory& e) {
        size_t free = 0;
        if (o.memory == Memory::device && cudaMemGetInfo(&free, &total) != cudaSuccess) free = 0;
        out.begin().field("event", "out_of_memory").field("case", j.current ? j.current->id : "")
            .field("what", e.what()).field("free_bytes", (long long)free).field("total_bytes", (long long)total)
            .field("free_at_start_bytes", (long long)free_at_start).end();
    } catch (const RunnerFault& f) {
        out.begin().field("event", f.kind == "launch" ? "launch_error" : "runtime_error")
            .field("case", j.current ? j.current->id : "").field("cuda_error", f.error)
            .field("message", f.message.empty() ? f.message : f.message.substr(1)).end();
    } catch (const wire::ProtocolError& e) {
        out.begin().field("event", "runner_gone").field("case", j.current ? j.current->id : "")
            .field("message", e.what()).end();
    } catch (const Judge::Stop&) {
    }
    return kExitOk;
}

}  // namespace kit
