"""Calls the jail refuses (seccomp.py): those that take disk the grader's looks at a run cannot see,
or cannot see in time, and any change to the core dump limit, which would let a crash start the
machine's core handler outside the jail. No CUDA program needs them. Each test is an attack that
succeeds without the filter. Needs bubblewrap and gcc; the GPU batch test grades the same attacks as
kernel.cu files (fixtures/batch/hostile/preallocate.cu, core_dump.cu), which also show that CUDA runs
under the filter."""
import errno
import os
import shutil
import signal
import time

import pytest

from grader import jail, sandbox, tasks
from jail_box import Box, small_limits

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None or shutil.which("gcc") is None,
                                reason="needs bubblewrap (apt-get install bubblewrap) and gcc")


@pytest.fixture
def file_capped(tmp_path):
    """A jail whose files may be 32 MiB each, in a work folder of 1 GiB."""
    with Box(tmp_path, small_limits(disk_bytes=1 << 30, file_bytes=32 << 20)) as box:
        yield box


def on_disk(box) -> dict:
    """{name: bytes on disk} of big.bin in the work folder and of the run's log."""
    return {p.name: p.stat().st_blocks * 512 for p in [box.work / "big.bin", box.tmp / "log"] if p.exists()}


def test_a_program_cannot_take_gigabytes_of_disk_at_once_by_preallocating_them(box):
    # fallocate() reserves 256 MiB in a few milliseconds: eight of them hold 2 GiB of the TA's disk,
    # 32 times the limit, before the next look (every quarter second) can stop the run.
    r = box.run("""
        int main(void) {
            long got = 0;
            int refused = 0;
            for (int f = 0; f < 8; f++) {
                char name[32]; snprintf(name, sizeof name, "pre-%d.bin", f);
                int fd = open(name, O_CREAT | O_WRONLY, 0644);
                if (fallocate(fd, 0, 0, 256L << 20) == 0) got += 256;
                else refused += errno == EOPNOTSUPP;
            }
            printf("allocated %ld MiB, refused %d\\n", got, refused);
            return 0;
        }""")
    assert "allocated 0 MiB, refused 8" in r.output, r


def test_no_file_holds_more_disk_than_the_file_size_limit_not_even_the_runs_own_log(file_capped):
    # RLIMIT_FSIZE bounds a file's size, not its blocks: fallocate(FALLOC_FL_KEEP_SIZE) reserves
    # blocks past the end and leaves the size at 0. On the run's standard output, the log the grader
    # opened outside the work folder, no look at the work folder sees them at all.
    r = file_capped.run("""
        int main(void) {
            int fd = open("big.bin", O_CREAT | O_WRONLY, 0644);
            printf("keep_size %d\\n", fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, 256L << 20));
            printf("stdout %d\\n", fallocate(1, FALLOC_FL_KEEP_SIZE, 0, 256L << 20));
            return 0;
        }""")
    held = on_disk(file_capped)
    assert held and all(b <= 32 << 20 for b in held.values()), f"past the 32 MiB file limit: {held}, {r}"


PREALLOCATE_BY_IOCTL = """
    #include <sys/ioctl.h>
    #include <stdint.h>
    /* The XFS-era ioctls, which hand any filesystem's file to the code of fallocate, with
       FALLOC_FL_KEEP_SIZE: fallocate without the fallocate call. */
    struct space_resv { int16_t l_type, l_whence; int64_t l_start, l_len; int32_t l_sysid; uint32_t l_pid;
                        int32_t l_pad[4]; };
    static int reserve(int fd, int nr, long bytes) {
        struct space_resv sr = {0};
        sr.l_len = bytes;
        return ioctl(fd, _IOW('X', nr, struct space_resv), &sr);
    }
"""


@pytest.mark.parametrize("ioctl", [40, 42, 57], ids=["FS_IOC_RESVSP", "FS_IOC_RESVSP64", "FS_IOC_ZERO_RANGE"])
def test_a_program_cannot_take_gigabytes_of_disk_at_once_through_an_ioctl_either(box, ioctl):
    # 2 GiB in 3.5 ms under a 64 MiB limit through FS_IOC_RESVSP64, with fallocate refused.
    r = box.run(PREALLOCATE_BY_IOCTL + """
        int main(void) {
            long got = 0;
            int refused = 0;
            for (int f = 0; f < 8; f++) {
                char name[32]; snprintf(name, sizeof name, "pre-%d.bin", f);
                int fd = open(name, O_CREAT | O_WRONLY, 0644);
                if (reserve(fd, NR, 256L << 20) == 0) got += 256;
                else refused += errno == EOPNOTSUPP;
            }
            printf("allocated %ld MiB, refused %d\\n", got, refused);
            return 0;
        }""".replace("NR", str(ioctl)))
    assert "allocated 0 MiB, refused 8" in r.output, r


