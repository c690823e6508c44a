// Host tests of the harness: seeded generation, plans, probes and the comparison rules.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>

#include <atomic>
#include <chrono>
#include <thread>

#include <csignal>
#include <sched.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "wire.h"

using namespace kit;

namespace {
const auto nothing_protected = [](size_t) { return false; };

double poison64() {
    double p;
    std::memcpy(&p, &kPoison64, 8);
    return p;
}
}  // namespace

TEST_CASE("the same seed, stream and index always give the same value, and other seeds other values") {
    CHECK(uniform01(42, 0, 7) == uniform01(42, 0, 7));
    CHECK(uniform01(42, 0, 7) != uniform01(43, 0, 7));
    CHECK(uniform01(42, 0, 7) != uniform01(42, 1, 7));
    CHECK(uniform01(42, 0, 7) != uniform01(42, 0, 8));
}

TEST_CASE("uniform inputs fill [lo, hi) with no zeros and a mean near the middle") {
    Fill f;  // uniform in [-1, 1)
    double sum = 0;
    int zeros = 0;
    const int n = 100000;
    for (int i = 0; i < n; ++i) {
        double v = fill_value(f, 2026, 3, i);
        REQUIRE(v >= -1.0);
        REQUIRE(v < 1.0);
        zeros += v == 0.0;
        sum += v;
    }
    CHECK(zeros == 0);
    CHECK(std::fabs(sum / n) < 0.01);
}

TEST_CASE("integer fills give whole numbers between lo and hi inclusive") {
    Fill f{Fill::integers, -3, 3};
    bool seen_lo = false, seen_hi = false;
    for (int i = 0; i < 10000; ++i) {
        double v = fill_value(f, 9, 0, i);
        REQUIRE(v == std::floor(v));
        REQUIRE(v >= -3);
        REQUIRE(v <= 3);
        seen_lo |= v == -3;
        seen_hi |= v == 3;
    }
    CHECK(seen_lo);
    CHECK(seen_hi);
}

TEST_CASE("what the judge tells a runner about a case parses back to its id and sizes, without its seed") {
    Case c = parse_case("timed id=n4096 seed=987654321 rtol=1e-10 reference=library warmup=2 runs=10 n=4096 tol=0.25", "test");
    std::string told = public_line(c);
    CHECK(told.find("987654321") == std::string::npos);
    CHECK(told.find("seed") == std::string::npos);
    Case back = parse_case(told, "told");
    CHECK(back.id == "n4096");
    CHECK_FALSE(back.timed);
    CHECK(back.seed == 0);
    CHECK(back.get("n") == 4096);
    CHECK(back.real("tol") == 0.25);
}

TEST_CASE("a message carries its text, its file descriptors and its sender's pid") {
    int sv[2];
    REQUIRE(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv) == 0);
    wire::Channel judge(sv[0]), runner(sv[1]);
    judge.want_credentials();
    int p[2];
    REQUIRE(pipe(p) == 0);
    runner.send(wire::Kind::hello, "runner", {p[1]});
    wire::Message m;
    REQUIRE(judge.receive(m, 1000));
    CHECK(m.kind == wire::Kind::hello);
    CHECK(m.text == "runner");
    CHECK(m.pid == getpid());
    REQUIRE(m.fds.size() == 1);
    CHECK(write(m.fds[0], "x", 1) == 1);  // the same pipe, passed on
    char c = 0;
    CHECK(read(p[0], &c, 1) == 1);
    CHECK(c == 'x');
    for (int fd : {m.fds[0], p[0], p[1], sv[1]}) close(fd);
    CHECK_THROWS_AS(judge.receive(m, 1000), wire::ProtocolError);  // the runner's end is closed: it has gone
    close(sv[0]);
}

TEST_CASE("a message that is not the wire's is refused") {
    int sv[2];
    REQUIRE(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv) == 0);
    wire::Channel judge(sv[0]);
    CHECK(write(sv[1], "{\"event\": \"timed\"}", 18) == 18);
    wire::Message m;
    CHECK_THROWS_AS(judge.receive(m, 1000), wire::ProtocolError);
    close(sv[0]);
    close(sv[1]);
}

