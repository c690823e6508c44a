"""The GPUs a batch grades on: one grading per GPU at once (two for a two-GPU assignment), and never
GPUs of two models in one batch unless asked, since the thresholds differ per model."""
from __future__ import annotations

import dataclasses
import threading
from typing import Optional

from .. import gpu as gpu_mod, tasks
from ..results import GpuInfo


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


class Pool:
    """GPUs handed out to gradings: acquire(n) waits until n are free."""

    def __init__(self, infos: dict):
        self.infos = dict(sorted(infos.items()))
        self._free = list(self.infos)
        self._cv = threading.Condition()

    def __len__(self) -> int:
        return len(self.infos)

    def first(self, n: int) -> tuple:
        return tuple(list(self.infos)[:n])

    def acquire(self, n: int) -> tuple:
        """n free GPUs (all of them where there are fewer: the grading then says it cannot run here)."""
        n = min(n, len(self.infos))
        with self._cv:
            self._cv.wait_for(lambda: len(self._free) >= n)
            got, self._free = tuple(self._free[:n]), self._free[n:]
            return got

    def release(self, ids: tuple) -> None:
        with self._cv:
            self._free = sorted(self._free + list(ids))
            self._cv.notify_all()

    def info(self, ids: tuple) -> GpuInfo:
        """What a grading on `ids` is told of its GPU: the first one's, with the count it holds."""
        return dataclasses.replace(self.infos[ids[0]], count=len(ids))
