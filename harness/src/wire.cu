// wire.cu: the judge's and the runner's channel (see wire.h). Host code only.
#include <dirent.h>
#include <fcntl.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <set>
#include <sstream>

#include <linux/futex.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "kit.cuh"
#include "wire.h"

namespace kit::wire {

namespace {

struct Header {
    uint32_t magic;
    Kind kind;
};
constexpr uint32_t kMagic = 0x4B495431;  // "KIT1"

[[noreturn]] void fail(const std::string& what) { throw ProtocolError(what); }

int futex(std::atomic<uint32_t>* addr, int op, uint32_t val, const timespec* timeout) {
    return (int)syscall(SYS_futex, reinterpret_cast<uint32_t*>(addr), op, val, timeout, nullptr, 0);
}

}  // namespace

void Channel::want_credentials() {
    int on = 1;
    if (setsockopt(fd_, SOL_SOCKET, SO_PASSCRED, &on, sizeof on) != 0) fail(std::string("SO_PASSCRED: ") + strerror(errno));
}

void Channel::send(Kind kind, const std::string& text, const std::vector<int>& fds) {
    if (text.size() > kMaxText || fds.size() > kMaxFds) fail("message too large");
    Header h{kMagic, kind};
    std::string buf(reinterpret_cast<const char*>(&h), sizeof h);
    buf += text;
    iovec iov{buf.data(), buf.size()};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    std::vector<char> control(CMSG_SPACE(sizeof(int) * kMaxFds));
    if (!fds.empty()) {
        msg.msg_control = control.data();
        msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
        cmsghdr* c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
        std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
    }
    ssize_t n;
    do n = sendmsg(fd_, &msg, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    if (n != (ssize_t)buf.size()) fail(std::string("the other side has gone (send: ") + strerror(errno) + ")");
}

bool Channel::readable() {
    pollfd p{fd_, POLLIN, 0};
    return poll(&p, 1, 0) > 0;
}

bool Channel::receive(Message& m, double timeout_ms) {
    pollfd p{fd_, POLLIN, 0};
    int r;
    do r = poll(&p, 1, timeout_ms < 0 ? -1 : (int)(timeout_ms + 0.999));
    while (r < 0 && errno == EINTR);
    if (r == 0) return false;
    std::vector<char> buf(sizeof(Header) + kMaxText + 1);
    iovec iov{buf.data(), buf.size()};
    std::vector<char> control(CMSG_SPACE(sizeof(int) * kMaxFds) + CMSG_SPACE(sizeof(ucred)));
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.data();
    msg.msg_controllen = control.size();
    ssize_t n;
    do n = recvmsg(fd_, &msg, MSG_CMSG_CLOEXEC);
    while (n < 0 && errno == EINTR);
    m = Message{};
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
            size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
            m.fds.resize(count);
            std::memcpy(m.fds.data(), CMSG_DATA(c), count * sizeof(int));
        } else if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS) {
            ucred cred;
            std::memcpy(&cred, CMSG_DATA(c), sizeof cred);
            m.pid = cred.pid;
        }
    }
    auto drop_fds = [&] {
        for (int fd : m.fds) close(fd);
        m.fds.clear();
    };
    if (n == 0) fail("the other side has gone");
    if (n < 0) fail(std::string("receive: ") + strerror(errno));
    if ((msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) || n < (ssize_t)sizeof(Header)) {
        drop_fds();
        fail("a malformed message");
    }
    Header h;
    std::memcpy(&h, buf.data(), sizeof h);
    if (h.magic != kMagic || (uint32_t)h.kind < (uint32_t)Kind::hello || (uint32_t)h.kind > (uint32_t)Kind::bye) {
        drop_fds();
        fail("a malformed message");
    }
    m.kind = h.kind;
    m.text.assign(buf.data() + sizeof h, (size_t)n - sizeof h);
    return true;
}

