// wire.h: how the judge and a runner talk (host code only).
//
// The judge (harness/src/judge.cu, inside the checker: no student code) owns the clock, the inputs,
// the outputs and the results. A runner (the student's code, or a library route for the baseline)
// only calls its entry point when told to. They share three things and nothing else:
//   - a socket (SOCK_SEQPACKET) for the few untimed messages and for handing over file descriptors;
//     with SO_PASSCRED on the judge's side, every message carries the real pid of its sender;
//   - the doorbell, one shared page: the judge rings `go` with a call's number and the runner
//     answers in `done` with the same number once its call has returned and its work drained;
//   - the case's arrays, allocated by the judge and mapped into the runner (shared_arrays.h).
// Why a shared page: a pipe round trip between two processes costs 8-48 us, spinning on a shared
// page about 0.1 us, and the shortest graded call (conv1d, w = 7) takes 0.2 ms.
// Nothing the runner says is believed: a "done" only tells the judge when to take the outputs in
// hand, and the clock stops once it has them (see judge.cu).
#pragma once

#include <sched.h>

#include <atomic>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace kit::wire {

// The judge's command, read by the runner after `go` changes.
enum Command : uint32_t { kCall = 1, kEndCase = 2 };

struct Doorbell {
    alignas(64) std::atomic<uint32_t> go;        // the number of the judge's latest command
    alignas(64) std::atomic<uint32_t> command;   // what it is (Command), written before go
    alignas(64) std::atomic<uint32_t> done;      // the number of the runner's latest finished call
    alignas(64) std::atomic<uint32_t> sleeping;  // the runner waits on `go` in the kernel (futex)
};
static_assert(sizeof(Doorbell) <= 4096, "the doorbell is one page");

// Socket messages. Text payloads are one or more lines; at most kMaxText bytes, kMaxFds descriptors.
enum class Kind : uint32_t {
    hello = 1,  // runner -> judge: "runner" (its pid comes with it); judge -> runner: the doorbell fd, "memory=..."
    begin,      // judge -> runner: line 1 the case (plan syntax, no seed), line 2 the arrays' byte sizes; one fd each
    ready,      // runner -> judge: the arrays are mapped
    fault,      // runner -> judge: "launch|runtime CUDA_ERROR_NAME message": its call failed; it exits next
    ended,      // runner -> judge: the case's arrays are unmapped
    bye,        // judge -> runner: no more cases
};
constexpr size_t kMaxText = 1 << 16;
constexpr size_t kMaxFds = 32;

struct Message {
    Kind kind{};
    std::string text;
    std::vector<int> fds;  // received descriptors, owned by the receiver
    int pid = 0;           // the sender's pid, where the receiver asked for credentials
};

struct ProtocolError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

class Channel {
public:
    explicit Channel(int fd) : fd_(fd) {}
    int fd() const { return fd_; }
    // Every message received from now on carries its sender's pid (judge side).
    void want_credentials();
    void send(Kind kind, const std::string& text, const std::vector<int>& fds = {});
    // Waits up to timeout_ms (< 0: for ever). False on timeout; ProtocolError when the other side
    // has gone or sent something malformed.
    bool receive(Message& m, double timeout_ms);
    // True when a message (or the end of the connection) is waiting.
    bool readable();

private:
    int fd_;
};

// A doorbell page: made by the judge (a memfd of one page), mapped by the runner from its fd.
Doorbell* make_doorbell(int& fd);
Doorbell* map_doorbell(int fd);

// Runner side: waits until `go` differs from `last` and returns it. Spins first (the judge is timing),
// then sleeps on the page when the wait is long (the judge is computing the truth on the CPU).
uint32_t wait_for_go(Doorbell* bell, uint32_t last);
// Judge side: rings `go` with command `cmd` and returns its number.
uint32_t ring(Doorbell* bell, Command cmd);

// The calling thread kept on CPUs of its own while it times a run (judge --cpus): pin() moves it there,
// unpin() gives back the CPUs it had when this was made, where its checks between runs use the
// others too (OpenMP threads made then get them). With no CPUs listed both do nothing.
class ThreadCpus {
public:
    explicit ThreadCpus(const std::vector<int>& cpus);
    void pin();
    void unpin();

private:
    bool on_ = false;
    cpu_set_t before_, mine_;
};

// The judge's process cannot be read or written by others of its user: no /proc/PID/mem, fd or
// environ for them, no ptrace. (A runner outside a jail runs as the same user as the judge.)
void seal_process();

// 64 bits from the kernel's random source: a secret the runner cannot predict.
uint64_t random64();

// A pause in a spin-wait, so that the other hyperthread of the core is not starved.
inline void cpu_relax() {
#if defined(__x86_64__)
    __builtin_ia32_pause();
#endif
}

// Milliseconds that thread `pid` (0: the calling thread) has spent runnable but waiting for a CPU
// while another process had it (run_delay in /proc/PID/schedstat), since it started; NaN where the
// system does not say. Read before and after a timed run, it tells a run slowed by other processes
// from one that had the CPU throughout.
double cpu_wait_ms(int pid);
// Milliseconds of CPU that process `pid`'s threads and processes other than its first thread (the
// one serving the judge) have used: from its cgroup where the grader made one for it alone (ended
// threads and children included), else its other threads now alive. NaN where the system does not
// say. A run that waited while these ran was slowed by the program itself.
double others_cpu_ms(int pid);

// The program process `pid` runs (its /proc/PID/exe), "" where it cannot be read.
std::string program_of(int pid);
// Code in process `pid` that no file of the system holds, described in a line ("" when there is
// none): an executable mapping of anonymous memory (the kernel's [vdso] and [vsyscall] aside), of a
// memfd, of a deleted file, or of a file under `writable`, /tmp, /dev/shm or /var/tmp other than
// `program`; a mapping both writable and executable; a file's code with pages the process wrote
// (`program`'s too). That is how a library the grading machine does not offer gets into a process:
// copied into memory from bytes the program carries, written to a file and loaded, under any name,
// or copied over code already there. An honest runner maps code from its own program and the
// system's libraries only, and never writes to it.
std::string foreign_code(int pid, const std::string& program, const std::string& writable);
// What forbidden_library found, and which check found it (the grader words its verdict from `kind`).
struct Forbidden {
    std::string kind;   // "library", "foreign" or "unreadable"; "" when nothing was found
    std::string what;   // the library's file name, or the foreign code's description
};
// The first library whose file name starts with one of `prefixes`, or the first foreign code (above,
// `writable` being the runner's work folder), mapped into process `pid`, into another process of its
// session (what it started) or into a process running its program (what it forked); each process's
// smaps is read once for both. A runner whose map cannot be read (it made itself unreadable) is
// reported as such.
Forbidden forbidden_library(int pid, const std::vector<std::string>& prefixes, const std::string& writable = "");

}  // namespace kit::wire
