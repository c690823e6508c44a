"""Per-submission bounds for jailed programs: processes, memory, disk, and who they run as.

Processes and memory are bounded across everything a submission starts, through a cgroup of its own
where the grader may make one (cgroups.py). Where no cgroup can be made
(an unprivileged TA), RLIMIT_NPROC and RLIMIT_DATA bound them instead, per user and per process,
and a build that fails while another submission ran is built again alone (batch.py) before its
verdict counts. Disk: the work folder is measured while the program runs and the program stopped
past the limit (RLIMIT_FSIZE also caps each file), and stopped if the disk's free space falls below
its reserve, whatever took it; /tmp is a tmpfs of fixed size.

Who: a grader running as root starts its jails as a uid of their own (jail_uid()), one that no account,
no process outside a jail and no other user's containers (/etc/subuid) have. Every process of a user
may open the descriptors of the others through /proc/PID/fd and write into them, and a CUDA program's
descriptors include the driver's own pipes: one write there ends the program's next CUDA call in
cudaErrorOperatingSystem. Jails run as nobody would share that user with the machine's daemons and
with anything else sandboxed as nobody.
"""
from __future__ import annotations

import grp
import os
import pwd
import resource
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

from . import protocol
from .cgroups import Group, cgroup_kind

GIB = 1 << 30
FILE_BYTES = 2 * GIB
"""The largest file any program run by the grader may write: the largest output dump (1 GiB) fits."""
DISK_RESERVE = 1 * GIB
"""Free space a run may never take from the disk holding its work folder, whatever holds it: a deleted
file kept by a mapping alone or in flight in a socket is in no folder and no descriptor table, and
fills the disk all the same (ten of 48 MiB went unseen past a 64 MiB limit), until the run ends."""
DISK_SETTLE_S = 12.0
"""How long a disk short of the reserve is given to get its blocks back (DiskLow.passes)."""
DISK_LOW = "ran while the disk holding its work folder fell below"
"""How a stop for the disk's reserve opens (after judged.STOPPED). Any program on the machine may have
taken that space, so such a stop, like a kill by the machine's out-of-memory killer, may not be the
run's own (judged.over_own_limit)."""
NOBODY = 65534
"""The uid and gid of jailed programs inside their namespace."""
JAIL_UIDS = range(2_000_000_000, 2_000_000_100)
"""Where jail_uid() looks first: above the ranges that accounts, systemd's dynamic users and the usual
/etc/subuid blocks of containers take."""
SUBORDINATE = ("/etc/subuid", "/etc/subgid")
"""The ids granted to users for their own containers (a user could run a process as any of them)."""
ID_MAPS = ("/proc/self/uid_map", "/proc/self/gid_map")
"""The ids this grader's user namespace maps (a container whose root is remapped maps 65,536)."""
FORK_BOMB_REFUSALS = 10_000
"""Processes and threads a run's cgroup refused for its pids.max, past which the run is stopped at once.
A fork bomb is refused thousands of times a second (every process it made tries again), and would
otherwise hold its case until the time limit, a "did not finish" like a slow kernel's; a program
that meets its limit now and then (a pool of threads sized to a big machine) is refused a few times."""


