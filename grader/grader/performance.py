"""The performance stage of a grading: each graded case timed by the judge on fresh secret inputs,
every timed run's output checked, the library's route timed by the same judge once the runner is
gone, and the rate scored against the GPU's thresholds (a rate above the GPU's peak is flagged,
never scored)."""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Optional

from . import build, judged, protocol, sandbox, score
from .checks import explain, number
from .gpu import peak
from .results import Baseline, GpuInfo, GradeResult, Performance, Timing, Verdict
from .tasks import Task, describe


def performance(task: Task, work: Path, gpu: GpuInfo, secret: Optional[int], result: GradeResult,
                gpus: Optional[tuple] = None, all_routes: bool = False, baselines: Optional[Callable] = None) -> None:
    """Times every graded case; the performance points are the mean of theirs. The first failure
    (timeout, fault, wrong timed output, impossible rate) ends the stage with its verdict."""
    for graded in task.graded:
        perf = time_one(task, work, gpu, graded, secret, result, gpus, all_routes, baselines)
        if perf is None:
            return
        result.performance.append(perf)
    points = sum(p.points for p in result.performance) / len(result.performance)
    result.score = result.correctness_points + points
    result.message = "; ".join(
        f"{p.rate:,.0f} {task.metric}" + (f" ({p.rate / p.baseline_rate:.2f}x {p.baseline_name})" if p.baseline_rate else "")
        + (f" at {describe(p.params)}" if len(task.graded) > 1 else "")
        for p in result.performance)


