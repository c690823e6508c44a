"""Running programs that hold student code: own process group, time limit, capped output, and in
batch and Gradescope grading the jail (jail.py) with per-submission limits (limits.py).

Output goes to files, and only their last few kilobytes are ever read back: a submission that
prints gigabytes costs disk up to the file-size limit, not the grader's memory. Files a jailed
program could have made are read only as regular files, never through a link or a pipe, and its
work folder is swept of everything but regular files and folders once it has ended. A batch's builds
run at the idle CPU priority (SCHED_IDLE, idle_builds()): it builds on every core while it times, and a
compiler must never take a CPU from a timing's judge or runner.
"""
from __future__ import annotations

import ctypes
import os
import re
import stat
import signal
import subprocess
import sys
import threading
import time
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from . import jail as jail_mod
from . import limits as limits_mod
from . import protocol, seccomp
from .jail import Jail
from .limits import Limits

try:  # loaded once here: after fork, in the child, only the call is made
    _LIBC = ctypes.CDLL(None) if sys.platform.startswith("linux") else None
except OSError:
    _LIBC = None

TAIL_BYTES = 4000



MEMORY_STOP = "GiB of host memory"
"""How a stop for going over the jail's memory limit ends ("used more than 16 GiB of host memory")."""
MACHINE_SHORT = "the machine ran short of memory"
"""What a memory stop says where it may not be the program's own: the machine's out-of-memory killer,
which other programs' use can bring about, ended it below its limit (cgroup v2 tells the two apart), or
could have (v1 cannot)."""


def memory_stop(limit_bytes: int, own: Optional[bool]) -> str:
    """The words of a run killed by an out-of-memory killer: at its own limit (`own`), below it (False),
    or either (None)."""
    gib = f"{limit_bytes / 2**30:g}"
    if own:
        return f"used more than {gib} {MEMORY_STOP}"
    if own is None:
        return f"used more than {gib} {MEMORY_STOP}, or {MACHINE_SHORT}"
    return f"was killed by the out-of-memory killer below its limit of {gib} {MEMORY_STOP}: {MACHINE_SHORT}"

@dataclass
class Run:
    returncode: int
    """Exit status; negative: killed by that signal."""
    timed_out: bool
    """True when the grader stopped it for running too long."""
    seconds: float
    """Wall time."""
    output: str
    """The last few kilobytes of its stdout and stderr, for messages only."""
    stopped_for: str = ""
    """Why the grader stopped a jailed program that broke a limit ("wrote more than 8 GiB to disk")."""
    cpu_s: Optional[float] = None
    """The CPU time of all its processes (a jailed run's cgroup's; None where it had none)."""


def _setup(group=None, limits: Limits = None, idle: bool = False, cpus: Optional[tuple] = None):
    def child():
        os.setsid()  # its own process group, so a kill reaches everything it started
        if cpus:  # on_cpus(): inherited by whatever it starts
            try:
                os.sched_setaffinity(0, cpus)
            except OSError:
                pass
        if idle:  # idle_builds(): inherited by the compiler's children
            try:
                os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
            except (OSError, AttributeError):
                pass
        if limits is not None:
            limits.child_setup(group)
        else:
            limits_mod.output_limits()
        if _LIBC is not None:
            _LIBC.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG (after any change of uid, which clears it)
            if limits is not None:
                _LIBC.prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS
    return child


def seal() -> None:
    """Closes this process to others of its user: no /proc/PID/fd, mem or environ for them, no ptrace.
    A runner outside a jail runs as the grader's user, and could otherwise reopen the grader's end of
    the judge's results pipe through /proc/PID/fd and write records into it."""
    if _LIBC is not None:
        _LIBC.prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE


def tail(path: Path, limit: int = TAIL_BYTES) -> str:
    """The last `limit` bytes of a regular file (never through a link, never a pipe), as text."""
    return protocol.read_regular(path, limit, from_end=True).decode(errors="replace")


def last_line(text: str, limit: int = 200) -> str:
    """The last line of a program's output, cut to `limit` characters ("" for none)."""
    return (text.strip().splitlines() or [""])[-1][:limit]


def sweep(work: Path) -> None:
    """Removes every entry of `work` that is neither a regular file nor a folder (links, pipes,
    sockets, devices), so that nothing the grader opens there later leads out of it; folders nested
    too deep to walk or closed to the grader (protocol.Hidden) are removed whole, or, where even that
    fails, left: the grader opens nothing inside them either."""
    removed = set()
    while True:
        try:
            for path, st in protocol.entries(work):
                if not (stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode)):
                    try:
                        os.unlink(path)
                    except OSError:
                        pass
            return
        except protocol.Hidden as e:
            if e.path in removed:
                return
            removed.add(e.path)
            protocol.remove_tree(e.path)