def test_no_file_holds_more_disk_than_the_file_size_limit_through_an_ioctl_either(file_capped):
    # FS_IOC_RESVSP64 always keeps the size: big.bin and the run's log each held 256 MiB at size 0
    # under a 32 MiB file limit.
    r = file_capped.run(PREALLOCATE_BY_IOCTL + """
        int main(void) {
            int fd = open("big.bin", O_CREAT | O_WRONLY, 0644);
            printf("file %d stdout %d\\n", reserve(fd, 42, 256L << 20), reserve(1, 42, 256L << 20));
            return 0;
        }""")
    held = on_disk(file_capped)
    assert held and all(b <= 32 << 20 for b in held.values()), f"past the 32 MiB file limit: {held}, {r}"


def test_a_file_held_only_by_io_uring_cannot_fill_the_disk_out_of_sight(box):
    # A file deleted, written and registered with io_uring, then closed, is in no folder and no
    # descriptor table: ten of 16 MiB, 100 ms apart, hold 160 MiB unseen under a 64 MiB limit (each
    # is in a table for the few milliseconds of its write). Without io_uring there is no attack.
    r = box.run("""
        #include <linux/io_uring.h>
        #include <sys/syscall.h>
        int main(void) {
            static char buf[16 << 20];
            struct io_uring_params p;
            memset(&p, 0, sizeof p);
            int ring = syscall(__NR_io_uring_setup, 8, &p);
            if (ring < 0) { printf("no io_uring: %s\\n", strerror(errno)); return 0; }
            int slots[10];
            for (int f = 0; f < 10; f++) slots[f] = -1;
            if (syscall(__NR_io_uring_register, ring, IORING_REGISTER_FILES, slots, 10) < 0) {
                printf("register: %s\\n", strerror(errno)); return 0;
            }
            for (int f = 0; f < 10; f++) {
                int fd = open("held.bin", O_CREAT | O_RDWR | O_TRUNC, 0644);
                unlink("held.bin");
                write(fd, buf, sizeof buf);
                struct io_uring_files_update up = {.offset = (unsigned) f, .fds = (unsigned long) &fd};
                if (syscall(__NR_io_uring_register, ring, IORING_REGISTER_FILES_UPDATE, &up, 1) != 1) {
                    printf("update: %s\\n", strerror(errno)); return 0;
                }
                close(fd);
                usleep(100000);
            }
            printf("held 160 MiB out of sight\\n");
            fflush(stdout);
            sleep(2);
            return 0;
        }""")
    assert "out of sight" not in r.output, r
    assert "no io_uring: Function not implemented" in r.output, r


CALL32 = """
    static long call32(long nr, long a, long b, long c, long d, long e) {
        long r;
        /* Below the red zone, with ebp (the sixth argument, the length's high half) zeroed. */
        asm volatile("sub $128, %%rsp\\n\\tpush %%rbp\\n\\txor %%ebp, %%ebp\\n\\tint $0x80\\n\\t"
                     "pop %%rbp\\n\\tadd $128, %%rsp"
                     : "=a"(r) : "a"(nr), "b"(a), "c"(b), "d"(c), "S"(d), "D"(e) : "memory");
        return r;
    }
"""
"""i386 call `nr` from a 64-bit program, through int 0x80."""


def run_32_bit_calls(box, body: str):
    """Runs `body` (C statements, which may use call32()) in the jail; skips where the kernel runs no
    32-bit calls."""
    r = box.run("#include <sys/resource.h>\n" + CALL32 + """
        int main(void) {
            if (call32(20, 0, 0, 0, 0, 0) != getpid()) { printf("no 32-bit calls here\\n"); return 0; }
            BODY
            return 0;
        }""".replace("BODY", body))
    if "no 32-bit calls" in r.output:
        pytest.skip("this kernel runs no 32-bit system calls (no IA32 emulation)")
    return r


