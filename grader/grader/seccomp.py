"""The system calls every jailed program is refused, as a seccomp filter that bubblewrap loads
(--seccomp FD) before it starts the program.

The jail bounds a run's disk by looking at its work folder every quarter second (limits.py). Two calls
take disk that such looks cannot bound, and no CUDA program needs either:
- fallocate reserves gigabytes in milliseconds, before the next look; with FALLOC_FL_KEEP_SIZE it
  reserves blocks past a file's end, which RLIMIT_FSIZE does not bound, even on the run's own log
  outside the work folder. Refused with EOPNOTSUPP, the answer of a filesystem without it: glibc's
  posix_fallocate then writes the bytes, at the speed the looks are made for. So are the ioctls that
  reach the same code on any filesystem (FS_IOC_RESVSP, FS_IOC_RESVSP64, FS_IOC_ZERO_RANGE).
- io_uring keeps a file registered with it open with no descriptor left: deleted and closed, the
  file is in no folder and no descriptor table. Refused with ENOSYS, as by a kernel built without it.
Four calls would let a program choose which of its timings are taken again: a timed run is taken again
when the judge's thread or the program's waited for a CPU while other processes had it, and the
program's own threads are told from those by the CPU they used. A thread that moves onto the CPU where
the judge waits (sched_setaffinity), or that gives its CPU to anything beside it (SCHED_IDLE through
sched_setscheduler or sched_setattr, nice 19 through setpriority), makes them wait using next to no CPU
itself; in a batch it could also move onto the CPUs of another student's timing. Refused with EPERM,
the answer to a program not allowed to change that thread: it stays on the CPUs the grader gave it, at
the priority it started with. Reading them is not refused. The CUDA runtime changes neither. So is the
32-bit `nice` call, which a 64-bit x86 program reaches through int 0x80, and a core scheduling cookie
(prctl PR_SCHED_CORE): on a machine with two threads per core, a check holding one would keep the other
thread of its core idle, where another student's judge may be timing.
And one that reaches out of the jail: a crash under a core_pattern of "|program" (apport, systemd-
coredump) starts that program as root, outside the jail, reading the crashed program's memory, for
any RLIMIT_CORE but 1, which every jailed program gets (limits.output_limits). A change to RLIMIT_CORE
(setrlimit, prlimit64 with a new value) is refused with EPERM; reading it is not.

The filter is classic BPF (what seccomp(2) takes), written out here rather than through libseccomp,
which would be one more library on the TA's machine. It checks the architecture first: a 64-bit x86
program may still make 32-bit calls (int 0x80), whose numbers differ, and x32 calls, which set a bit of
their own and are all refused. A program of any architecture not listed is stopped by the kernel at its first call;
the jail is not opened on a machine of one (jail.find).
"""
from __future__ import annotations

import errno
import os
import struct
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Optional

# struct seccomp_data: the call's number at offset 0, its architecture (AUDIT_ARCH_*) at 4, and its six
# arguments from 16, 8 bytes each, the low half first (x86 and ARM are little-endian).
_NR, _ARCH, _ARGS = 0, 4, 16
_X32_BIT = 0x4000_0000
_LD_W_ABS, _JEQ_K, _JSET_K, _RET_K = 0x20, 0x15, 0x45, 0x06
_ALLOW, _KILL_PROCESS, _ERRNO = 0x7FFF_0000, 0x8000_0000, 0x0005_0000
RLIMIT_CORE = 4
PR_SCHED_CORE = 62

PREALLOCATING_IOCTLS = (0x4030_5828, 0x4030_582A, 0x4030_5839, 0x402C_5828, 0x402C_582A, 0x402C_5839)
"""FS_IOC_RESVSP, FS_IOC_RESVSP64 and FS_IOC_ZERO_RANGE (_IOW('X', 40, 42, 57, struct space_resv)), with
the structure's 48 bytes of a 64-bit program and its 44 of a 32-bit one: fallocate by another name."""