Doorbell* make_doorbell(int& fd) {
    // Sealed at its size before the runner gets it: a runner that kept the descriptor could otherwise
    // truncate the page and kill the judge, which spins on it, with SIGBUS (the kit's failure, not a
    // verdict). Writes stay open: both sides ring it.
    fd = memfd_create("kit-doorbell", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0 || ftruncate(fd, 4096) != 0 || fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0)
        fail(std::string("memfd: ") + strerror(errno));
    return map_doorbell(fd);
}

Doorbell* map_doorbell(int fd) {
    void* p = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) fail(std::string("cannot map the doorbell: ") + strerror(errno));
    return static_cast<Doorbell*>(p);  // a fresh memfd is zero-filled: every field starts at 0
}

uint32_t wait_for_go(Doorbell* bell, uint32_t last) {
    // Spin ~20 ms (the judge times calls right after ringing), then sleep in the kernel.
    const double spin_until = now_ms() + 20;
    for (unsigned i = 0;; ++i) {
        uint32_t g = bell->go.load(std::memory_order_acquire);
        if (g != last) return g;
        if ((i & 1023) == 1023 && now_ms() > spin_until) break;
        cpu_relax();
    }
    for (;;) {
        bell->sleeping.store(1);
        uint32_t g = bell->go.load();
        if (g != last) {
            bell->sleeping.store(0);
            return g;
        }
        timespec ts{0, 50 * 1000 * 1000};
        futex(&bell->go, FUTEX_WAIT, last, &ts);
        bell->sleeping.store(0);
        g = bell->go.load(std::memory_order_acquire);
        if (g != last) return g;
    }
}

uint32_t ring(Doorbell* bell, Command cmd) {
    uint32_t n = bell->go.load() + 1;
    bell->command.store(cmd);
    bell->go.store(n);  // sequentially consistent with the read of `sleeping` below
    if (bell->sleeping.load()) futex(&bell->go, FUTEX_WAKE, 1, nullptr);
    return n;
}

ThreadCpus::ThreadCpus(const std::vector<int>& cpus) {
    CPU_ZERO(&mine_);
    for (int c : cpus)
        if (c >= 0 && c < CPU_SETSIZE) CPU_SET(c, &mine_);
    on_ = CPU_COUNT(&mine_) > 0;
    if (on_ && sched_getaffinity(0, sizeof before_, &before_) != 0)
        throw std::runtime_error(std::string("sched_getaffinity: ") + strerror(errno));
}

void ThreadCpus::pin() {
    if (on_ && sched_setaffinity(0, sizeof mine_, &mine_) != 0)
        throw std::runtime_error(std::string("the judge's CPUs (--cpus): ") + strerror(errno));
}

void ThreadCpus::unpin() {
    if (on_ && sched_setaffinity(0, sizeof before_, &before_) != 0)
        throw std::runtime_error(std::string("sched_setaffinity: ") + strerror(errno));
}

void seal_process() { prctl(PR_SET_DUMPABLE, 0, 0, 0, 0); }

uint64_t random64() {
    uint64_t v;
    ssize_t n;
    do n = getrandom(&v, sizeof v, 0);
    while (n < 0 && errno == EINTR);
    if (n != (ssize_t)sizeof v) fail("getrandom failed");
    return v;
}

namespace {

// The whole of file `path`, or false. A process can end between the open and the read of its /proc
// files (the read then fails with ESRCH): that is an answer, never an exception.
bool read_file(const std::string& path, std::string& out) {
    out.clear();
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    char buf[65536];
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) != 0) {
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) break;
        out.append(buf, size_t(n));
    }
    close(fd);
    return n == 0;
}

// /proc/PID/`name` (PID 0: the calling thread).
bool read_proc(int pid, const char* name, std::string& out) {
    return read_file("/proc/" + (pid == 0 ? std::string("thread-self") : std::to_string(pid)) + "/" + name, out);
}

// "time on the CPU (ns) time waiting on a run queue (ns) timeslices" of /proc/PID/`name`, in ms.
bool schedstat(int pid, const std::string& name, double& on_cpu_ms, double& waited_ms) {
    std::string text;
    unsigned long long on_cpu = 0, waited = 0;
    if (!read_proc(pid, name.c_str(), text) || std::sscanf(text.c_str(), "%llu %llu", &on_cpu, &waited) != 2)
        return false;
    on_cpu_ms = on_cpu / 1e6;
    waited_ms = waited / 1e6;
    return true;
}

