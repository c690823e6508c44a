"""Scoring: correctness shares, then performance tiers for the GPU the code ran on."""
from __future__ import annotations

from typing import Optional

from .results import GpuInfo, Thresholds
from .tasks import Task


def thresholds(task: Task, gpu: GpuInfo, baseline_rate: Optional[float],
               graded_id: Optional[str] = None) -> Optional[Thresholds]:
    """The task's tiers for this GPU model and graded case; for a GPU the task has no profile for,
    the tiers' fractions of the library baseline measured on the spot. None if neither exists."""
    perf = task.data["performance"]
    tiers = perf.get("tiers", [])
    points = [float(t["points"]) for t in tiers]
    profile = perf.get("gpus", {}).get(gpu.model) if gpu.model else None
    if profile:
        rates = profile["rates"]
        if isinstance(rates, dict):
            rates = rates[graded_id or task.graded[0].case.id]
        return Thresholds(source=profile.get("source", f"profile for {gpu.model}"),
                          rates=[float(r) for r in rates], points=points,
                          estimated=bool(profile.get("estimated", False)))
    if baseline_rate:
        base = perf.get("baseline", "the library")
        return Thresholds(
            source=(f"no thresholds for {gpu.name}: derived from {base} measured now "
                    f"({baseline_rate:,.0f} {task.metric}) times " +
                    "/".join(f"{t['fraction']:g}" for t in tiers)),
            rates=[t["fraction"] * baseline_rate for t in tiers], points=points, estimated=True)
    return None


def performance_points(rate: float, th: Thresholds) -> float:
    """The points of the highest tier the rate reaches (0 below the first)."""
    earned = 0.0
    for r, p in zip(th.rates, th.points):
        if rate >= r:
            earned = p
    return earned


def correctness_points(task: Task, passed_ids: set) -> float:
    """An equal share of the correctness points for each passing scored case."""
    scored = [c for c in task.cases if c.scored]
    return task.points["correctness"] * sum(c.id in passed_ids for c in scored) / len(scored)
