"""The system calls every jailed program is refused, as a seccomp filter that bubblewrap loads
(--seccomp FD) before it starts the program.

The jail bounds a run's disk by looking at its work folder every quarter second (limits.py). Two calls
take disk that such looks cannot bound, and no CUDA program needs either:
- fallocate reserves gigabytes in milliseconds, before the next look; with FALLOC_FL_KEEP_SIZE it
  reserves blocks past a file's end, which RLIMIT_FSIZE does not bound, even on the run's own log
  outside the work folder. Refused with EOPNOTSUPP, the answer of a filesystem without it: glibc's
  posix_fallocate then writes the bytes, at the speed the looks are made for.
- io_uring keeps a file registered with it open with no descriptor left: deleted and closed, the
  file is in no folder and no descriptor table. Refused with ENOSYS, as by a kernel built without it.

The filter is classic BPF (what seccomp(2) takes), written out here rather than through libseccomp,
which would be one more library on the TA's machine. It checks the architecture first: a 64-bit x86
program may still make 32-bit calls (int 0x80), whose numbers differ, and x32 calls, which set a bit of
their own. A program of any architecture not listed is stopped by the kernel at its first call;
the jail is not opened on a machine of one (jail.find).
"""
from __future__ import annotations

import errno
import os
import struct

# struct seccomp_data: the call's number at offset 0, its architecture (AUDIT_ARCH_*) at offset 4.
_NR, _ARCH = 0, 4
_X32_BIT = 0x4000_0000
_LD_W_ABS, _JEQ_K, _AND_K, _RET_K = 0x20, 0x15, 0x54, 0x06
_ALLOW, _KILL_PROCESS, _ERRNO = 0x7FFF_0000, 0x8000_0000, 0x0005_0000

IO_URING = (425, 426, 427)
"""io_uring_setup, io_uring_enter and io_uring_register: the same number on every architecture."""
ARCHITECTURES = {
    0xC000_003E: 285,  # x86_64 (and x32, with _X32_BIT masked off)
    0x4000_0003: 324,  # i386: a 64-bit x86 program's int 0x80
    0xC000_00B7: 47,   # aarch64 (Grace Hopper)
    0x4000_0028: 352,  # arm: an aarch64 kernel's 32-bit programs
}
"""AUDIT_ARCH_* -> that architecture's number for fallocate."""
MACHINES = ("x86_64", "aarch64")
"""The machines (platform.machine()) whose programs the filter knows: their own architectures and the
32-bit ones their kernels may also run."""


def _op(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def program() -> bytes:
    """The filter, as the bytes of its sock_filter array."""
    ops = [_op(_LD_W_ABS, _ARCH)]
    for arch, fallocate in ARCHITECTURES.items():
        refused = [(fallocate, errno.EOPNOTSUPP)] + [(nr, errno.ENOSYS) for nr in IO_URING]
        # The block of one architecture: its number, then one test per refused call, then allow.
        block = [_op(_LD_W_ABS, _NR)]
        if arch == 0xC000_003E:
            block.append(_op(_AND_K, ~_X32_BIT & 0xFFFF_FFFF))
        for nr, _ in refused:
            # To this call's return: past the tests after it, the allow, and the returns before its own.
            block.append(_op(_JEQ_K, nr, jt=len(refused)))
        block.append(_op(_RET_K, _ALLOW))
        block += [_op(_RET_K, _ERRNO | e) for _, e in refused]
        ops.append(_op(_JEQ_K, arch, jt=0, jf=len(block)))
        ops += block
    ops.append(_op(_RET_K, _KILL_PROCESS))
    return b"".join(ops)


def descriptor() -> int:
    """A descriptor to read the filter from, for bubblewrap's --seccomp: a fresh one per run, since
    bubblewrap reads it to its end. The caller passes it on (pass_fds) and closes it."""
    r, w = os.pipe()
    try:
        os.write(w, program())  # a few hundred bytes: far within a pipe's buffer
    finally:
        os.close(w)
    return r