// The file that holds the CPU time of the process's own group (the grader's, under kit-jails/): cgroup
// v2's cpu.stat, or v1's cpuacct.usage where the grader made one in that controller; "" for none.
std::string own_cgroup_stat(int pid) {
    std::string text;
    if (!read_proc(pid, "cgroup", text)) return "";
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
        const size_t group = line.find(":/kit-jails/");
        if (group == std::string::npos) continue;
        if (line.rfind("0::", 0) == 0) return "/sys/fs/cgroup" + line.substr(3) + "/cpu.stat";
        const size_t first = line.find(':');
        const std::string controllers = line.substr(first + 1, group - first - 1);  // "cpuacct", "cpu,cpuacct"
        if (("," + controllers + ",").find(",cpuacct,") != std::string::npos)
            return "/sys/fs/cgroup/" + controllers + line.substr(group + 1) + "/cpuacct.usage";
    }
    return "";
}

}  // namespace

double cpu_wait_ms(int pid) {
    double on_cpu = 0, waited = 0;
    return schedstat(pid, "schedstat", on_cpu, waited) ? waited : std::nan("");
}

double others_cpu_ms(int pid) {
    double first = 0, waited = 0;
    if (!schedstat(pid, "schedstat", first, waited)) return std::nan("");
    static std::map<int, std::string> stats;  // looked up once per process
    auto it = stats.find(pid);
    if (it == stats.end()) it = stats.emplace(pid, own_cgroup_stat(pid)).first;
    if (!it->second.empty()) {
        // The group's time and the first thread's are charged at the same moments, so the difference
        // is exactly what the rest of the group ran, threads and processes that have ended included.
        std::string stat;
        unsigned long long usage = 0;
        const bool v1 = it->second.size() > 14 && it->second.compare(it->second.size() - 14, 14, "/cpuacct.usage") == 0;
        if (read_file(it->second, stat) && std::sscanf(stat.c_str(), v1 ? "%llu" : "usage_usec %llu", &usage) == 1)
            return v1 ? usage / 1e6 - first : usage / 1e3 - first;  // nanoseconds on v1, microseconds on v2
    }
    // No group of its own: its other threads that are still there.
    double sum = 0;
    if (DIR* d = opendir(("/proc/" + std::to_string(pid) + "/task").c_str())) {
        while (dirent* e = readdir(d)) {
            int tid = std::atoi(e->d_name);
            double on_cpu = 0;
            if (tid > 0 && tid != pid && schedstat(pid, "task/" + std::to_string(tid) + "/schedstat", on_cpu, waited))
                sum += on_cpu;
        }
        closedir(d);
    }
    return sum;
}