X86_64, I386, AARCH64, ARM = 0xC000_003E, 0x4000_0003, 0xC000_00B7, 0x4000_0028
NUMBERS = {  # i386 is a 64-bit x86 program's int 0x80; x32's calls (_X32_BIT set) are all refused
    X86_64: {"fallocate": 285, "ioctl": 16, "setrlimit": 160, "prlimit64": 302, "prctl": 157,
             "sched_setaffinity": 203, "sched_setscheduler": 144, "sched_setattr": 314, "setpriority": 141},
    I386: {"fallocate": 324, "ioctl": 54, "setrlimit": 75, "prlimit64": 340, "prctl": 172, "nice": 34,
           "sched_setaffinity": 241, "sched_setscheduler": 156, "sched_setattr": 351, "setpriority": 97},
    AARCH64: {"fallocate": 47, "ioctl": 29, "setrlimit": 164, "prlimit64": 261, "prctl": 167,  # Grace Hopper
              "sched_setaffinity": 122, "sched_setscheduler": 119, "sched_setattr": 274, "setpriority": 140},
    ARM: {"fallocate": 352, "ioctl": 54, "setrlimit": 75, "prlimit64": 369, "prctl": 172, "nice": 34,
          "sched_setaffinity": 241, "sched_setscheduler": 156, "sched_setattr": 380, "setpriority": 97},
}
"""AUDIT_ARCH_* -> the numbers of the refused calls that differ between architectures."""
IO_URING = {"io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427}
"""The same on every architecture."""
MACHINES = ("x86_64", "aarch64")
"""The machines (platform.machine()) whose programs the filter knows: their own architectures and the
32-bit ones their kernels may also run."""


@dataclass(frozen=True)
class Rule:
    call: str
    """The call's name, as NUMBERS or IO_URING has it."""
    errno: int
    """What the call returns instead."""
    arg: Optional[int] = None
    """Refused only where this argument (its low 32 bits) is one of `values` (None: always)."""
    values: tuple = ()
    new_arg: Optional[int] = None
    """... and this one, a pointer to a new limit, is not NULL (None: whatever it is)."""


RULES = (
    Rule("fallocate", errno.EOPNOTSUPP),
    Rule("ioctl", errno.EOPNOTSUPP, arg=1, values=PREALLOCATING_IOCTLS),
    Rule("io_uring_setup", errno.ENOSYS),
    Rule("io_uring_enter", errno.ENOSYS),
    Rule("io_uring_register", errno.ENOSYS),
    Rule("setrlimit", errno.EPERM, arg=0, values=(RLIMIT_CORE,)),
    Rule("prlimit64", errno.EPERM, arg=1, values=(RLIMIT_CORE,), new_arg=2),
    Rule("sched_setaffinity", errno.EPERM),
    Rule("sched_setscheduler", errno.EPERM),
    Rule("sched_setattr", errno.EPERM),
    Rule("setpriority", errno.EPERM),
    Rule("nice", errno.EPERM),  # 32-bit only: the 64-bit tables have none (_rule)
    Rule("prctl", errno.EPERM, arg=0, values=(PR_SCHED_CORE,)),
)


def _op(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def _rule(arch: int, rule: Rule) -> list:
    """The instructions of one rule: they return its errno where the call is it and its arguments say
    so, and otherwise go on to the instruction after them; none where the architecture has no such call."""
    nr = (NUMBERS[arch] | IO_URING).get(rule.call)
    if nr is None:
        return []
    tail = []
    if rule.arg is not None:  # one of the values: on to the rest; none of them: out
        tail.append(_op(_LD_W_ABS, _ARGS + 8 * rule.arg))
        last = len(rule.values) - 1
        tail += [_op(_JEQ_K, v, jt=last - i) for i, v in enumerate(rule.values[:-1])] + [None]
    if rule.new_arg is not None:  # NULL is both halves zero: either half set is a new limit
        low = _ARGS + 8 * rule.new_arg
        tail += [_op(_LD_W_ABS, low), _op(_JEQ_K, 0, jt=0, jf=2), _op(_LD_W_ABS, low + 4), _op(_JEQ_K, 0, jt=1)]
    tail.append(_op(_RET_K, _ERRNO | rule.errno))
    if None in tail:
        at = tail.index(None)
        tail[at] = _op(_JEQ_K, rule.values[-1], jt=0, jf=len(tail) - at - 1)
    return [_op(_LD_W_ABS, _NR), _op(_JEQ_K, nr, jt=0, jf=len(tail))] + tail


def _no_x32() -> list:
    """x86_64's first instructions: any x32 call refused (ENOSYS, as by a kernel without x32). Its numbers
    are x86_64's with _X32_BIT set for most calls but not all (ioctl is 514, not 16), and nothing CUDA
    runs is an x32 program."""
    return [_op(_LD_W_ABS, _NR), _op(_JSET_K, _X32_BIT, jt=0, jf=1), _op(_RET_K, _ERRNO | errno.ENOSYS)]


def program() -> bytes:
    """The filter, as the bytes of its sock_filter array."""
    ops = [_op(_LD_W_ABS, _ARCH)]
    for arch in NUMBERS:
        block = (_no_x32() if arch == X86_64 else []) + [op for rule in RULES for op in _rule(arch, rule)]
        block.append(_op(_RET_K, _ALLOW))
        ops += [_op(_JEQ_K, arch, jt=0, jf=len(block))] + block
    ops.append(_op(_RET_K, _KILL_PROCESS))
    return b"".join(ops)


@contextmanager
def descriptor():
    """A descriptor to read the filter from, for bubblewrap's --seccomp, closed after the block: a fresh
    one per run, since bubblewrap reads it to its end. The caller passes it on (pass_fds)."""
    r, w = os.pipe()
    try:
        os.write(w, program())  # under a kilobyte: far within a pipe's buffer
    finally:
        os.close(w)
    try:
        yield r
    finally:
        os.close(r)
