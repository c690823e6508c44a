"""The grade verb: one submission of one assignment, built, checked, timed and scored.

  build       kernel.cu compiled on its own, scanned for forbidden calls, linked with the runner
  correctness every case on inputs the judge (no student code) draws from a secret seed when the
              call is due; the runner only calls the entry point; the judge reads the outputs
              itself and decides; a fault costs only its own case
  performance only when every case is correct: fresh secret inputs per timed run, L2 flushed, the
              judge's clock stopped once the outputs are in its hands; every timed run's output
              checked at positions drawn after the run; the library baseline timed by the same
              judge; a rate above the GPU's peak is flagged, never scored
"""
from __future__ import annotations

import shutil
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from . import build, judged, protocol, sandbox, score, workdir
from .checks import case_result, explain, number
from .gpu import NoGpu, peak
from .profile import run as profile_run
from .results import Baseline, CaseResult, GpuInfo, GradeResult, Performance, Timing, Verdict
from .sanitize import sanitize
from .tasks import Task, describe


@dataclass
class Options:
    secret: Optional[int] = None
    """A fixed secret for reproducible inputs (debugging the kit); None draws a fresh one."""
    keep: bool = False
    """Keep the work folder (plans, logs) instead of deleting it."""
    gpus: Optional[tuple] = None
    """The GPUs this grading uses (indices in PCI order), as a batch gives each grading its own; None:
    the machine's default (GPU 0, or 0 and 1 for a two-GPU assignment)."""
    profile: bool = False
    """After a grading that timed the submission, profile one call with Nsight Compute (no effect on the score)."""
    all_routes: bool = False
    """Time every library route of the assignment, not only the baseline the score is drawn from (the
    bench's tables compare them; each route costs a grading a second or two)."""
    baselines: Optional[Callable] = None
    """Times the library's route for a graded case, as _baselines does (a batch passes one that times
    it once for the whole class); None: timed in this grading."""


