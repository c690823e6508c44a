"""The library's routes in a batch: timed once per graded case and GPU for the whole class, and again
once that measurement is MAX_AGE_S old. Every student of a batch is then compared with the same
measurement (the same bar for the whole class, where a grading of its own would give each student
another draw of the GPU's drift), and a grading spends its GPU time on the student's code: for a
correct submission, timing the library took a third to a half of the performance stage."""
from __future__ import annotations

import threading
import time
from typing import Optional

from .. import performance

MAX_AGE_S = 600
"""Ten minutes: a GPU's speed drifts by a percent or two over minutes (bench/<gpu>/fairness), far
less than a tier apart."""


class SharedBaselines:
    """grade.Options.baselines for a batch: performance.library_times, kept per (assignment, case, GPUs, route,
    plan) for MAX_AGE_S. Timed in the grading of whichever submission needs it first, after its
    runner is gone, exactly as a grading of its own times it."""

    def __init__(self, max_age_s: float = MAX_AGE_S, clock=time.monotonic):
        self.max_age_s = max_age_s
        self._clock = clock
        self._kept = {}
        """(assignment, case, GPUs, route, plan) -> (monotonic time, (routes, overhead ms))"""
        self._at = {}
        """(assignment, case, GPUs) -> the wall-clock time of its latest measurement"""
        self._lock = threading.Lock()

    def __call__(self, task, work, arch, plan, case_id, warmup, gpus=None, route=None):
        key = (task.name, case_id, tuple(gpus or ()), route, plan)
        with self._lock:
            kept = self._kept.get(key)
        if kept and self._clock() - kept[0] < self.max_age_s:
            return kept[1]
        got = performance.library_times(task, work, arch, plan, case_id, warmup, gpus, route)
        with self._lock:
            self._kept[key] = (self._clock(), got)
            self._at[key[:3]] = time.strftime("%H:%M:%S")
        return got

    def note(self, name: str, case_id: str, gpus) -> Optional[str]:
        """What a record says of where its library times come from."""
        with self._lock:
            at = self._at.get((name, case_id, tuple(gpus or ())))
        if not at:
            return None
        return (f"the library's times: measured once for this batch on this GPU (at {at}, again every "
                f"{self.max_age_s / 60:g} minutes), the same for every student")
