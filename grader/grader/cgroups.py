"""A run's cgroup: where the grader may make one (root; cgroup v2, or v1's memory and pids controllers),
every process a submission starts is held by one of its own, whose pids.max stops a fork bomb at its
own count and whose memory.max holds all its processes together; the whole group is killed at the
end (limits.py says what is bounded where no cgroup can be made)."""
from __future__ import annotations

import itertools
import os
import signal
import time
from pathlib import Path
from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:
    from .limits import Limits

_CG_ROOT = Path("/sys/fs/cgroup")
_COUNTER = itertools.count()


def cgroup_kind() -> Optional[str]:
    """"v2" or "v1" where this process may make cgroups with memory and pids limits, else None."""
    if os.geteuid() != 0:
        return None
    if (_CG_ROOT / "cgroup.controllers").is_file():
        ctl = (_CG_ROOT / "cgroup.controllers").read_text().split()
        return "v2" if {"memory", "pids"} <= set(ctl) and os.access(_CG_ROOT, os.W_OK) else None
    if all(os.access(_CG_ROOT / c, os.W_OK) for c in ("memory", "pids")):
        return "v1"
    return None


class Group:
    """One run's cgroup(s): one folder on v2, one per controller on v1."""

    def __init__(self, paths: list):
        self.paths = paths

    @classmethod
    def make(cls, limits: Limits) -> "Group":
        name = f"kit-{os.getpid()}-{next(_COUNTER)}"
        try:
            if limits.cgroups == "v2":
                parent = _CG_ROOT / "kit-jails"
                parent.mkdir(exist_ok=True)
                (parent / "cgroup.subtree_control").write_text("+memory +pids")
                d = parent / name
                d.mkdir()
                (d / "memory.max").write_text(str(limits.memory_bytes))
                _try_write(d / "memory.swap.max", "0")
                _try_write(d / "memory.oom.group", "1")
                (d / "pids.max").write_text(str(limits.processes))
                return cls([d])
            mem, pids = _CG_ROOT / "memory" / "kit-jails" / name, _CG_ROOT / "pids" / "kit-jails" / name
            mem.mkdir(parents=True)
            pids.mkdir(parents=True)
            (mem / "memory.limit_in_bytes").write_text(str(limits.memory_bytes))
            _try_write(mem / "memory.memsw.limit_in_bytes", str(limits.memory_bytes))
            (pids / "pids.max").write_text(str(limits.processes))
            paths = [mem, pids]
            # The CPU all its processes used, ended ones too (cpuacct.usage), which the judge reads to tell
            # the program's own load from another program's; without it only the runner's threads count.
            acct = next((_CG_ROOT / c for c in ("cpuacct", "cpu,cpuacct") if os.access(_CG_ROOT / c, os.W_OK)), None)
            if acct is not None:
                try:
                    (acct / "kit-jails" / name).mkdir(parents=True)
                    paths.append(acct / "kit-jails" / name)
                except OSError:
                    pass
            return cls(paths)
        except OSError as e:
            raise OSError(f"cannot make the submission's cgroup: {e}") from None

    def join(self) -> None:
        """Called in the child before exec: it and all it starts belong to the group."""
        for d in self.paths:
            (d / "cgroup.procs").write_text(str(os.getpid()))

    def pids(self) -> list:
        """Its processes, each once (on v1 each controller's folder lists them all)."""
        out = {}
        for d in self.paths:
            try:
                out.update(dict.fromkeys(int(p) for p in (d / "cgroup.procs").read_text().split()))
            except OSError:
                pass
        return list(out)

    def _count(self, file: str, key: str) -> int:
        """`key`'s number in each of the group's folders' `file`, added up; a folder without the file (v1
        keeps one controller's files per folder) adds nothing."""
        return sum(_number(d / file, key) or 0 for d in self.paths)

    def refused_forks(self) -> int:
        """How many times pids.max refused a process or thread to the group so far (0 without cgroups)."""
        return self._count("pids.events", "max")

    def oom_killed(self) -> bool:
        return self._count("memory.events", "oom_kill") + self._count("memory.oom_control", "oom_kill") > 0

    def at_own_memory_limit(self) -> Optional[bool]:
        """Whether its own memory.max is what ran out: v2's memory.events counts under "oom" the times the
        group's use reached its limit with nothing left to reclaim, and never a kill by the machine's
        out-of-memory killer for another program's use, which "oom_kill" counts too. None on v1, which
        cannot tell the two apart."""
        if not any((d / "memory.events").is_file() for d in self.paths):
            return None
        return self._count("memory.events", "oom") > 0

    def cpu_seconds(self) -> Optional[float]:
        """The CPU time all its processes used so far, ended ones too (v2's cpu.stat, v1's cpuacct.usage);
        None where the group has neither."""
        for d in self.paths:
            try:
                return int((d / "cpuacct.usage").read_text()) / 1e9
            except (OSError, ValueError):
                pass
            usec = _number(d / "cpu.stat", "usage_usec")  # v1's cpu controller has one too, of throttling only
            if usec is not None:
                return usec / 1e6
        return None

    def close(self) -> None:
        """Kills whatever is left in the group, then removes it."""
        for d in self.paths:
            _try_write(d / "cgroup.kill", "1")
        end = time.monotonic() + 10
        while self.paths and time.monotonic() < end:
            for pid in self.pids():
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            left = []
            for d in self.paths:
                try:
                    d.rmdir()
                except OSError:
                    left.append(d)
            self.paths = left
            if left:
                time.sleep(0.02)


def _number(path: Path, key: str) -> Optional[int]:
    """`key`'s number in a file of "key number" lines (cpu.stat, pids.events, ...); None where the file or
    the key is not there."""
    try:
        for line in path.read_text().splitlines():
            k, _, v = line.partition(" ")
            if k == key:
                return int(v)
    except (OSError, ValueError):
        pass
    return None


def _try_write(path: Path, text: str) -> None:
    try:
        path.write_text(text)
    except OSError:
        pass