@dataclass
class Limits:
    processes: int = 512
    """Processes and threads of one submission (the CUDA runtime starts a few threads per process)."""
    memory_bytes: int = 16 * GIB
    """Host memory of all its processes together (per process where no cgroup can be made)."""
    disk_bytes: int = 8 * GIB
    """Everything it writes in its work folder (the largest output dump is 1 GiB)."""
    files: int = 20000
    """Files and folders in its work folder."""
    tmp_bytes: int = 1 * GIB
    """Its private /tmp (memory-backed)."""
    file_bytes: int = FILE_BYTES
    """Any one file (RLIMIT_FSIZE)."""
    disk_reserve_bytes: int = DISK_RESERVE
    """Free space the disk holding the work folder keeps: a look at a run that finds less stops it
    (disk_low). The backstop for disk no look can count."""

    def __post_init__(self):
        self.cgroups = cgroup_kind()
        self.drop_to = jail_uid() if os.geteuid() == 0 else None

    # -- in the child, before bubblewrap starts ------------------------------------------------------
    def drop_privileges(self) -> None:
        """A grader running as root starts the jail as a uid of its own (jail_uid()), so that even
        outside its namespaces the jailed programs own nothing and no other process is of their user."""
        if self.drop_to is not None:
            os.setgroups([])
            os.setgid(self.drop_to)
            os.setuid(self.drop_to)

    def child_setup(self, group: Optional["Group"]) -> None:
        output_limits(self.file_bytes)
        if group is None or not group.paths:
            resource.setrlimit(resource.RLIMIT_DATA, (self.memory_bytes, self.memory_bytes))
            resource.setrlimit(resource.RLIMIT_NPROC, (self.processes * 8, self.processes * 8))
        else:
            group.join()
        self.drop_privileges()

    # -- around a run ----------------------------------------------------------------------------------
    def group(self) -> "Group":
        """A fresh cgroup for one run (empty where none can be made)."""
        return Group.make(self) if self.cgroups else Group([])

    def over_processes(self, group: "Group") -> Optional[str]:
        """Why the run's processes are past their limit for good (FORK_BOMB_REFUSALS), or None. The words
        are fixed: the count the program ran up could carry a hidden case's sizes out."""
        if group.refused_forks() < FORK_BOMB_REFUSALS:
            return None
        return (f"kept starting processes past its limit of {self.processes} processes and threads "
                f"(refused {FORK_BOMB_REFUSALS:,} times)")

    def over_disk(self, work: Path, pids: Sequence[int] = ()) -> Optional[str]:
        """Why the work folder is over its limits, or None; with the run's `pids`, the files they hold
        open after deleting them count too (held_bytes), and the disk's reserve is looked at (a run
        that has ended holds nothing any more)."""
        if pids and (low := self.disk_low(work)):
            return low
        try:
            total = held_bytes(pids, os.stat(work).st_dev) if pids else 0
        except TooManyDescriptors as e:
            return str(e)
        try:
            for count, (_, st) in enumerate(protocol.entries(work), 1):
                if count > self.files:
                    return f"made more than {self.files} files in its work folder"
                total += st.st_blocks * 512
        except protocol.Hidden as e:
            return e.why
        if total > self.disk_bytes:
            return f"wrote more than {self.disk_bytes / GIB:g} GiB to disk"
        return None

    def disk_low(self, work: Path) -> Optional[str]:
        """Why the disk holding `work` has less free than its reserve, or None."""
        free = free_bytes(work)
        if free is None or free >= self.disk_reserve_bytes:
            return None
        return f"{DISK_LOW} {_size(self.disk_reserve_bytes)} free"

    def room_to_run(self, work: Path) -> None:
        """DiskLow unless the disk holding `work` has its reserve free, before a run starts there."""
        free = free_bytes(work)
        if free is not None and free < self.disk_reserve_bytes:
            raise DiskLow(f"the disk holding {work} has less than {_size(self.disk_reserve_bytes)} free, which the "
                          f"jail keeps free whatever a graded program does: make room there, or point TMPDIR at "
                          f"a disk that has it, and grade again", free, self.disk_reserve_bytes, work)

    # -- what the records say --------------------------------------------------------------------------
    def describe_processes(self) -> str:
        if self.cgroups:
            return f"at most {self.processes} processes and threads (cgroup pids.max)"
        return f"RLIMIT_NPROC {self.processes * 8} (no cgroup could be made: shared by the grader's user)"

    def describe_memory(self) -> str:
        if self.cgroups:
            return f"{self.memory_bytes / GIB:g} GiB across all its processes (cgroup memory.max, no swap)"
        return f"RLIMIT_DATA {self.memory_bytes / GIB:g} GiB per process (no cgroup could be made)"

    def describe_disk(self) -> str:
        return (f"{self.disk_bytes / GIB:g} GiB and {self.files} files in its work folder (measured while it "
                f"runs and when it ends), paths of at most {protocol.MAX_NESTING:,} bytes, "
                f"{self.file_bytes / GIB:g} GiB per file, /tmp {self.tmp_bytes / GIB:g} GiB, "
                f"{MAX_DESCRIPTORS:,} open files across its threads, {_size(self.disk_reserve_bytes)} always left free "
                f"on the disk")


