"""The GPUs a batch grades on: a timing has its GPUs to itself (two for a two-GPU assignment), checks
share them, and never GPUs of two models in one batch unless asked, since the thresholds differ per
model."""
from __future__ import annotations

import dataclasses
import threading
from contextlib import contextmanager
from typing import Callable, Optional

from .. import gpu as gpu_mod, tasks
from ..cpus import by_core
from ..results import GpuInfo


MIN_CPUS_TO_SPLIT = 8
"""A machine with fewer CPUs keeps them all for everything (its builds would lose too much)."""


def split_cpus(cpus: list, gpu_ids: list, core: Optional[Callable] = None) -> tuple:
    """(the CPUs of the builds and checks, {GPU: the CPUs of its timings}): half of a machine's cores
    are kept for the timings, an equal share per GPU, so that a timing's judge and program never wait
    for a CPU that a compiler or a check holds. The idle CPU priority of the builds was not enough:
    conv1d's reference timed beside twice as many heavy compiles as cores was "too busy to time" in 3
    of 11 runs of make test on an H100 (a compiler in the kernel is not preempted at once, and a timed
    run may wait 0.02 ms). Whole cores (`core`: a CPU's core, core_of() by default): the two threads of
    a core share its units, and a check on one would slow a judge on the other without its waiting for
    a CPU at all. (None, {}) where there are fewer than MIN_CPUS_TO_SPLIT CPUs or fewer than 2 a GPU:
    nothing is pinned."""
    cpus, gpu_ids = sorted(cpus), list(gpu_ids)
    units = by_core(cpus, core)
    per = (len(units) // 2) // max(1, len(gpu_ids))
    shared = len(units) - per * len(gpu_ids)
    timing = {g: sorted(c for u in units[shared + k * per:shared + (k + 1) * per] for c in u)
              for k, g in enumerate(gpu_ids)}
    if len(cpus) < MIN_CPUS_TO_SPLIT or not timing or min(len(t) for t in timing.values()) < 2:
        return None, {}
    return sorted(c for u in units[:shared] for c in u), timing


def parse(text: Optional[str]) -> Optional[list]:
    """"0,2" -> [0, 2]; TaskError for anything else."""
    if not text:
        return None
    try:
        ids = [int(x) for x in str(text).split(",") if x.strip() != ""]
    except ValueError:
        ids = []
    if not ids or len(set(ids)) != len(ids) or min(ids) < 0:
        raise tasks.TaskError(f"--gpus {text}: expected GPU numbers as nvidia-smi shows them, e.g. 0,2")
    return ids


def choose(requested: Optional[list], mixed: bool = False, say=print) -> dict:
    """{index: GpuInfo} of the GPUs to grade on: `requested`, or every GPU of GPU 0's model."""
    first = gpu_mod.detect(0)
    ids = requested if requested is not None else list(range(first.count or 1))
    for i in ids:
        if not 0 <= i < (first.count or 1):
            raise tasks.TaskError(f"--gpus: there is no GPU {i} on this machine (it has {first.count}: 0 to "
                                  f"{first.count - 1})")
    infos = {i: (first if i == 0 else gpu_mod.detect(i)) for i in ids}
    models = {}
    for i, info in infos.items():
        models.setdefault(info.name, []).append(i)
    if len(models) > 1 and not mixed:
        if requested is not None:
            raise tasks.TaskError("--gpus names GPUs of different models (" + "; ".join(
                f"{', '.join(map(str, v))}: {k}" for k, v in models.items()) + "), whose thresholds differ: name "
                "GPUs of one model, or add --mixed-gpus to mix them (each record names its GPU)")
        keep = models[infos[ids[0]].name]
        left = sorted(set(ids) - set(keep))
        say(f"batch: GPUs {', '.join(map(str, left))} left out: another model than GPU {ids[0]} "
            f"({infos[ids[0]].name}); --gpus chooses, --mixed-gpus mixes models")
        infos = {i: infos[i] for i in keep}
    return infos


CHECK_MEMORY = 16 << 30
"""GPU memory given to each check beside others: a jacobi check holds about 8 GiB (the case's three
1 GiB fields, which the runner shares, the judge's copy of the output, the truth's three fields and
the output's starting values), with room for a submission's scratch."""
MAX_CHECKS = 4
"""More checks at once do not end a class sooner: each CUDA program's start takes a driver lock all
processes share. The kit's test class on an H200 (141 GiB, room for 8) with --checks-per-gpu 8: its
checks took 590 s in all against 281 s at 4, four more of them ran again alone after a fault or a
timeout beside others, and the class took 173 s against 168 s."""


def default_checks(info: GpuInfo) -> int:
    """Checks side by side on a GPU of this memory: one per CHECK_MEMORY, 1 to MAX_CHECKS (MAX_CHECKS
    where the memory is not known)."""
    if not info.memory_bytes:
        return MAX_CHECKS
    return max(1, min(MAX_CHECKS, info.memory_bytes // CHECK_MEMORY))


class Closed(Exception):
    """The batch stopped: no GPU is handed out any more."""


class Check:
    """One check's hold on its GPUs: whether another check ran on them at some moment of it."""

    def __init__(self, ids: tuple):
        self.ids = ids
        self.shared = False


class Pool:
    """GPUs handed out to gradings. Checks (correctness, races) share: check(n) holds n GPUs with up
    to `checks` - 1 other checks each. A timing holds its GPUs alone: acquire(n) waits until no check
    is left to start (expect_check() announces one), then has n GPUs reserved, so that no new check
    starts there, and waits for the checks running there. Checks go first because they run side by
    side: the GPU time of a batch is then about its timings plus its checks / `checks`."""

    def __init__(self, infos: dict, checks: int = 1):
        self.infos = dict(sorted(infos.items()))
        self.checks = max(1, checks)
        self._alone = set()      # GPUs held by a timing
        self._reserved = set()   # GPUs a timing waits for
        self._running = {i: [] for i in self.infos}  # the checks on each GPU
        self._waiting = 0  # checks announced and not started
        self._closed = False
        self._cv = threading.Condition()

    def __len__(self) -> int:
        return len(self.infos)

    def first(self, n: int) -> tuple:
        return tuple(list(self.infos)[:n])

    def acquire(self, n: int) -> tuple:
        """n GPUs for a timing, alone (all of them where there are fewer: the grading then says it cannot
        run here)."""
        n = min(n, len(self.infos))
        with self._cv:
            self._cv.wait_for(lambda: self._closed or (self._waiting == 0 and len(self._open()) >= n))
            got = self._least_busy(self._open(), n)
            self._reserved |= set(got)
            self._cv.wait_for(lambda: self._closed or not any(self._running[i] for i in got))
            self._reserved -= set(got)
            if self._closed:
                raise Closed
            self._alone |= set(got)
            return got

    def release(self, ids: tuple) -> None:
        with self._cv:
            self._alone -= set(ids)
            self._cv.notify_all()

    def expect_check(self) -> None:
        """A check will ask for GPUs soon: timings wait for it."""
        with self._cv:
            self._waiting += 1

    @contextmanager
    def check(self, n: int):
        """n GPUs shared with other checks (Check.shared says whether one ran beside it)."""
        n = min(n, len(self.infos))
        with self._cv:
            room = lambda: [i for i in self._open() if len(self._running[i]) < self.checks]  # noqa: E731
            self._cv.wait_for(lambda: self._closed or len(room()) >= n)
            if self._closed:
                raise Closed
            c = Check(self._least_busy(room(), n))
            self._waiting = max(0, self._waiting - 1)
            for i in c.ids:
                for other in self._running[i]:
                    other.shared = c.shared = True
                self._running[i].append(c)
        try:
            yield c
        finally:
            with self._cv:
                for i in c.ids:
                    self._running[i].remove(c)
                self._cv.notify_all()

    def close(self) -> None:
        """The batch stops: whatever waits for a GPU gets Closed (checks announced but never started
        would otherwise keep a timing waiting)."""
        with self._cv:
            self._closed = True
            self._cv.notify_all()

    def _least_busy(self, ids: list, n: int) -> tuple:
        """The n of `ids` with the fewest checks running, in order."""
        return tuple(sorted(sorted(ids, key=lambda i: (len(self._running[i]), i))[:n]))

    def _open(self) -> list:
        """GPUs neither held by a timing nor reserved for one."""
        return [i for i in self.infos if i not in self._alone and i not in self._reserved]

    def info(self, ids: tuple) -> GpuInfo:
        """What a grading on `ids` is told of its GPU: the first one's, with the count it holds."""
        return dataclasses.replace(self.infos[ids[0]], count=len(ids))
