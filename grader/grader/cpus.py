"""Which CPUs the grader's programs run on: a machine's CPUs by core, and a timed session's judging thread
kept on a core of its own while it times a run, apart from the program it times."""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterable, Optional


def core_of(cpu: int) -> str:
    """The CPUs of a CPU's core (thread_siblings_list, "4,12"), as the kernel lists them; the CPU itself
    where it does not say."""
    try:
        return Path(f"/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list").read_text().strip()
    except OSError:
        return str(cpu)


def by_core(cpus: Iterable[int], core: Optional[Callable] = None) -> list:
    """`cpus` grouped by core (`core`: core_of() by default), each group sorted, the groups by their first CPU."""
    cores = {}
    for c in sorted(cpus):
        cores.setdefault((core or core_of)(c), []).append(c)
    return sorted(cores.values())


def apart(cpus: Iterable[int], core: Optional[Callable] = None) -> tuple:
    """(the judge's CPUs, the runner's) for a timed session on `cpus`: the judge gets the last core, the
    runner every other; split by CPU where all are of one core; (None, None) for a single CPU.
    The two threads a timed run's round trip depends on both spin while the kernel runs: the judge's
    waiting for "done", the runner's in the CUDA runtime's synchronize (which spins while a machine has
    more CPUs than active contexts). Where the scheduler put them on one CPU, each waited for the other
    and the waits read as other processes' (performance.py): the timing was taken again. Graded alone
    on an H200, on 8 of its CPUs or on 2, conv1d's reference was timed more than once in 14 of 49
    gradings, and in 2 of 17 with its judge apart: fewer, though so few cannot say how many fewer. So
    was hostile/affinity_hop.cu, whose thread cannot move (seccomp.py), once in a class graded beside
    the CPU tests. The judge keeps to its CPUs only while it times a run (judge.cu). The runner's
    threads keep the CPUs they start with: moving one is refused in the jail."""
    groups = by_core(cpus, core)
    if len(groups) == 1:
        groups = [[c] for c in groups[0]]
    if len(groups) < 2:
        return None, None
    return tuple(groups[-1]), tuple(c for g in groups[:-1] for c in g)


def cpu_list(cpus) -> str:
    """[0, 1, 2, 5] -> "0-2,5" (as /proc/PID/status and taskset write them)."""
    runs, out = [], []
    for c in sorted(cpus):
        if runs and c == runs[-1][1] + 1:
            runs[-1][1] = c
        else:
            runs.append([c, c])
    for a, b in runs:
        out.append(str(a) if a == b else f"{a}-{b}")
    return ",".join(out)