namespace {

// The shared libraries of a memory map (/proc/PID/maps or smaps: the page counts that follow each
// mapping in smaps name no path), as paths.
std::vector<std::string> libraries_in(const std::string& map) {
    std::set<std::string> found;
    std::istringstream in(map);
    std::string line;
    while (std::getline(in, line)) {
        size_t slash = line.find('/');
        if (slash == std::string::npos) continue;
        std::string path = line.substr(slash);
        if (path.find(".so") != std::string::npos) found.insert(path);
    }
    return {found.begin(), found.end()};
}

// foreign_code of a process whose /proc/PID/smaps is `smaps`.
std::string foreign_in(const std::string& smaps, const std::string& program, const std::string& writable) {
    auto under = [](const std::string& path, const std::string& dir) {
        return !dir.empty() && path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0 &&
               (dir.back() == '/' || path[dir.size()] == '/');
    };
    const std::string deleted = " (deleted)";
    std::istringstream in(smaps);
    std::string line, code;   // code: the executable file mapping the lines that follow belong to
    while (std::getline(in, line)) {
        if (line.compare(0, 10, "Anonymous:") == 0) {
            // A page of a file's code the process wrote to: its own copy, no longer the file's. (Not
            // Private_Dirty: that counts the file's own pages not yet written to disk, as a program
            // just linked has.)
            if (!code.empty() && std::strtol(line.c_str() + 10, nullptr, 10) > 0)
                return code + " (code changed in memory after it was loaded)";
            continue;
        }
        std::istringstream fields(line);
        std::string range, perms, offset, device, inode, path;
        if (!(fields >> range >> perms >> offset >> device >> inode) || range.find('-') == std::string::npos ||
            perms.size() != 4)
            continue;   // a page count of the mapping above
        code.clear();
        if (perms[2] != 'x') continue;
        std::getline(fields, path);
        path.erase(0, path.find_first_not_of(' '));
        if (path.empty())
            return "code in anonymous memory at " + range.substr(0, range.find('-')) +
                   " (written there by the program, loaded from no file)";
        if (path[0] == '[') continue;   // the kernel's own pages: [vdso], [vsyscall]
        if (path.compare(0, 7, "/memfd:") == 0) return path + " (code loaded from memory, from no file)";
        if (perms[1] == 'w') return path + " (code the program can write: mapped writable and executable)";
        code = path;
        if (path == program) continue;
        if (path.size() > deleted.size() && path.compare(path.size() - deleted.size(), deleted.size(), deleted) == 0)
            return path + " (code loaded from a file deleted since)";
        for (const std::string& dir : {writable, std::string("/tmp"), std::string("/dev/shm"), std::string("/var/tmp")})
            if (under(path, dir)) return path + " (code loaded from a file the program could write)";
    }
    return "";
}

long session_id(int pid) {
    std::string s;
    if (!read_proc(pid, "stat", s)) return -1;
    size_t close_paren = s.rfind(')');
    if (close_paren == std::string::npos) return -1;
    std::istringstream rest(s.substr(close_paren + 1));
    std::string state;
    long ppid, pgrp, sid;
    if (!(rest >> state >> ppid >> pgrp >> sid)) return -1;
    return sid;
}

// The processes to look into for process `pid`, `pid` first, in one walk of /proc: its session (what
// it started), and every process running its program (what it forked, in any session: a runner whose
// hello came from a forked child of its own is found through that child's program).
std::vector<int> watched(int pid, const std::string& program) {
    std::vector<int> pids{pid};
    const long sid = session_id(pid);
    if (DIR* d = opendir("/proc")) {
        while (dirent* e = readdir(d)) {
            int other = std::atoi(e->d_name);
            if (other > 0 && other != pid &&
                ((sid > 0 && session_id(other) == sid) || (!program.empty() && program_of(other) == program)))
                pids.push_back(other);
        }
        closedir(d);
    }
    return pids;
}

}  // namespace

std::string program_of(int pid) {
    char buf[4096];
    ssize_t n = readlink(("/proc/" + std::to_string(pid) + "/exe").c_str(), buf, sizeof buf - 1);
    return n > 0 ? std::string(buf, (size_t)n) : "";
}

std::string foreign_code(int pid, const std::string& program, const std::string& writable) {
    std::string smaps;   // the memory map, each mapping followed by its page counts
    return read_proc(pid, "smaps", smaps) ? foreign_in(smaps, program, writable) : "";
}

Forbidden forbidden_library(int pid, const std::vector<std::string>& prefixes, const std::string& writable) {
    const std::string program = program_of(pid);
    for (int p : watched(pid, program)) {
        std::string smaps;   // read once for both checks
        if (!read_proc(p, "smaps", smaps)) {
            if (p == pid && access(("/proc/" + std::to_string(p)).c_str(), F_OK) == 0)
                return {"unreadable", "(unknown: the runner made its memory map unreadable)"};
            continue;   // a process that has ended since the walk
        }
        for (const std::string& path : libraries_in(smaps)) {
            std::string base = path.substr(path.rfind('/') + 1);
            for (const std::string& f : prefixes)
                if (!f.empty() && base.compare(0, f.size(), f) == 0) return {"library", base};
        }
        // The runner's own program (in the work folder), in the runner and in what it forked.
        std::string foreign = foreign_in(smaps, program, writable);
        if (!foreign.empty()) return {"foreign", foreign};
    }
    return {};
}

}  // namespace kit::wire