def test_a_64_bit_program_cannot_preallocate_through_the_32_bit_system_calls(box):
    # int 0x80 makes i386 calls from a 64-bit program, numbered differently (fallocate is 324, not 285):
    # a filter that tested numbers alone would let this one through, or refuse some other call.
    r = run_32_bit_calls(box, """
            int fd = open("pre.bin", O_CREAT | O_WRONLY, 0644);
            printf("fallocate %ld\\n", call32(324, fd, 0, 0, 0, 256L << 20));""")
    assert f"fallocate {-errno.EOPNOTSUPP}" in r.output, r
    assert (box.work / "pre.bin").stat().st_blocks == 0


def test_the_jail_is_not_opened_on_a_machine_whose_system_calls_the_filter_does_not_know(monkeypatch, tmp_path):
    # The filter stops a program of an architecture it does not list at its first call: on such a
    # machine every run would end in SIGSYS, each a runtime error of its own.
    monkeypatch.setattr(jail.platform, "machine", lambda: "ppc64le")
    with pytest.raises(jail.JailError, match="x86_64, aarch64 machines, not of this ppc64le one"):
        jail.find(tasks.ROOT / "harness" / "include")


CORE_PATTERN = jail.CORE_PATTERN


@pytest.fixture
def core_handler(tmp_path):
    """The machine's core handler, for the test: a pipe to a script that notes each crash it is started
    for; the machine's own is put back after. Needs root and a core_pattern it may write."""
    if os.geteuid() != 0 or not os.access(CORE_PATTERN, os.W_OK):
        pytest.skip("needs root and a writable /proc/sys/kernel/core_pattern")
    seen = tmp_path / "cores"
    script = tmp_path / "core-handler"
    script.write_text(f"#!/bin/sh\necho \"$1\" >> {seen}\ncat > /dev/null\n")
    script.chmod(0o755)
    before = CORE_PATTERN.read_text()
    CORE_PATTERN.write_text(f"|{script} %e")
    try:
        yield seen
    finally:
        CORE_PATTERN.write_text(before)


@pytest.mark.parametrize("limit", ["as_set", "lowered", "lowered_through_prlimit"])
def test_a_program_that_crashes_in_the_jail_never_starts_the_machines_core_handler(box, core_handler, limit):
    # A core_pattern of "|program" (apport on Ubuntu, systemd-coredump) starts that program as root,
    # outside the jail, with the crashed program's memory on its standard input, whatever RLIMIT_CORE
    # says but 1: the program chooses what a root process of the TA's machine reads. The jail sets 1
    # and refuses any change to it (a limit of 0 starts the handler again).
    name = f"crash-{limit[:2]}-{os.getpid() % 100000}"  # what the handler notes: not another test's crash
    exe = box.jail.expose(box.compile("""
        #include <sys/resource.h>
        int main(int argc, char** argv) {
            struct rlimit zero = {0, 0};
            int changed = 0;
            if (!strcmp(getenv("LIMIT"), "lowered")) changed = setrlimit(RLIMIT_CORE, &zero) == 0;
            if (!strcmp(getenv("LIMIT"), "lowered_through_prlimit")) changed = prlimit(0, RLIMIT_CORE, &zero, 0) == 0;
            struct rlimit now; getrlimit(RLIMIT_CORE, &now);
            printf("changed %d, core limit %ld\\n", changed, (long) now.rlim_cur);
            fflush(stdout);
            *(volatile int*) 0 = 1;
            return 0;
        }""".replace('getenv("LIMIT")', f'"{limit}"'), name))
    r = sandbox.run([str(exe)], box.work, box.tmp / "log", timeout=30, view="run", read_only=(exe,))
    assert r.returncode == -signal.SIGSEGV, r
    time.sleep(0.5)  # the handler would have been started by now
    started = core_handler.read_text().split() if core_handler.exists() else []
    assert name not in started, f"the core handler ran for {name}: {r.output}"
    assert "changed 0, core limit 1" in r.output


@pytest.fixture
def socket_pattern(monkeypatch, tmp_path):
    """The machine's core_pattern as one that names a socket ("@/path", Linux 6.16 and later: the kernel
    connects to it as root and writes the crashed program's memory there; systemd-coredump.socket can
    serve one), in a file of the test's own: a socket set on the machine for real would keep the jailed
    runs of every test beside this one from starting."""
    pattern = tmp_path / "core_pattern"
    pattern.write_text("@/run/systemd/coredump.socket\n")
    monkeypatch.setattr(jail, "CORE_PATTERN", pattern)