def grade(task: Task, submission: Path, gpu: GpuInfo, opts: Options = Options()) -> GradeResult:
    work = workdir.new(f"kit-{task.name}-")
    try:
        return _grade(task, submission, gpu, opts, work)
    finally:
        if opts.keep:
            workdir.keep(work)
            print(f"   Work folder kept: {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)


def _grade(task: Task, submission: Path, gpu: GpuInfo, opts: Options, work: Path) -> GradeResult:
    result = new_result(task, submission, gpu, opts)
    if skipped(task, gpu, result):
        return result
    t0 = time.monotonic()
    build.build_harness(task, gpu.arch, work / "harness.log")  # once per architecture, then cached
    result.stage_seconds["harness"] = time.monotonic() - t0
    if not build_stage(task, submission, gpu.arch, work, result):
        return result
    return gpu_stages(task, work, gpu, opts, result)


def new_result(task: Task, submission: Path, gpu: GpuInfo, opts: Options) -> GradeResult:
    """A record that starts as correct; the stages below mark what goes wrong."""
    return GradeResult(task.name, str(submission), Verdict.CORRECT, "", 0.0, task.max_score, gpu=gpu,
                       seed_note="inputs from a fixed secret (reproducible run)" if opts.secret is not None
                       else "inputs drawn fresh for every call by the judge")


def build_stage(task: Task, submission: Path, arch: str, work: Path, result: GradeResult) -> bool:
    """The CPU part (the harness already built): kernel.cu compiled alone into work/, scanned for
    forbidden calls, linked with the runner. False, with the verdict set, when it stops there.
    Submissions may go through this in parallel, each in its own work folder."""
    t0 = time.monotonic()
    ok, log = build.compile_submission(submission, work, arch, task.timeouts["build"])
    result.build_log = log
    if not ok:
        _fail(result, Verdict.BUILD_ERROR, "kernel.cu does not compile: " + _first_error(log))
        return False
    forbidden = build.scan_forbidden(work / "kernel.o")
    if forbidden:
        calls = ", ".join(f"{f.call} ({f.library})" for f in forbidden)
        _fail(result, Verdict.FORBIDDEN_CALL, f"kernel.cu calls what this assignment forbids: {calls}")
        return False
    ok, log = build.link_runner(task, work, arch, task.timeouts["build"])
    result.build_log = (result.build_log + "\n" + log).strip()
    if not ok:
        _fail(result, Verdict.BUILD_ERROR, "kernel.cu does not link: " + _first_error(log))
        return False
    result.stage_seconds["build"] = time.monotonic() - t0
    return True


def skipped(task: Task, gpu: GpuInfo, result: GradeResult) -> bool:
    """True, with the verdict SKIPPED and the reason, where this machine has too few GPUs."""
    if gpu.count >= task.gpus_required:
        return False
    result.verdict = Verdict.SKIPPED
    result.message = (f"{task.name} needs {task.gpus_required} GPUs and this machine has {gpu.count}: "
                      f"not graded here")
    return True


def gpu_stages(task: Task, work: Path, gpu: GpuInfo, opts: Options, result: GradeResult) -> GradeResult:
    """The GPU part, on the runner build_stage() linked in work/: correctness, races, performance.
    Timings must not share the GPU: run one submission's gpu_stages at a time."""
    if check_stages(task, work, gpu, opts, result):
        timing_stages(task, work, gpu, opts, result)
    return result


def check_stages(task: Task, work: Path, gpu: GpuInfo, opts: Options, result: GradeResult) -> bool:
    """Correctness and races: whether the submission goes on to be timed. Nothing here is timed, so
    several submissions' checks may share a GPU (a batch does)."""
    if skipped(task, gpu, result):
        return False
    t0 = time.monotonic()
    try:
        result.cases = correctness(task, work, gpu.arch, opts.secret, opts.gpus)
    except Forbidden as f:
        _fail(result, Verdict.FORBIDDEN_CALL, str(f))
        return False
    result.stage_seconds["correctness"] = time.monotonic() - t0
    passed = {c.id for c in result.cases if c.verdict == Verdict.CORRECT}
    result.correctness_points = score.correctness_points(task, passed)
    result.score = result.correctness_points
    failed = next((c for c in result.cases if c.verdict != Verdict.CORRECT), None)
    if failed:
        result.verdict = failed.verdict
        result.message = f"case {_describe(task, failed.id)}: {failed.message}"
        return False
    if task.sanitize:
        t0 = time.monotonic()
        sanitize(task, work, result, opts.gpus)
        result.stage_seconds["sanitize"] = time.monotonic() - t0
    return result.verdict == Verdict.CORRECT


def timing_stages(task: Task, work: Path, gpu: GpuInfo, opts: Options, result: GradeResult) -> GradeResult:
    """Performance (and the profile, when asked) of a submission check_stages() passed; with the GPU
    to itself."""
    t0 = time.monotonic()
    try:
        performance(task, work, gpu, opts.secret, result, opts.gpus, opts.all_routes, opts.baselines)
    except Forbidden as f:
        return _fail(result, Verdict.FORBIDDEN_CALL, str(f))
    result.stage_seconds["performance"] = time.monotonic() - t0
    if opts.profile and result.performance:
        t0 = time.monotonic()
        result.profile = profile_run.profile(task, work, gpu, opts.gpus, result.performance)
        result.stage_seconds["profile"] = time.monotonic() - t0
    return result


def _fail(result: GradeResult, verdict: Verdict, message: str) -> GradeResult:
    result.verdict, result.message, result.score = verdict, message, 0.0
    return result


def _first_error(log: str) -> str:
    """The line that says most: the linker's own complaint before its "collect2: error" summary."""
    lines = log.splitlines()
    for mark in ("multiple definition", "undefined reference", "error"):
        for line in lines:
            if mark in line.lower():
                return line.strip()[:300]
    return (log.strip().splitlines() or ["(no message)"])[0][:300]


def _describe(task: Task, case_id: str) -> str:
    """"n17 (n=17)"; a hidden case by its id alone (students see this)."""
    c = next(c for c in task.cases if c.id == case_id)
    return c.id if c.hidden else f"{c.id} ({c.describe()})"


# ---------------------------------------------------------------------------------------------
# Correctness.

def correctness(task: Task, work: Path, arch: str, secret: Optional[int], gpus: Optional[tuple] = None) -> list:
    """One CaseResult per case. The judge runs the pending cases in order; after a fault the rest
    run with a fresh runner, after a timeout or a limit of the jail they are not run. Forbidden when
    the runner loaded a forbidden library."""
    verdicts, seconds, checks = {}, {}, {}
    pending = list(task.cases)
    attempt = 0
    while pending:
        attempt += 1
        plan = "".join(protocol.plan_line("case", c.id, c.seed, c.tol, c.reference, c.params) + "\n" for c in pending)
        s = _session(task, work, arch, plan, f"correctness{attempt}", task.timeouts["case"], len(pending), secret, gpus)
        for r in s.records:
            if r.get("event") == "done":
                verdicts[r["case"]] = None  # ran to the end: the comparison decides
                seconds[r["case"]] = r.get("ms", 0) / 1000
            elif r.get("event") == "check":
                checks.setdefault(r.get("case"), []).append(r)
        started = [r["case"] for r in s.records if r.get("event") == "start"]
        current = started[-1] if started and started[-1] not in verdicts else None
        finished = not s.ended_early()
        if finished and not s.timed_out and all(c.id in verdicts for c in pending):
            break
        if s.runner is not None and s.runner.returncode == protocol.EXIT_NO_GPU:
            raise NoGpu("no CUDA GPU: the runner could not open the device")
        ids = [c.id for c in pending]
        if current is None:  # died before or between cases: charge the next case that did not run
            current = next((i for i in ids if i not in verdicts), None)
            if current is None:
                break
        if s.timed_out:
            verdicts[current] = (Verdict.TIMEOUT, f"did not finish within {task.timeouts['case']} s")
            why = "an earlier case timed out"
        else:
            verdicts[current] = s.fault(current, conceal=next(c.hidden for c in pending if c.id == current))
            # Over the jail's memory or disk limit: the machine is protected, not the rest of the cases
            # graded (a hog in its first call would take every fresh runner to the limit again).
            why = "an earlier case went over the jail's limits" if s.runner and s.runner.stopped_for else ""
        if why:
            for later in ids[ids.index(current) + 1:]:
                verdicts[later] = (Verdict.NOT_RUN, f"not run: {why}")
            break
        pending = [c for c in pending[ids.index(current) + 1:]]

    out = []
    for c in task.cases:
        v = verdicts.get(c.id, (Verdict.NOT_RUN, "not run"))
        if v is None:
            r = case_result(c, checks.get(c.id, []), seconds.get(c.id))
        else:
            r = CaseResult(c.id, c.params, v[0], v[1], tolerance=c.tol)
        if c.hidden:  # what students see of a hidden case: its verdict, never its sizes
            r.params, r.seconds = {}, None
        out.append(r)
    return out


class Forbidden(Exception):
    """The runner's process loaded a library the assignment forbids."""


def _session(task: Task, work: Path, arch: str, plan: str, label: str, case_limit: float, ncases: int,
             secret: Optional[int], gpus: Optional[tuple] = None) -> judged.Session:
    """The judge and the student's runner on `plan`; stopped when any one case runs longer than
    case_limit seconds. A failing judge is the kit's problem, not the student's: KitError."""
    args = ("--secret", str(secret)) if secret is not None else ()
    s = judged.run(build.checker_path(task, arch), plan, [str(work / "runner")], work, label, case_limit,
                   case_limit * ncases + 60, view="run", read_only=(work / "runner",), judge_args=args, gpus=gpus)
    _judge_failed(task, s)
    bad = next((r for r in s.records if r.get("event") == "forbidden_library"), None)
    if bad:
        raise Forbidden(f"kernel.cu's process loaded a library this assignment forbids: {bad.get('library')} "
                        f"(in case {bad.get('case')})")
    return s


def _judge_failed(task: Task, s: judged.Session) -> None:
    if s.judge is not None and s.judge.returncode in (-signal.SIGTERM, -signal.SIGINT):
        # Stopped from outside (Ctrl-C, a TERM from scancel or a time limit reaches every process of
        # the job): no verdict, the grading stops as the grader does.
        raise KeyboardInterrupt
    if s.judge is None or s.timed_out or s.judge.returncode in (0, -9):
        return
    raise build.KitError(f"the {task.name} judge failed (exit {s.judge.returncode}):\n{s.judge.output}")


# ---------------------------------------------------------------------------------------------
# Performance.

def performance(task: Task, work: Path, gpu: GpuInfo, secret: Optional[int], result: GradeResult,
                gpus: Optional[tuple] = None, all_routes: bool = False, baselines: Optional[Callable] = None) -> None:
    """Times every graded case; the performance points are the mean of theirs. The first failure
    (timeout, fault, wrong timed output, impossible rate) ends the stage with its verdict."""
    for graded in task.graded:
        perf = _time_one(task, work, gpu, graded, secret, result, gpus, all_routes, baselines)
        if perf is None:
            return
        result.performance.append(perf)
    points = sum(p.points for p in result.performance) / len(result.performance)
    result.score = result.correctness_points + points
    result.message = "; ".join(
        f"{p.rate:,.0f} {task.metric}" + (f" ({p.rate / p.baseline_rate:.2f}x {p.baseline_name})" if p.baseline_rate else "")
        + (f" at {describe(p.params)}" if len(task.graded) > 1 else "")
        for p in result.performance)


def _time_one(task: Task, work: Path, gpu: GpuInfo, graded, secret: Optional[int], result: GradeResult,
              gpus: Optional[tuple] = None, all_routes: bool = False,
              baselines: Optional[Callable] = None) -> Optional[Performance]:
    g = graded.case
    line = protocol.plan_line("timed", g.id, g.seed, g.tol, g.reference, g.params,
                              warmup=graded.warmup, runs=graded.runs)
    limit = task.timeouts["timed"]
    s = _session(task, work, gpu.arch, line + "\n", f"timed-{g.id}", limit, 1, secret, gpus)
    timed = next((r for r in s.records if r.get("event") == "timed"), None)
    if s.timed_out:
        return _perf_fail(result, Verdict.TIMEOUT, f"the timed runs did not finish within {limit} s")
    if timed is None or s.ended_early():
        v, msg = s.fault(g.id)
        return _perf_fail(result, v, f"in the timed runs: {msg}")

    checks = {g.id: [r for r in s.records if r.get("event") == "check" and r.get("case") == g.id]}
    bad = [r for r in checks[g.id] if not r.get("pass")]
    if bad or not checks[g.id]:
        r = bad[0] if bad else {"reason": "no output was checked"}
        return _perf_fail(result, Verdict.INCORRECT,
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
    routes, overhead_ms = (baselines or _baselines)(task, work, gpu.arch, line + "\n", g.id, graded.warmup, gpus,
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
        return _perf_fail(result, Verdict.INVALID_MEASUREMENT,
                          f"{rate:,.0f} {task.metric} is above this GPU's peak of {perf.peak:,.0f} "
                          f"({pk_source}): the time cannot be right, so it is not scored")
    if perf.gbs and nbytes > gpu.l2_bytes:
        bw, bw_source = peak(gpu, "dram")
        bw *= task.gpus_required
        if perf.gbs > bw:
            result.performance.append(perf)
            return _perf_fail(result, Verdict.INVALID_MEASUREMENT,
                              f"{perf.gbs:,.0f} GB/s is above this GPU's memory bandwidth of {bw:,.0f} GB/s "
                              f"({bw_source}): the time cannot be right, so it is not scored")
    perf.thresholds = score.thresholds(task, gpu, perf.baseline_rate, g.id)
    if perf.thresholds:
        perf.points = score.performance_points(rate, perf.thresholds)
    return perf


def _perf_fail(result: GradeResult, verdict: Verdict, message: str) -> None:
    """No performance points; a wrong timed output loses the correctness points too, since the
    submission computed right only when it was not being timed."""
    result.verdict, result.message = verdict, message
    result.score = 0.0 if verdict == Verdict.INCORRECT else result.correctness_points
    return None


def without_overhead(times_ms: list, overhead_ms: float) -> list:
    """Timed runs with the round trip of an empty call taken off (never below a nanosecond)."""
    return [max(float(t) - overhead_ms, 1e-6) for t in times_ms]


def _baselines(task: Task, work: Path, arch: str, plan: str, case_id: str, warmup: int,
               gpus: Optional[tuple] = None, route: Optional[str] = None) -> tuple:
    """([(library route, Timing)], overhead ms): the route named `route` (None: every route), served by
    the checker and timed by the judge exactly as the student's code is, and the least time of an
    empty call through the same round trip (the checker's, so that no student code can make it
    longer), taken off every route's times here and off the student's by the caller."""
    checker = build.checker_path(task, arch)
    limit = task.timeouts["timed"] * 4
    s = judged.run(checker, plan, [str(checker), "serve"], work, f"baseline-{case_id}", limit, limit, view=None,
                   judge_args=("--baseline",) + (("--route", route) if route else ()), gpus=gpus)
    _judge_failed(task, s)
    empty = [min(r["times_ms"]) for r in s.records if r.get("event") == "overhead"]
    overhead = float(empty[0]) if empty else 0.0
    routes = [(r["library"], Timing(without_overhead(r["times_ms"], overhead), warmup))
              for r in s.records if r.get("event") == "baseline"]
    if s.timed_out or not routes or s.ended_early():
        log = sandbox.tail(work / f"baseline-{case_id}.log")
        raise build.KitError(f"timing the {task.name} baseline failed:\n{log}")
    return routes, overhead