MAX_DESCRIPTORS = 65_536
"""Descriptors a run's processes may hold, summed over their threads' tables (threads that share a
table count it each time: there is no telling them apart from /proc). Each look at the run reads every
entry, and must stay short: 20,000 descriptors and 24 idle threads held the grader for 10 s past a
1 s time limit. An honest CUDA runner holds some tens, in some tens of threads."""


class DiskLow(Exception):
    """The disk holding a work folder has less free than the reserve before a run starts: nothing may be
    run there until the TA makes room (a stop for the reserve then would be no student's doing)."""

    def __init__(self, message: str, free: int = 0, reserve: int = DISK_RESERVE, work: Optional[Path] = None):
        super().__init__(message)
        self.free, self.reserve, self.work = free, reserve, work

    def passes(self, seconds: float = DISK_SETTLE_S) -> bool:
        """Whether the disk is back above the reserve within `seconds`: a filesystem gives the blocks of
        files just deleted (a grading's work folder, once its outputs are written) back only when its
        journal next commits, every 5 s on ext4."""
        end = time.monotonic() + seconds
        while self.work is not None and (free := free_bytes(self.work)) is not None:
            if free >= self.reserve:
                return True
            if time.monotonic() > end:
                return False
            time.sleep(0.25)
        return False

    def left_by(self, folder: Path, beside: Path, owner: Optional[int] = None) -> tuple:
        """(the words of a stop where `folder`, a grading's work folder, alone keeps the disk below the
        reserve: the files its program left there within its limits, even were every other folder under
        `beside` gone; whether the other folders under `beside`, other gradings' kept files, could give
        the shortfall back). With `owner`, only files of that uid count as left (the jail's own: not the
        runner, objects and logs the grader put there)."""
        def held(top: Path, skip: Optional[Path] = None) -> int:
            n, skipped = 0, f"{skip}/"
            try:
                for path, st in protocol.entries(top):
                    if skip is not None and f"{path}/".startswith(skipped):
                        continue
                    if owner is None or st.st_uid == owner:
                        n += st.st_blocks * 512
            except (OSError, protocol.Hidden):
                pass
            return n
        others, own = held(beside, skip=folder), held(folder)
        if self.free + others >= self.reserve:
            return None, True
        if self.free + others + own < self.reserve:
            return None, False
        return (f"left {_size(own)} in its work folders, and the disk holding them had less than "
                f"{_size(self.reserve)} free"), False


class TooManyDescriptors(Exception):
    """The run holds more than MAX_DESCRIPTORS descriptors: a limit gone over."""


def held_bytes(pids: Sequence[int], dev: int) -> int:
    """Bytes on disk of the files that the processes `pids` hold open after deleting them: such a file
    is in no folder, and fills the disk all the same (opened, unlinked and written, 160 MiB went unseen
    past a 64 MiB limit). Counted: files on the work folder's device `dev`, or on any disk's; not
    memory-backed ones (a memfd, the jail's /tmp), which its memory and /tmp limits hold. Only the
    descriptor tables are read: a file held by a mapping alone or in flight in a socket is not seen
    (reading a CUDA program's /proc/PID/maps waited on its memory map's lock for seconds at a time, in
    the middle of its run), and only the disk's reserve bounds it (disk_low); io_uring, which could hold
    one too, is refused (seccomp.py).
    TooManyDescriptors past MAX_DESCRIPTORS."""
    held, seen = {}, 0
    for pid in pids:
        # Each thread's table: one that called unshare(CLONE_FILES) has its own, which /proc/PID/fd
        # (the leader's, empty once the leader has exited) does not show.
        try:
            tables = [f"/proc/{pid}/task/{tid}/fd" for tid in os.listdir(f"/proc/{pid}/task")]
        except OSError:
            continue
        for table in tables:
            try:
                fds = os.listdir(table)
            except OSError:
                continue
            seen += len(fds)
            if seen > MAX_DESCRIPTORS:
                raise TooManyDescriptors(f"held more than {MAX_DESCRIPTORS:,} open files across its threads")
            for fd in fds:
                try:  # the link's text first: only a deleted file's is looked at further
                    if not os.readlink(f"{table}/{fd}").endswith(" (deleted)"):
                        continue
                    st = os.stat(f"{table}/{fd}")
                except OSError:
                    continue
                if stat.S_ISREG(st.st_mode) and st.st_nlink == 0 and (st.st_dev == dev or os.major(st.st_dev) != 0):
                    held[(st.st_dev, st.st_ino)] = st.st_blocks * 512
    return sum(held.values())