class Proc:
    """A program started in its own process group, with stdout and stderr into `log`; with a `view`
    (it holds student code: "compile", "run" or "sanitize") and a jail set by confine(), inside that
    jail, with cwd as its only writable folder and `read_only` files added to its view. `pass_fds`
    are handed to it open (the judge's socket); `stdin`, if given, is written to its standard input.
    `gpus` (indices in PCI order) are the GPUs it may use: in a jail, the only ones whose device
    nodes it sees; outside one, those CUDA_VISIBLE_DEVICES names."""

    def __init__(self, cmd: list, cwd: Path, log: Path, env: dict = None, view: Optional[str] = None,
                 read_only: tuple = (), pass_fds: tuple = (), stdin: Optional[bytes] = None,
                 gpus: Optional[tuple] = None):
        self.jail = _JAIL if view else None
        self.cwd = Path(cwd)
        self.group = None
        self.stopped_for = ""
        self.log = log
        if self.jail is not None:
            env = {}
            self.jail.limits.room_to_run(self.cwd)
            jail_mod.no_core_socket()
            self.group = self.jail.limits.group()
            self.jail.prepare(self.cwd)
        else:
            env = outside_env(env if env is not None else os.environ)
            if gpus is not None:
                env.update(gpu_env(gpus))
        self.start = time.monotonic()
        self._next_disk = self.start
        protocol.clear(log)
        try:
            # The calls no jailed program may make, read by bubblewrap from a descriptor of its own.
            with seccomp.descriptor() if self.jail is not None else nullcontext() as refused, open(log, "wb") as out:
                if self.jail is not None:
                    pass_fds = (*pass_fds, refused)
                    cmd = self.jail.command(cmd, self.cwd, view, read_only,
                                            physical(gpus) if gpus is not None else None, seccomp_fd=refused)
                self.proc = subprocess.Popen(cmd, cwd=cwd, stdout=out, stderr=subprocess.STDOUT,
                                             stdin=subprocess.DEVNULL if stdin is None else subprocess.PIPE, env=env,
                                             pass_fds=pass_fds,
                                             preexec_fn=_setup(self.group, self.jail.limits if self.jail else None,
                                                               idle=view == "compile" and getattr(_IDLE, "on", False),
                                                               cpus=getattr(_CPUS, "cpus", None)))
            if stdin is not None:
                try:
                    self.proc.stdin.write(stdin)
                    self.proc.stdin.close()
                except BrokenPipeError:
                    pass
        except BaseException:
            if self.group is not None:
                self.group.close()
            raise

    def running(self) -> bool:
        """False once it has ended, or once it broke the jail's disk limit or kept forking past its process
        limit (then stopped_for says so)."""
        if self.proc.poll() is not None:
            return False
        now = time.monotonic()
        if self.jail is not None and now >= self._next_disk:
            self._next_disk = now + 0.25
            limits = self.jail.limits
            pids = self.group.pids() or descendants(self.proc.pid)
            self.stopped_for = limits.over_disk(self.cwd, pids) or limits.over_processes(self.group) or ""
            if self.stopped_for:
                return False
        return True

    def finish(self, timed_out: bool = False) -> Run:
        """Kills whatever is left of it (its whole process group), and says how it ended."""
        cpu_s = None
        try:
            kill(self.proc)  # also whatever it left running in the background, which could hold the GPU
            rc = self.proc.returncode
            if self.group is not None:
                cpu_s = self.group.cpu_seconds()
            if self.jail is not None:
                # The first limit it went over names the stop: a fork bomb stopped for its forks may be
                # killed for its memory on the way out.
                if not self.stopped_for and self.group.oom_killed():
                    self.stopped_for = memory_stop(self.jail.limits.memory_bytes, self.group.at_own_memory_limit())
                # A look at the folder once the run is over: a run shorter than the time between two
                # looks (running()) was never measured at all.
                self.stopped_for = self.stopped_for or self.jail.limits.over_disk(self.cwd) or ""
                if 128 < rc < 160:  # bubblewrap passes a death by signal on as 128 + the signal
                    rc = -(rc - 128)
        finally:
            if self.group is not None:
                self.group.close()
                self.group = None
            if self.jail is not None:
                sweep(self.cwd)
        return Run(rc, timed_out, time.monotonic() - self.start, tail(self.log), self.stopped_for, cpu_s)


def outside_env(env) -> dict:
    """The environment of a program run outside the jail (the judge, the library's server, make), as
    the grader's own but for LD_LIBRARY_PATH's empty and relative entries: the loader reads them against
    the current folder, and `export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH` leaves one
    where it was unset. In a submission's work folder, which its jailed runner writes, a libcublas.so.13
    left there would otherwise be loaded by the next judge, as the TA."""
    env = dict(env)
    if "LD_LIBRARY_PATH" in env:
        kept = [d for d in re.split(r"[:;]", env["LD_LIBRARY_PATH"]) if d.startswith("/")]
        if kept:
            env["LD_LIBRARY_PATH"] = ":".join(kept)
        else:
            del env["LD_LIBRARY_PATH"]
    return env


