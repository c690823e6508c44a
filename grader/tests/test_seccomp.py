"""The jail's seccomp filter (seccomp.program()), run by a small interpreter of classic BPF on the calls
a program could make: what it refuses on each architecture, including calls this machine's kernel
would not run (x32, ARM), which the jailed attacks of test_jail_syscalls.py cannot reach here."""
import errno
import struct

import pytest

from grader import seccomp

ALLOW, ERRNO = 0x7FFF_0000, 0x0005_0000
X32 = 0x4000_0000
RESVSP64 = 0x4030_582A


def verdict(nr: int, arch: int, *args: int) -> int:
    """What the filter answers to the call `nr` of architecture `arch` with arguments `args`."""
    data = struct.pack("=iIQ", nr, arch, 0) + b"".join(struct.pack("=Q", a) for a in args)
    data = data.ljust(64, b"\0")
    prog = seccomp.program()
    ops = [struct.unpack_from("=HBBI", prog, i) for i in range(0, len(prog), 8)]
    pc, acc = 0, 0
    while True:
        code, jt, jf, k = ops[pc]
        if code == 0x20:  # ld [k]
            acc = struct.unpack_from("=I", data, k)[0]
        elif code == 0x15:  # jeq #k
            pc += jt if acc == k else jf
        elif code == 0x45:  # jset #k
            pc += jt if acc & k else jf
        elif code == 0x06:  # ret #k
            return k
        else:
            raise AssertionError(f"an instruction the interpreter does not know: {code:#x}")
        pc += 1


def test_an_x32_call_is_refused_whatever_its_number_and_x32s_own_ioctl_cannot_preallocate():
    # x32 shares most numbers with x86_64 under its own bit, not all: its ioctl is 514, not 16. A filter
    # that masked the bit off and compared with x86_64's numbers let FS_IOC_RESVSP64 through x32's ioctl
    # (a reviewer's attack), on any kernel that runs x32 programs.
    assert verdict(X32 | 514, seccomp.X86_64, 3, RESVSP64, 0) == ERRNO | errno.ENOSYS
    assert verdict(X32 | 285, seccomp.X86_64, 3, 0, 0, 1 << 30) == ERRNO | errno.ENOSYS
    assert verdict(X32 | 0, seccomp.X86_64, 3, 0, 0) == ERRNO | errno.ENOSYS  # read: nothing of x32 runs


@pytest.mark.parametrize("arch", [seccomp.X86_64, seccomp.I386, seccomp.AARCH64, seccomp.ARM],
                         ids=["x86_64", "i386", "aarch64", "arm"])
def test_each_architecture_refuses_preallocation_io_uring_and_a_new_core_limit_and_lets_the_rest_through(arch):
    n = seccomp.NUMBERS[arch]
    assert verdict(n["fallocate"], arch, 3, 0, 0, 1 << 30) == ERRNO | errno.EOPNOTSUPP
    assert verdict(n["ioctl"], arch, 3, RESVSP64, 0x1000) == ERRNO | errno.EOPNOTSUPP
    assert verdict(n["ioctl"], arch, 3, 0x5401, 0x1000) == ALLOW  # TCGETS: an ioctl like any other
    assert verdict(425, arch, 8, 0x1000) == ERRNO | errno.ENOSYS
    assert verdict(n["setrlimit"], arch, seccomp.RLIMIT_CORE, 0x1000) == ERRNO | errno.EPERM
    assert verdict(n["setrlimit"], arch, 7, 0x1000) == ALLOW  # RLIMIT_NOFILE
    assert verdict(n["prlimit64"], arch, 0, seccomp.RLIMIT_CORE, 0x1000, 0) == ERRNO | errno.EPERM
    assert verdict(n["prlimit64"], arch, 0, seccomp.RLIMIT_CORE, 1 << 40, 0) == ERRNO | errno.EPERM  # high half
    assert verdict(n["prlimit64"], arch, 0, seccomp.RLIMIT_CORE, 0, 0x1000) == ALLOW  # reading it
    assert verdict(n["fallocate"] + 1, arch, 3, 0) == ALLOW


def test_a_program_of_an_architecture_the_filter_does_not_know_is_stopped_at_its_first_call():
    assert verdict(0, 0xC000_00F3, 0) == 0x8000_0000  # riscv64: SECCOMP_RET_KILL_PROCESS


@pytest.mark.parametrize("arch", [seccomp.X86_64, seccomp.I386, seccomp.AARCH64, seccomp.ARM],
                         ids=["x86_64", "i386", "aarch64", "arm"])
def test_each_architecture_refuses_moving_a_thread_lowering_its_priority_or_a_core_cookie_and_lets_it_read_its_cpus(
        arch):
    n = seccomp.NUMBERS[arch]
    for call in ("sched_setaffinity", "sched_setscheduler", "sched_setattr", "setpriority"):
        assert verdict(n[call], arch, 0, 128, 0x1000) == ERRNO | errno.EPERM, call
    assert verdict(n["sched_setaffinity"] + 1, arch, 0, 128, 0x1000) == ALLOW  # sched_getaffinity
    if "nice" in n:  # the 32-bit tables' own call
        assert verdict(n["nice"], arch, 19) == ERRNO | errno.EPERM
    assert verdict(n["prctl"], arch, seccomp.PR_SCHED_CORE, 1, 0, 0) == ERRNO | errno.EPERM
    assert verdict(n["prctl"], arch, 15, 0x1000) == ALLOW  # PR_SET_NAME: what threads are named by