def time_one(task: Task, work: Path, gpu: GpuInfo, graded, secret: Optional[int], result: GradeResult,
              gpus: Optional[tuple] = None, all_routes: bool = False,
              baselines: Optional[Callable] = None) -> Optional[Performance]:
    g = graded.case
    line = protocol.plan_line("timed", g.id, g.seed, g.tol, g.reference, g.params,
                              warmup=graded.warmup, runs=graded.runs)
    limit = task.timeouts["timed"]
    s = judged.session(task, work, gpu.arch, line + "\n", f"timed-{g.id}", limit, 1, secret, gpus)
    timed = next((r for r in s.records if r.get("event") == "timed"), None)
    if s.timed_out:
        return _fail(result, Verdict.TIMEOUT, f"the timed runs did not finish within {limit} s")
    if timed is None or s.ended_early():
        v, msg = s.fault(g.id)
        return _fail(result, v, f"in the timed runs: {msg}")

    checks = {g.id: [r for r in s.records if r.get("event") == "check" and r.get("case") == g.id]}
    bad = [r for r in checks[g.id] if not r.get("pass")]
    if bad or not checks[g.id]:
        r = bad[0] if bad else {"reason": "no output was checked"}
        return _fail(result, Verdict.INCORRECT,
                          f"the output of timed run {r.get('run', '?')} is wrong: {explain(r, g.tol)}")

    # Values the entry point returned (a count of sweeps) enter the work as the checker verified them.
    returned = {}
    for name in task.returned:
        values = sorted(number(r.get("value")) for r in checks[g.id] if r.get("array") == name and "value" in r)
        if values:
            returned[name] = values[len(values) // 2]
    work_units = task.work(g.params, returned)
    # The library's baseline route (or all its routes) and the empty call, timed by the same judge
    # once the runner is gone.
    baseline = task.data["performance"].get("baseline", "")
    routes, overhead_ms = (baselines or library_times)(task, work, gpu.arch, line + "\n", g.id, graded.warmup, gpus,
                                                        None if all_routes else baseline)
    timing = Timing(without_overhead(timed["times_ms"], overhead_ms), graded.warmup)
    rate = work_units / (timing.median_ms / 1e3)
    nbytes = task.bytes(g.params, returned)
    perf = Performance(g.id, g.params, task.metric, timing, rate,
                       gbs=nbytes / (timing.median_ms / 1e3) / 1e9 if nbytes else None,
                       baseline_name=baseline,
                       judge_read_ms=overhead_ms)

    for name, timing in routes:
        perf.baselines.append(Baseline(name, work_units / (timing.median_ms / 1e3), timing))
    primary = next((b for b in perf.baselines if b.name == perf.baseline_name), None)
    if primary:
        perf.baseline_rate = primary.rate

    per = float(task.data["metric"].get("per", 1.0))
    pk, pk_source = peak(gpu, task.peak_kind)
    if task.gpus_required > 1:  # each GPU brings its own peak
        pk, pk_source = pk * task.gpus_required, f"{task.gpus_required} x {pk_source}"
    # peak() gives GFLOP/s or GB/s; the metric's own unit is work/per per second.
    if task.peak_kind != "dram":
        perf.peak = pk * 1e9 / per
    elif nbytes and nbytes > gpu.l2_bytes * task.gpus_required:
        # The metric's rate when its bytes move at the bandwidth (for GB/s, the bandwidth itself).
        # A bandwidth bound holds only for data that cannot sit in L2.
        perf.peak = pk * 1e9 * work_units / nbytes
    if perf.peak and rate > perf.peak:
        result.performance.append(perf)  # on the record, unscored
        return _fail(result, Verdict.INVALID_MEASUREMENT,
                          f"{rate:,.0f} {task.metric} is above this GPU's peak of {perf.peak:,.0f} "
                          f"({pk_source}): the time cannot be right, so it is not scored")
    if perf.gbs and nbytes > gpu.l2_bytes:
        bw, bw_source = peak(gpu, "dram")
        bw *= task.gpus_required
        if perf.gbs > bw:
            result.performance.append(perf)
            return _fail(result, Verdict.INVALID_MEASUREMENT,
                              f"{perf.gbs:,.0f} GB/s is above this GPU's memory bandwidth of {bw:,.0f} GB/s "
                              f"({bw_source}): the time cannot be right, so it is not scored")
    perf.thresholds = score.thresholds(task, gpu, perf.baseline_rate, g.id)
    if perf.thresholds:
        perf.points = score.performance_points(rate, perf.thresholds)
    return perf


def _fail(result: GradeResult, verdict: Verdict, message: str) -> None:
    """No performance points; a wrong timed output loses the correctness points too, since the
    submission computed right only when it was not being timed."""
    result.verdict, result.message = verdict, message
    result.score = 0.0 if verdict == Verdict.INCORRECT else result.correctness_points
    return None


def without_overhead(times_ms: list, overhead_ms: float) -> list:
    """Timed runs with the round trip of an empty call taken off (never below a nanosecond)."""
    return [max(float(t) - overhead_ms, 1e-6) for t in times_ms]


def library_times(task: Task, work: Path, arch: str, plan: str, case_id: str, warmup: int,
               gpus: Optional[tuple] = None, route: Optional[str] = None) -> tuple:
    """([(library route, Timing)], overhead ms): the route named `route` (None: every route), served by
    the checker and timed by the judge exactly as the student's code is, and the least time of an
    empty call through the same round trip (the checker's, so that no student code can make it
    longer), taken off every route's times here and off the student's by the caller."""
    checker = build.checker_path(task, arch)
    limit = task.timeouts["timed"] * 4
    s = judged.run(checker, plan, [str(checker), "serve"], work, f"baseline-{case_id}", limit, limit, view=None,
                   judge_args=("--baseline",) + (("--route", route) if route else ()), gpus=gpus)
    judged.judge_failed(task, s)
    empty = [min(r["times_ms"]) for r in s.records if r.get("event") == "overhead"]
    overhead = float(empty[0]) if empty else 0.0
    routes = [(r["library"], Timing(without_overhead(r["times_ms"], overhead), warmup))
              for r in s.records if r.get("event") == "baseline"]
    if s.timed_out or not routes or s.ended_early():
        log = sandbox.tail(work / f"baseline-{case_id}.log")
        raise build.KitError(f"timing the {task.name} baseline failed:\n{log}")
    return routes, overhead