def test_no_program_is_jailed_on_a_machine_that_sends_core_dumps_to_a_socket(socket_pattern):
    # A socket handler is sent the crashed program's whole memory whatever the core limit: on Linux
    # 6.18, with the machine's pattern set to a socket a root thread listened on, a jailed crash under a
    # limit of 1 sent it 315,392 bytes. The jail is not opened on such a machine.
    with pytest.raises(jail.JailError, match=r"sends core dumps to a socket .*kernel.core_pattern=core"):
        jail.find(tasks.ROOT / "harness" / "include")


def test_a_jail_opened_before_core_dumps_went_to_a_socket_runs_nothing_after(box, socket_pattern):
    # The machine's pattern changed while a batch ran: a reviewer opened the jail under a file pattern,
    # then set a socket, and a crash's memory (450,560 bytes) reached it.
    with pytest.raises(jail.JailError, match="sends core dumps to a socket"):
        box.run("int main(void) { *(volatile int*) 0 = 1; return 0; }")


def test_a_program_cannot_move_its_threads_between_cpus_or_lower_their_priority(box):
    # A timed run disturbed by other processes is timed again, and the judge tells them from the
    # program's own threads by the CPU the program used. A thread that hops onto the CPU where the
    # judge waits (affinity), or that yields to anything beside it (SCHED_IDLE, nice 19), makes the
    # two wait for each other using next to no CPU of its own: the program would choose which of its
    # timings are taken again (fixtures/batch/hostile/affinity_hop.cu). Reading its CPUs still works.
    r = box.run("""
        #include <sys/resource.h>
        #include <sys/syscall.h>
        #include <stdint.h>
        struct attr { uint32_t size, policy; uint64_t flags; int32_t nice; uint32_t priority;
                      uint64_t runtime, deadline, period; };
        int main(void) {
            cpu_set_t all, one;
            if (sched_getaffinity(0, sizeof all, &all)) { printf("no affinity to read\\n"); return 0; }
            int first = 0;
            while (!CPU_ISSET(first, &all)) first++;
            CPU_ZERO(&one);
            CPU_SET(first, &one);
            struct sched_param param = {0};
            struct attr idle = {sizeof idle, SCHED_IDLE};
            int affinity = sched_setaffinity(0, sizeof one, &one) ? errno : 0;
            int policy = sched_setscheduler(0, SCHED_IDLE, &param) ? errno : 0;
            int attr = syscall(SYS_sched_setattr, 0, &idle, 0) ? errno : 0;
            int nice = setpriority(PRIO_PROCESS, 0, 19) ? errno : 0;
            printf("cpus %d: affinity %d policy %d attr %d nice %d\\n", CPU_COUNT(&all), affinity, policy, attr, nice);
            return 0;
        }""")
    e = errno.EPERM
    assert f": affinity {e} policy {e} attr {e} nice {e}" in r.output, r
    assert "cpus 0:" not in r.output, r


def test_a_64_bit_program_cannot_lower_its_priority_through_the_32_bit_nice_call_either(box):
    # nice has no 64-bit call, only the 32-bit one (34), which int 0x80 reaches from a 64-bit program.
    r = run_32_bit_calls(box, """
            long r = call32(34, 19, 0, 0, 0, 0);
            printf("nice %ld, priority now %d\\n", r, getpriority(PRIO_PROCESS, 0));""")
    assert f"nice {-errno.EPERM}, priority now 0" in r.output, r


def test_a_program_cannot_take_a_core_scheduling_cookie(box):
    # On a machine with two threads per core (and a kernel with core scheduling), a check holding a
    # cookie of its own keeps the other thread of its core idle while it runs: where that thread is
    # one of another student's timing CPUs, that timing waits. Refused whatever the kernel supports.
    r = box.run("""
        #include <sys/prctl.h>
        int main(void) {
            int r = prctl(62 /* PR_SCHED_CORE */, 1 /* PR_SCHED_CORE_CREATE */, 0, 0 /* a thread group */, 0);
            printf("cookie %d errno %d\\n", r, r ? errno : 0);
            return 0;
        }""")
    assert f"cookie -1 errno {errno.EPERM}" in r.output, r