TEST_CASE("the judge's scan of the runner's session goes on while other processes come and go") {
    // A process that ends between the scan opening its /proc files and reading them must not end the
    // judge: a runner (or a build beside it) can start and end processes as fast as it likes. The scan
    // runs in a child with a session of its own, as the runner has one: the processes of this test's
    // session (a shell, make, a CI runner) are not the scan's business.
    pid_t scanner = fork();
    REQUIRE(scanner >= 0);
    if (scanner == 0) {
        setsid();
        std::atomic<bool> stop{false};
        std::thread churn([&] {
            while (!stop) {
                pid_t c = fork();
                if (c == 0) _exit(0);
                if (c > 0) waitpid(c, nullptr, 0);
            }
        });
        int scans = 0, found = 0;
        for (auto end = std::chrono::steady_clock::now() + std::chrono::seconds(2);
             std::chrono::steady_clock::now() < end; scans++)
            found += !wire::forbidden_library(getpid(), {"libnothing_by_this_name"}).kind.empty();
        stop = true;
        churn.join();
        _exit(scans > 0 && found == 0 ? 0 : 1);
    }
    int status = 0;
    REQUIRE(waitpid(scanner, &status, 0) == scanner);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("code mapped from anonymous memory, a memfd, a deleted file or a writable folder is foreign; the program's own is not") {
    // How a library the machine does not offer gets into a runner: its bytes, carried in the program,
    // copied into memory or into the work folder and mapped, under any name (the judge looks between
    // cases: wire::forbidden_library).
    const std::string me = wire::program_of(getpid());
    REQUIRE(!me.empty());
    const std::string my_folder = me.substr(0, me.rfind('/'));
    CHECK(wire::foreign_code(getpid(), me, my_folder) == "");   // this program, in a folder it may write

    void* page = mmap(nullptr, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(page != MAP_FAILED);
    CHECK_THAT(wire::foreign_code(getpid(), me, ""), Catch::Contains("anonymous memory"));
    munmap(page, 4096);
    CHECK(wire::foreign_code(getpid(), me, my_folder) == "");

    const int fd = memfd_create("kit_test_code", 0);
    REQUIRE(fd >= 0);
    REQUIRE(ftruncate(fd, 4096) == 0);
    page = mmap(nullptr, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
    if (page == MAP_FAILED) {
        WARN("this kernel refuses executable memfd mappings (vm.memfd_noexec): nothing to find there");
    } else {
        CHECK_THAT(wire::foreign_code(getpid(), me, ""), Catch::Contains("/memfd:kit_test_code") && Catch::Contains("from memory"));
        munmap(page, 4096);
    }
    close(fd);

    // A file in a folder the program may write, mapped, then deleted while mapped.
    char folder[] = "kit_test_code_XXXXXX";
    REQUIRE(mkdtemp(folder) != nullptr);
    char here[4096];
    REQUIRE(getcwd(here, sizeof here) != nullptr);
    const std::string writable = std::string(here) + "/" + folder, file = writable + "/k";
    const int f = open(file.c_str(), O_RDWR | O_CREAT, 0600);
    REQUIRE(f >= 0);
    REQUIRE(ftruncate(f, 4096) == 0);
    page = mmap(nullptr, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, f, 0);
    close(f);
    if (page == MAP_FAILED) {
        WARN("this folder's file system refuses executable mappings (noexec): nothing to find there");
    } else {
        CHECK_THAT(wire::foreign_code(getpid(), me, writable), Catch::Contains(file) && Catch::Contains("could write"));
        unlink(file.c_str());
        CHECK_THAT(wire::foreign_code(getpid(), me, ""), Catch::Contains("deleted since"));
        munmap(page, 4096);
    }
    unlink(file.c_str());
    rmdir(folder);
    CHECK(wire::foreign_code(getpid(), me, my_folder) == "");
}

__attribute__((noinline)) int some_code() { return 42; }

TEST_CASE("code made writable, or written to once loaded, is foreign, in the program's own file too") {
    // Bytes carried in the program could be copied over code already mapped (its own, or a system
    // library's), where no new mapping shows. Done in a child: the page stays changed for its life.
    pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        const std::string me = wire::program_of(getpid());
        const long size = sysconf(_SC_PAGESIZE);
        volatile char* page = reinterpret_cast<char*>(reinterpret_cast<uintptr_t>(&some_code) & ~uintptr_t(size - 1));
        int wrong = wire::foreign_code(getpid(), me, "") != "" ? 1 : 0;
        if (mprotect((void*)page, size, PROT_READ | PROT_WRITE | PROT_EXEC) != 0) _exit(100);
        if (wire::foreign_code(getpid(), me, "").find("writable and executable") == std::string::npos) wrong |= 2;
        page[0] = page[0];   // the same byte: the page is now the process's own copy
        mprotect((void*)page, size, PROT_READ | PROT_EXEC);
        if (wire::foreign_code(getpid(), me, "").find("changed in memory") == std::string::npos) wrong |= 4;
        _exit(wrong + (some_code() == 42 ? 0 : 8));
    }
    int status = 0;
    REQUIRE(waitpid(child, &status, 0) == child);
    REQUIRE(WIFEXITED(status));
    if (WEXITSTATUS(status) == 100) {
        WARN("this system refuses to make code writable (mprotect): nothing to find there");
        return;
    }
    INFO("1: found before any change, 2: writable code not found, 4: changed code not found");
    CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("the judging thread is on its own CPUs while it times a run, and on all it had between runs") {
    // The grader gives the judge a CPU (--cpus) that the runner does not have; between runs the
    // judge's checks use the rest, its OpenMP threads too.
    auto cpus_of_thread = [] {
        cpu_set_t set;
        REQUIRE(sched_getaffinity(0, sizeof set, &set) == 0);
        std::vector<int> out;
        for (int c = 0; c < CPU_SETSIZE; ++c)
            if (CPU_ISSET(c, &set)) out.push_back(c);
        return out;
    };
    const std::vector<int> all = cpus_of_thread();
    std::thread([&] {  // a thread of its own: the test's own CPUs are left as they were
        wire::ThreadCpus judging({all.back()});
        judging.pin();
        CHECK(cpus_of_thread() == std::vector<int>{all.back()});
        judging.unpin();
        CHECK(cpus_of_thread() == all);
        wire::ThreadCpus none({});
        none.pin();
        CHECK(cpus_of_thread() == all);
    }).join();
}

TEST_CASE("a thread that shares its CPU with a busy process is seen waiting for it") {
    // The judge reads these waits around every timed run: a run slowed by other processes on the
    // machine is told from one that had the CPU throughout.
    if (std::isnan(wire::cpu_wait_ms(0))) {
        WARN("this kernel keeps no /proc/PID/schedstat: the judge cannot tell a disturbed run");
        return;
    }
    CHECK(std::isnan(wire::cpu_wait_ms(-1)));
    cpu_set_t all, one;
    REQUIRE(sched_getaffinity(0, sizeof all, &all) == 0);
    int cpu = 0;
    while (!CPU_ISSET(cpu, &all)) ++cpu;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    REQUIRE(sched_setaffinity(0, sizeof one, &one) == 0);  // this thread, and a child forked from it
    auto spin_ms = [](double ms) {
        for (double end = now_ms() + ms; now_ms() < end;) wire::cpu_relax();
    };
    spin_ms(20);
    double alone = wire::cpu_wait_ms(0);
    spin_ms(200);
    alone = wire::cpu_wait_ms(0) - alone;

    pid_t busy = fork();
    if (busy == 0) {
        for (double end = now_ms() + 2000; now_ms() < end;) wire::cpu_relax();
        _exit(0);
    }
    REQUIRE(busy > 0);
    double shared = wire::cpu_wait_ms(0);
    spin_ms(200);
    shared = wire::cpu_wait_ms(0) - shared;
    const double child = wire::cpu_wait_ms(busy);
    kill(busy, SIGKILL);
    waitpid(busy, nullptr, 0);
    REQUIRE(sched_setaffinity(0, sizeof all, &all) == 0);
    // 200 ms beside a spinning process on one CPU: about half of it waiting, on top of whatever the
    // machine's other work made it wait alone (next to nothing on an idle machine).
    CHECK(shared > alone + 40);
    CHECK(child >= 0);    // another process's wait reads as well
}

TEST_CASE("the CPU a program's other threads use is told apart from its first thread's") {
    // A run that waited for a CPU while the program's own other threads ran was slowed by the program
    // itself: the judge does not take such a timing again.
    const double start = wire::others_cpu_ms(getpid());
    if (std::isnan(start)) {
        WARN("this kernel keeps no /proc/PID/schedstat");
        return;
    }
    for (double end = now_ms() + 100; now_ms() < end;) wire::cpu_relax();  // the first thread only
    const double first_only = wire::others_cpu_ms(getpid()) - start;
    std::atomic<bool> stop{false};
    std::thread spinner([&] {
        while (!stop) wire::cpu_relax();
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    const double with_spinner = wire::others_cpu_ms(getpid()) - start;
    stop = true;
    spinner.join();
    CHECK(first_only < 10);
    CHECK(with_spinner > 100);
}

TEST_CASE("the doorbell wakes a runner that waits, spinning or asleep, with the judge's command") {
    int fd = -1;
    wire::Doorbell* bell = wire::make_doorbell(fd);
    CHECK(bell->go.load() == 0);
    for (int delay_ms : {0, 60}) {  // 60 ms: past the spinning, the runner sleeps on the page
        uint32_t last = bell->go.load();
        std::thread judge([&] {
            std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
            wire::ring(bell, wire::kCall);
        });
        uint32_t n = wire::wait_for_go(bell, last);
        judge.join();
        CHECK(n == last + 1);
        CHECK(bell->command.load() == wire::kCall);
    }
    close(fd);
}

TEST_CASE("timed runs come in at most five bursts, all full but the last") {
    auto bursts = [](int runs) {
        std::vector<int> sizes;
        for (int i = 0; i < runs; ++i) {
            if (i % burst_size(runs) == 0) sizes.push_back(0);
            ++sizes.back();
        }
        return sizes;
    };
    CHECK(bursts(20) == std::vector<int>{4, 4, 4, 4, 4});
    CHECK(bursts(10) == std::vector<int>{2, 2, 2, 2, 2});
    CHECK(bursts(11) == std::vector<int>{3, 3, 3, 2});
    CHECK(bursts(21) == std::vector<int>{5, 5, 5, 5, 1});
    CHECK(bursts(3) == std::vector<int>{1, 1, 1});
    CHECK(bursts(1) == std::vector<int>{1});
}

TEST_CASE("runs asked for in one burst are taken back to back") {
    for (int runs : {1, 10, 20}) CHECK(burst_size(runs, 1) == runs);
    int calls = 0;
    double t0 = now_ms();
    std::vector<int> lasts;
    auto ms = time_runs(1, 10, [](int) {}, [&] { ++calls; }, [&](int i, bool last) { if (last) lasts.push_back(i); }, 1);
    CHECK(ms.size() == 10);
    CHECK(calls == 11);
    CHECK(lasts == std::vector<int>{9});
    CHECK(now_ms() - t0 < kBurstGapMs);  // no pause between bursts
}

TEST_CASE("short calls idle out the gap between bursts after the caller's gap work, then take two untimed calls") {
    int calls = 0;
    std::vector<int> gaps;
    std::vector<double> starts;  // when each burst's first timed call began
    auto prepare = [&](int i) { if (i >= 0 && i % 2 == 0) starts.push_back(now_ms()); };
    double t0 = now_ms(), until = 0;
    auto ms = time_runs(0, 4, prepare, [&] { ++calls; }, [](int, bool) {}, 2, kTimedBudgetMs,
                        [&](int taken, double until_ms) { gaps.push_back(taken), until = until_ms; });
    CHECK(ms.size() == 4);
    CHECK(gaps == std::vector<int>{2});  // once, with runs 0 and 1 taken
    CHECK(until > t0);
    CHECK(until <= t0 + kBurstGapMs + 50);  // its work to be done before the gap would end
    CHECK(calls == 4 + kRewarmCalls);
    REQUIRE(starts.size() == 2);
    CHECK(starts[1] - starts[0] >= kBurstGapMs);
}

TEST_CASE("a plan's shorter gap spaces the bursts by it, with the same gap work and re-warming calls") {
    Case c = parse_case("timed id=n4096 seed=1 rtol=1e-10 reference=library warmup=2 runs=10 gap_ms=60 n=4096", "test");
    CHECK(c.gap_ms == 60);
    CHECK(parse_case("timed id=n4096 seed=1 rtol=1e-10 reference=library runs=10 n=4096", "test").gap_ms == kBurstGapMs);
    CHECK_THROWS_WITH(parse_case("timed id=a seed=1 rtol=0 reference=cpu runs=10 gap_ms=-1", "plan:3"),
                      Catch::Contains("plan:3: gap_ms must be 0 or more"));
    int calls = 0, gaps = 0;
    std::vector<double> starts;
    auto prepare = [&](int i) { if (i >= 0 && i % 2 == 0) starts.push_back(now_ms()); };
    auto ms = time_runs(0, 6, prepare, [&] { ++calls; }, [](int, bool) {}, 3, kTimedBudgetMs,
                        [&](int, double) { ++gaps; }, NoAround{}, c.gap_ms);
    CHECK(ms.size() == 6);
    CHECK(gaps == 2);
    CHECK(calls == 6 + 2 * kRewarmCalls);
    REQUIRE(starts.size() == 3);
    for (int b : {1, 2}) {
        CHECK(starts[b] - starts[b - 1] >= c.gap_ms);
        CHECK(starts[b] - starts[b - 1] < kBurstGapMs / 2);
    }
}

TEST_CASE("what may take long is read before a run's inputs are written, never between them and the clock") {
    // The judge counts the runner's other threads at before_inputs: one file per thread where the
    // runner has no cgroup, so it costs what the runner chooses (tests/hostile_judge_stall.cu).
    std::vector<std::string> order;
    auto prepare = [&](int i) { if (i >= 0) order.push_back("inputs " + std::to_string(i)); };
    auto around = [&](int i, RunMoment at) {
        const char* name = at == RunMoment::before_inputs ? "before inputs " :
                           at == RunMoment::before_clock ? "before clock " : "after clock ";
        order.push_back(name + std::to_string(i));
    };
    time_runs(1, 2, prepare, [&] { order.push_back("call"); }, [](int, bool) {}, 1, kTimedBudgetMs, NoGapWork{}, around);
    CHECK(order == std::vector<std::string>{"call",  // the warm-up: no hooks
                                            "before inputs 0", "inputs 0", "before clock 0", "call", "after clock 0",
                                            "before inputs 1", "inputs 1", "before clock 1", "call", "after clock 1"});
}

TEST_CASE("calls so long that the device would idle for less than their re-warming takes follow each other with no pause") {
    // A burst of two and two re-warming calls: 4/3.5 of the gap (no idle at all), or 4/5 of it (jacobi
    // at n = 512 on an H200: 85 ms calls, an idle of 400 - 4 x 85 = 60 ms, and two more calls after it).
    for (double call_ms : {kBurstGapMs / 3.5, kBurstGapMs / 5}) {
        int calls = 0, gaps = 0;
        double t0 = now_ms();
        auto ms = time_runs(0, 4, [](int) {}, [&] { ++calls; pause_ms(call_ms); }, [](int, bool) {}, 2, kTimedBudgetMs,
                            [&](int, double) { ++gaps; });
        double took = now_ms() - t0;
        CAPTURE(call_ms);
        CHECK(ms.size() == 4);
        CHECK(calls == 4);  // no untimed calls
        CHECK(gaps == 0);
        CHECK(took < 4 * call_ms + 50);
    }
}

TEST_CASE("slow calls stop being timed once they fill the budget, after at least three runs") {
    std::vector<int> lasts;
    auto after = [&](int i, bool last) { if (last) lasts.push_back(i); };
    // 20 ms calls against a 50 ms budget: the third run brings 60 ms, and it is the last.
    auto ms = time_runs(1, 10, [](int) {}, [] { pause_ms(20); }, after, 1, 50);
    CHECK(ms.size() == 3);
    CHECK(lasts == std::vector<int>{2});
    // Calls that fill the budget at once still get kMinTimedRuns runs.
    lasts.clear();
    ms = time_runs(0, 10, [](int) {}, [] { pause_ms(20); }, after, 1, 1);
    CHECK(ms.size() == (size_t)kMinTimedRuns);
    // Calls that never fill it get every run asked for.
    lasts.clear();
    ms = time_runs(0, 10, [](int) {}, [] {}, after, 1, 50);
    CHECK(ms.size() == 10);
    CHECK(lasts == std::vector<int>{9});
}

TEST_CASE("a check keeps its masks of protected elements while every parameter of the case stays the same") {
    struct Plain : Problem {
        const char* name() const override { return "plain"; }
        std::vector<ArraySpec> arrays(const Case&) const override { return {}; }
    } p;
    Case a, b, c;
    a.id = "first";
    a.params = {{"n", 512}, {"tol", 1e-10}};
    b.id = "second";
    b.params = a.params;
    c.id = "first";
    c.params = {{"n", 512}, {"tol", 1.0000000000000002e-10}};
    CHECK(p.protected_key(a) == p.protected_key(b));  // the case's name never changes what is protected
    CHECK(p.protected_key(a) != p.protected_key(c));  // any parameter may, to the last bit
}

TEST_CASE("host generation fills inputs and leaves pure outputs alone") {
    Case c;
    std::vector<ArraySpec> specs = {{"x", DType::f64, 10, Role::in}, {"y", DType::f32, 10, Role::out}};
    HostArrays h(specs);
    std::memset(h.ptrs[1], 0x11, 40);
    fill_inputs_host(c, 7, h);
    for (int i = 0; i < 10; ++i) CHECK(h.f64("x")[i] == fill_value(Fill{}, 7, 0, i));
    unsigned char* y = (unsigned char*)h.ptrs[1];
    for (int i = 0; i < 40; ++i) CHECK(y[i] == 0x11);
}

TEST_CASE("host arrays for outputs only leave pure inputs unallocated") {
    std::vector<ArraySpec> specs = {{"x", DType::f64, 1 << 20, Role::in},
                                    {"b", DType::f64, 10, Role::inout},
                                    {"y", DType::f32, 10, Role::out}};
    HostArrays h(specs, true);
    CHECK(h.raw("x") == nullptr);
    CHECK(h.storage[0].empty());
    CHECK(h.storage[1].size() == 80);
    CHECK(h.storage[2].size() == 40);
}

TEST_CASE("probe positions are inside the array and repeat for the same seed") {
    auto a = probe_positions(5, 1000), b = probe_positions(5, 1000), c = probe_positions(6, 1000);
    REQUIRE(a.size() == (size_t)kProbeCount);
    CHECK(a == b);
    CHECK(a != c);
    for (size_t p : a) CHECK(p < 1000);
    CHECK(probe_positions(5, 0).empty());
}

TEST_CASE("a plan file gives cases with their seeds, tolerances and parameters") {
    const char* path = "/tmp/kit_test_plan.txt";
    {
        std::ofstream f(path);
        f << "# comment\n"
          << "case id=n17 seed=123 rtol=1e-10 reference=cpu n=17\n"
          << "timed id=big seed=18446744073709551615 rtol=1e-09 reference=library warmup=2 runs=10 m=5 n=7\n";
    }
    auto cases = read_plan(path);
    REQUIRE(cases.size() == 2);
    CHECK(cases[0].id == "n17");
    CHECK(cases[0].seed == 123);
    CHECK(cases[0].get("n") == 17);
    CHECK_FALSE(cases[0].timed);
    CHECK(cases[1].timed);
    CHECK(cases[1].seed == 18446744073709551615ull);
    CHECK(cases[1].runs == 10);
    CHECK(cases[1].reference == "library");
    CHECK(cases[1].get("m") * cases[1].get("n") == 35);
    CHECK_THROWS_WITH(cases[0].get("k"), Catch::Contains("no parameter 'k'"));
}

TEST_CASE("a plan's real parameter reads as a real, and as an integer only when it is whole") {
    const char* path = "/tmp/kit_test_real_plan.txt";
    {
        std::ofstream f(path);
        f << "case id=c seed=1 rtol=1e-10 reference=cpu n=512 tol=150.5 noise=0.001\n";
    }
    auto cases = read_plan(path);
    REQUIRE(cases.size() == 1);
    CHECK(cases[0].tol == 1e-10);
    CHECK(cases[0].real("tol") == 150.5);
    CHECK(cases[0].real("noise") == 0.001);
    CHECK(cases[0].get("n") == 512);
    CHECK_THROWS_WITH(cases[0].get("tol"), Catch::Contains("must be an integer"));
}

TEST_CASE("a malformed plan line is an error that names the file and line") {
    const char* path = "/tmp/kit_test_bad_plan.txt";
    {
        std::ofstream f(path);
        f << "case id=a seed=1 n=3\n"
          << "case id=b seed=x n=3\n";
    }
    CHECK_THROWS_WITH(read_plan(path), Catch::Contains("kit_test_bad_plan.txt:2"));
}

TEST_CASE("an output equal to the truth passes, one off by more than the tolerance fails") {
    ArraySpec s{"C", DType::f64, 4, Role::out};
    std::vector<double> in(4, 0), want = {1, 2, 3, 4}, got = want;
    CHECK(compare_array(s, in.data(), want.data(), got.data(), {}, 1e-10, nothing_protected).pass);
    got[2] = 3 + 1e-6;
    Comparison c = compare_array(s, in.data(), want.data(), got.data(), {}, 1e-10, nothing_protected);
    CHECK_FALSE(c.pass);
    CHECK(c.worst_index == 2);
    CHECK(c.rel_error == Approx(1e-6 / std::sqrt(30.0)).epsilon(1e-6));
}

TEST_CASE("NaN never passes, whatever the tolerance") {
    ArraySpec s{"C", DType::f64, 3, Role::out};
    std::vector<double> in(3, 0), want = {1, 2, 3}, got = {1, std::numeric_limits<double>::quiet_NaN(), 3};
    Comparison c = compare_array(s, in.data(), want.data(), got.data(), {}, 1e300, nothing_protected);
    CHECK_FALSE(c.pass);
    CHECK(c.nonfinite == 1);
}

TEST_CASE("elements still holding the poison count as never written") {
    ArraySpec s{"C", DType::f64, 3, Role::out};
    std::vector<double> in(3, 0), want = {1, 2, 3}, got = {1, poison64(), poison64()};
    Comparison c = compare_array(s, in.data(), want.data(), got.data(), {}, 1e-10, nothing_protected);
    CHECK_FALSE(c.pass);
    CHECK(c.unwritten == 2);
    CHECK(c.nonfinite == 0);
}

TEST_CASE("an in-place output left equal to its input counts as never written") {
    ArraySpec s{"B", DType::f64, 3, Role::inout};
    std::vector<double> in = {1, 2, 3}, want = {2, 4, 6}, got = in;
    Comparison c = compare_array(s, in.data(), want.data(), got.data(), {}, 1e-10, nothing_protected);
    CHECK_FALSE(c.pass);
    CHECK(c.unwritten == 3);
}

TEST_CASE("a change in a protected region fails even when it is tiny") {
    ArraySpec s{"C", DType::f64, 4, Role::inout};
    std::vector<double> in = {1, 2, 3, 4}, want = {1, 5, 3, 4}, got = want;
    auto lower = [](size_t i) { return i >= 2; };
    CHECK(compare_array(s, in.data(), want.data(), got.data(), {}, 1e-10, lower).pass);
    got[3] = std::nextafter(4.0, 5.0);
    Comparison c = compare_array(s, in.data(), want.data(), got.data(), {}, 1e-10, lower);
    CHECK_FALSE(c.pass);
    CHECK(c.protected_count == 2);
    CHECK(c.protected_changed == 1);
}

TEST_CASE("probes compare only the handed-over positions, and report the real index") {
    ArraySpec s{"C", DType::f32, 100, Role::out};
    std::vector<size_t> pos = {5, 50, 99};
    std::vector<float> in(3, 0), want = {6, 51, 100}, got = {6, 51, 0};
    Comparison c = compare_array(s, in.data(), want.data(), got.data(), pos, 1e-5, nothing_protected);
    CHECK(c.compared == 3);
    CHECK_FALSE(c.pass);
    CHECK(c.worst_index == 99);
}

TEST_CASE("a whole array of millions of elements, compared in parallel chunks, counts and finds as one pass would") {
    const size_t n = (size_t(1) << 22) + 12345;  // four full chunks and a partial one
    ArraySpec s{"u", DType::f64, n, Role::inout};
    std::vector<double> in(n, 1.0), want(n, 2.0), got(n, 2.0);
    auto walls = [n](size_t i) { return i < 1000 || i >= n - 1000; };
    for (size_t i = 0; i < n; ++i)
        if (walls(i)) want[i] = got[i] = in[i];
    got[3 << 20] = 2.5;                // the same error in the fourth chunk ...
    got[(1 << 20) + 7] = 2.5;          // ... and in the second: the first in index order is the worst
    got[(2 << 20) + 1] = got[2 << 20] = 1.0;  // left as the input: never written
    got[n - 1] = 7.0;                  // a wall changed, in the last chunk
    Comparison c = compare_array(s, in.data(), want.data(), got.data(), {}, 1e-3, walls);
    CHECK(c.compared == n);
    CHECK(c.protected_count == 2000);
    CHECK(c.protected_changed == 1);
    CHECK(c.unwritten == 2);
    CHECK(c.worst_index == (long long)(1 << 20) + 7);
    CHECK(c.worst_got == 2.5);
    const double interior = double(n - 2000 - 2);  // every written interior element wants 2
    CHECK(c.rel_error == Approx(std::sqrt(2 * 0.25 / (4 * interior))).epsilon(1e-9));
    CHECK_FALSE(c.pass);
}