def physical(gpus: tuple) -> list:
    """The names of the GPUs `gpus` (indices among those this grader sees) for a program started from
    here: where the grader was itself given some GPUs (CUDA_VISIBLE_DEVICES, as Slurm sets it), index i
    is the i-th of those, else it is GPU i."""
    given = [g.strip() for g in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if g.strip()]
    return [given[i] if i < len(given) else str(i) for i in gpus] if given else [str(i) for i in gpus]


def gpu_env(gpus: tuple) -> dict:
    """The environment that shows a CUDA program the GPUs `gpus` (indices this grader sees) alone."""
    return {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": ",".join(physical(gpus))}


def run(cmd: list, cwd: Path, log: Path, timeout: float, env: dict = None, watchdog=None,
        view: Optional[str] = None, read_only: tuple = (), gpus: Optional[tuple] = None) -> Run:
    """Run cmd in cwd (see Proc) until it ends. `watchdog()` is polled while it runs; when it returns
    True the process is stopped as timed out (used for per-case limits)."""
    p = Proc(cmd, cwd, log, env=env, view=view, read_only=read_only, gpus=gpus)
    timed_out = False
    try:
        while p.running():
            try:
                p.proc.wait(timeout=0.05)
            except subprocess.TimeoutExpired:
                if time.monotonic() - p.start > timeout or (watchdog and watchdog()):
                    timed_out = True
                    break
    finally:  # also when the grader itself is interrupted (Ctrl-C)
        result = p.finish(timed_out)
    return result


def descendants(pid: int) -> list:
    """`pid` and every process it started that is still running (read from /proc): a jailed run's
    processes, where it has no cgroup that lists them."""
    children = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(d))
    out, stack = [], [pid]
    while stack:
        p = stack.pop()
        out.append(p)
        stack += children.get(p, [])
    return out


def kill(proc: subprocess.Popen):
    """SIGKILL to its whole process group, then reap it (its exit status is kept if it had ended)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


_JAIL: Optional[Jail] = None


_IDLE = threading.local()


@contextmanager
def idle_builds():
    """Builds this thread starts in the block run at the idle CPU priority (SCHED_IDLE): a CPU only when
    no other process wants it. For a batch's builds beside its timings; not for a build on its own, which
    a machine busy with other work would then starve past its time limit."""
    _IDLE.on = True
    try:
        yield
    finally:
        _IDLE.on = False


_CPUS = threading.local()


@contextmanager
def on_cpus(cpus):
    """Programs this thread starts in the block run on `cpus` only (None: on any the grader may use).
    A batch keeps its timings on CPUs of their own (batch.gpus.split_cpus)."""
    before = getattr(_CPUS, "cpus", None)
    _CPUS.cpus = tuple(cpus) if cpus else None
    try:
        yield
    finally:
        _CPUS.cpus = before


def pinned() -> Optional[tuple]:
    """The CPUs on_cpus() gave this thread's programs (None: any): for a thread started on its behalf."""
    return getattr(_CPUS, "cpus", None)


def confine(jail: Optional[Jail]) -> None:
    """From now on, programs run with a view go through `jail` (None: no jail, as for a single grading
    on a student's own machine)."""
    global _JAIL
    _JAIL = jail


def current_jail() -> Optional[Jail]:
    return _JAIL


def open_jail(work_root: Path, include: Path, probe: Optional[Path], limits: Limits, hidden: tuple = ()) -> Jail:
    """The jail for a batch or a Gradescope grading, checked, and every later run with a view confined
    to it; `hidden`: the kit, the class and the outputs, never shown (Jail.hidden). JailError when
    there is none here, or when `probe` (a kit-built CUDA program, linked as a runner is) does not
    reach the GPU from inside it."""
    os.chmod(work_root, 0o711)  # the jailed user (the jail's own uid, for a root grader) goes through to its folder
    stage = work_root / "kit"
    stage.mkdir(mode=0o755)
    j = jail_mod.find(include, probe, limits, stage, hidden)
    if probe is not None:
        d = work_root / "probe"
        d.mkdir()
        exe = j.expose(probe)
        confine(j)
        r = run([str(exe)], d, work_root / "probe.log", timeout=120, view="run", read_only=(exe,))
        if r.returncode != 0:
            confine(None)
            raise jail_mod.JailError(
                f"the GPU does not answer inside the jail (the probe exited {r.returncode}: "
                f"{last_line(r.output)}); check that /dev/nvidia* and libcuda.so.1 "
                f"are where `ldconfig -p` says, or pass --no-isolation for debugging only")
    confine(j)
    return j


def expose(path: Path) -> Path:
    """The path at which a jailed step can read the kit file `path` (a header folder, a runner
    object): a copy the jail may read, where there is a jail; the file itself otherwise."""
    return _JAIL.expose(path) if _JAIL is not None else Path(path)