def free_bytes(path: Path) -> Optional[int]:
    """What the disk holding `path` has free for a user who is not root (None: it cannot be looked at)."""
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def _size(n: int) -> str:
    """1073741824 -> "1 GiB", 201326592 -> "192 MiB", 2**40 -> "1,024 GiB"."""
    if n < GIB:
        return f"{n / (1 << 20):.0f} MiB"
    return f"{n / GIB:.3g} GiB" if n < 100 * GIB else f"{n / GIB:,.0f} GiB"


def output_limits(file_bytes: int = FILE_BYTES) -> None:
    """In the child, for every program the grader runs: no file past `file_bytes`, no core dump. A core
    limit of 0 still starts a core_pattern's "|program" (as root, outside any jail, reading the crashed
    program's memory); 1 is the kernel's value for "no dump, not even to a pipe" (seccomp.py keeps a
    jailed program from changing it)."""
    resource.setrlimit(resource.RLIMIT_FSIZE, (file_bytes, file_bytes))
    resource.setrlimit(resource.RLIMIT_CORE, (1, 1))


def jail_uid(uids: Optional[Sequence[int]] = None) -> int:
    """The first uid of `uids` (default: JAIL_UIDS, then 65533 down to 60000, for a container whose
    user namespace maps only 65,536 ids) that this user namespace maps, that no account, group, live
    process or /etc/subuid or /etc/subgid range has (another user's containers run as those); its gid
    is the same number."""
    candidates = list(uids) if uids is not None else [*JAIL_UIDS, *range(65533, 59999, -1)]
    taken = _process_uids()
    others = [r for path in SUBORDINATE for r in _ranges(path)]
    mapped = [_ranges(path, inside=True) for path in ID_MAPS]
    for uid in candidates:
        if not (uid in taken or _within(uid, others) or not all(_within(uid, m) for m in mapped) or _named(uid)):
            return uid
    raise OSError(f"no uid of {candidates[0]}..{candidates[-1]} is free for the jail: each has an account, a "
                  f"running process or another user's subordinate range, or is not mapped here")


def _ranges(path: str, inside: bool = False) -> list:
    """(first, count) of each line of /etc/subuid ("name:first:count") or, with `inside`, of a
    /proc/PID/uid_map ("first-inside first-outside count"); [] where the file cannot be read, and the
    whole id space for an unreadable map."""
    try:
        text = Path(path).read_text()
    except OSError:
        return [(0, 1 << 32)] if inside else []
    out = []
    for line in text.splitlines():
        f = line.split() if inside else line.split(":")
        try:
            out.append((int(f[0]), int(f[2])) if inside else (int(f[1]), int(f[2])))
        except (IndexError, ValueError):
            pass
    return out


def _named(uid: int) -> bool:
    """Whether an account or a group has this number."""
    for lookup in (pwd.getpwuid, grp.getgrgid):
        try:
            lookup(uid)
            return True
        except KeyError:
            pass
    return False


def _within(uid: int, ranges: list) -> bool:
    return any(first <= uid < first + count for first, count in ranges)


def _process_uids() -> set:
    """The real, effective, saved and file-system uids of every live process this one can see (not of
    zombies, which hold nothing: an init that reaps slowly, as in some containers, keeps a jail's)."""
    uids = set()
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/status") as f:
                    fields = dict(line.split(":", 1) for line in f if ":" in line)
                if not fields.get("State", "").strip().startswith("Z"):
                    uids.update(int(u) for u in fields.get("Uid", "").split())
            except (OSError, ValueError):
                pass
    return uids
