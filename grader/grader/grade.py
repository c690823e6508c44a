"""The grade verb: one submission of one assignment, built, checked, timed and scored.

  build       kernel.cu compiled on its own, scanned for forbidden calls, linked with the runner
  correctness every case on inputs from a secret seed; the runner (student code) hands outputs
              over, the checker (no student code) decides; a fault costs only its own case
  performance only when every case is correct: fresh inputs per timed run, L2 flushed, the clock
              stopped when the device is idle; the timed outputs are checked again; the library
              baseline timed the same way; a rate above the GPU's peak is flagged, never scored
"""
from __future__ import annotations

import re
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from . import build, jail, protocol, sandbox, score, workdir
from .gpu import NoGpu, peak
from .results import Baseline, CaseResult, GpuInfo, GradeResult, Performance, Timing, Verdict
from .tasks import Case, Task, describe


@dataclass
class Options:
    secret: Optional[int] = None
    """A fixed secret for reproducible inputs (debugging the kit); None draws a fresh one."""
    keep: bool = False
    """Keep the work folder (plans, results, dumps, logs) instead of deleting it."""


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
                       else "inputs from a fresh secret seed")


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
    if skipped(task, gpu, result):
        return result
    secret = opts.secret if opts.secret is not None else protocol.new_secret()
    t0 = time.monotonic()
    seeds = {c.id: protocol.case_seed(c.seed, secret) for c in task.cases}
    result.cases = correctness(task, work, gpu.arch, seeds)
    result.stage_seconds["correctness"] = time.monotonic() - t0
    passed = {c.id for c in result.cases if c.verdict == Verdict.CORRECT}
    result.correctness_points = score.correctness_points(task, passed)
    result.score = result.correctness_points
    failed = next((c for c in result.cases if c.verdict != Verdict.CORRECT), None)
    if failed:
        result.verdict = failed.verdict
        result.message = f"case {failed.id} ({_describe(task, failed.id)}): {failed.message}"
        return result

    if task.sanitize:
        t0 = time.monotonic()
        sanitize(task, work, secret, result)
        result.stage_seconds["sanitize"] = time.monotonic() - t0
        if result.verdict != Verdict.CORRECT:
            return result

    t0 = time.monotonic()
    performance(task, work, gpu, secret, result)
    result.stage_seconds["performance"] = time.monotonic() - t0
    return result


def _fail(result: GradeResult, verdict: Verdict, message: str) -> GradeResult:
    result.verdict, result.message, result.score = verdict, message, 0.0
    return result


def _first_error(log: str) -> str:
    for line in log.splitlines():
        if "error" in line.lower():
            return line.strip()[:300]
    return (log.strip().splitlines() or ["(no message)"])[0][:300]


def _describe(task: Task, case_id: str) -> str:
    return next(c for c in task.cases if c.id == case_id).describe()


# ---------------------------------------------------------------------------------------------
# Correctness.

def correctness(task: Task, work: Path, arch: str, seeds: dict) -> list:
    """One CaseResult per case. The runner runs the pending cases in order; after a fault the rest
    run in a fresh process, after a timeout they are not run. Then the checker judges the outputs."""
    verdicts = {}
    seconds = {}
    pending = list(task.cases)
    attempt = 0
    while pending:
        attempt += 1
        plan = work / f"correctness{attempt}.plan"
        protocol.write_fresh(plan, "".join(protocol.plan_line("case", c.id, seeds[c.id], c.tol, c.reference,
                                                   c.params) + "\n" for c in pending))
        results = work / f"correctness{attempt}.jsonl"
        dumps = work / "dumps"
        if not dumps.is_dir():
            protocol.clear(dumps)
            dumps.mkdir()
        run = _run_runner(work, plan, dumps, results, task.timeouts["case"], len(pending))
        records = protocol.read_results(results)
        for r in records:
            if r.get("event") == "done":
                verdicts[r["case"]] = None  # ran to the end: the checker decides
                seconds[r["case"]] = r.get("ms", 0) / 1000
        started = [r["case"] for r in records if r.get("event") == "start"]
        current = started[-1] if started and started[-1] not in verdicts else None
        if run.returncode == 0 and not run.timed_out and all(c.id in verdicts for c in pending):
            break  # (an exit(0) before the last case ends is a fault of the case it cut short)
        if run.returncode == protocol.EXIT_NO_GPU:
            raise NoGpu("no CUDA GPU: the runner could not open the device")
        ids = [c.id for c in pending]
        if current is None:  # died before or between cases: charge the next case that did not run
            current = next((i for i in ids if i not in verdicts), None)
            if current is None:
                break
        if run.timed_out:
            verdicts[current] = (Verdict.TIMEOUT, f"did not finish within {task.timeouts['case']} s")
            for later in ids[ids.index(current) + 1:]:
                verdicts[later] = (Verdict.NOT_RUN, "not run: an earlier case timed out")
            break
        verdicts[current] = _fault(run, records, current)
        pending = [c for c in pending[ids.index(current) + 1:]]

    ran = [c for c in task.cases if c.id in verdicts and verdicts[c.id] is None]
    checks = _check(task, work, arch, [protocol.plan_line("case", c.id, seeds[c.id], c.tol, c.reference,
                                                    c.params) for c in ran], "correctness")
    out = []
    for c in task.cases:
        v = verdicts.get(c.id, (Verdict.NOT_RUN, "not run"))
        if v is None:
            out.append(_judge(task, c, checks.get(c.id, []), seconds.get(c.id)))
        else:
            out.append(CaseResult(c.id, c.params, v[0], v[1], tolerance=c.tol))
    return out


def _run_runner(work: Path, plan: Path, dumps: Path, results: Path, case_limit: float, ncases: int):
    """The runner, stopped when any one case runs longer than case_limit seconds."""
    state = {"lines": 0, "since": time.monotonic()}

    def watchdog():
        n = len(protocol.read_results(results))
        if n != state["lines"]:
            state["lines"], state["since"] = n, time.monotonic()
        return time.monotonic() - state["since"] > case_limit

    protocol.clear(results)  # the runner makes it (as the jailed user, where there is a jail)
    return sandbox.run([str(work / "runner"), str(plan), str(dumps), str(results)], work, work / "runner.log",
                       timeout=case_limit * ncases + 60, watchdog=watchdog, view="run",
                       read_only=(work / "runner",))


def _fault(run: sandbox.Run, records: list, case_id: str) -> tuple:
    if run.stopped_for:
        return Verdict.RUNTIME_ERROR, f"stopped by the grader: the program {run.stopped_for}"
    for r in records:
        if r.get("case") == case_id and r.get("event") in ("launch_error", "runtime_error"):
            verdict = Verdict.LAUNCH_ERROR if r["event"] == "launch_error" else Verdict.RUNTIME_ERROR
            what = f"{r.get('cuda_error')} ({r.get('message')})"
            if verdict == Verdict.LAUNCH_ERROR:
                return verdict, f"a kernel launch (or CUDA call) was refused: {what}; nothing ran"
            return verdict, f"the kernel faulted: {what}"
    if run.returncode < 0:
        return Verdict.RUNTIME_ERROR, f"the program was killed by signal {-run.returncode}"
    last = (run.output.strip().splitlines() or [""])[-1][:200]
    return Verdict.RUNTIME_ERROR, f"the program exited with status {run.returncode}" + (f": {last}" if last else "")


def _check(task: Task, work: Path, arch: str, plan_lines: list, label: str) -> dict:
    """Runs the checker over plan_lines; returns its records by case. A failing checker is the kit's
    problem, not the student's: it raises KitError."""
    if not plan_lines:
        return {}
    plan = work / f"check-{label}.plan"
    protocol.write_fresh(plan, "\n".join(plan_lines) + "\n")
    results = work / f"check-{label}.jsonl"
    protocol.write_fresh(results, "")
    checker = build.checker_path(task, arch)
    run = sandbox.run([str(checker), "check", str(plan), str(work / "dumps"), str(results)], work,
                      work / f"check-{label}.log", timeout=1800)
    if run.returncode != 0 or run.timed_out:
        raise build.KitError(f"the {task.name} checker failed (exit {run.returncode}):\n{run.output}")
    by_case = {}
    for r in protocol.read_results(results):
        by_case.setdefault(r.get("case"), []).append(r)
    return by_case


def _judge(task: Task, case: Case, records: list, seconds) -> CaseResult:
    if not records:
        return CaseResult(case.id, case.params, Verdict.INCORRECT, "the checker saw no output",
                          tolerance=case.tol, seconds=seconds)
    # The failing record that says most: nothing written beats a wrong value, which beats a small error.
    worst = max(records, key=lambda r: (not r.get("pass"), bool(r.get("unwritten") or r.get("reason")),
                                        _num(r.get("rel_error"))))
    msg = explain(worst, case.tol)
    verdict = Verdict.CORRECT if all(r.get("pass") for r in records) else Verdict.INCORRECT
    # The error norm covers only the elements that were written and finite: show it only when that
    # is all of them, or it would look better than the output is.
    whole = not any(worst.get(k) for k in ("unwritten", "nonfinite", "protected_changed", "reason"))
    return CaseResult(case.id, case.params, verdict, msg, rel_error=_num(worst.get("rel_error")) if whole else None,
                      tolerance=case.tol, seconds=seconds)


def _num(x) -> float:
    try:
        return float(x)
    except (TypeError, ValueError):
        return float("inf")


def explain(rec: dict, tol: float) -> str:
    """One line on what a checker record says about an output array."""
    name = rec.get("array", "output")
    if "reason" in rec:
        return f"{name}: {rec['reason']}"
    n = rec.get("compared", 0) - rec.get("protected", 0)  # the elements that had to be computed
    if rec.get("unwritten"):
        if rec["unwritten"] == n:
            return f"output not computed: no element of {name} was written"
        return f"{rec['unwritten']} of {n} elements of {name} were never written"
    if rec.get("protected_changed"):
        return f"{rec['protected_changed']} elements of {name} that must not change were changed"
    if rec.get("nonfinite"):
        return f"{rec['nonfinite']} of {n} elements of {name} are NaN or infinite"
    rel = _num(rec.get("rel_error"))
    if rec.get("pass"):
        return f"relative error {rel:.1e}"
    if "expected" in rec:  # a one-element output: a returned value (a count of sweeps, a sum) or n = 1
        where = f"{name} is {_num(rec.get('value')):.17g}, expected {_num(rec.get('expected')):.17g}"
    else:
        where = (f"worst: {name}[{rec.get('worst_index')}] = {_num(rec.get('worst_got')):.17g}, "
                 f"expected {_num(rec.get('worst_want')):.17g}")
    return f"relative error {rel:.1e} exceeds the tolerance {tol:g} ({where})"


# ---------------------------------------------------------------------------------------------
# compute-sanitizer, on a small case, for the tasks that ask for it.

def sanitize(task: Task, work: Path, secret: int, result: GradeResult) -> None:
    """Runs the runner under each tool; a race is a verdict of its own even when the output was
    right, a memory error is a runtime error. Where compute-sanitizer is missing, says so."""
    case, tools = task.sanitize
    exe = jail.sanitizer_executable()
    if not exe:
        result.sanitizer_note = f"{', '.join(tools)} not run: compute-sanitizer is not on PATH"
        return
    plan = work / "sanitize.plan"
    protocol.write_fresh(plan, protocol.plan_line("case", case.id, protocol.case_seed(case.seed, secret, salt=2), case.tol,
                                       "cpu", case.params) + "\n")
    for tool in tools:
        log = work / f"sanitize-{tool}.log"
        results = work / f"sanitize-{tool}.jsonl"
        protocol.clear(results)
        run = sandbox.run([exe, "--tool", tool, "--error-exitcode", str(_SANITIZER_FOUND), "--print-limit", "10",
                           "--log-file", str(log), str(work / "runner"), str(plan), str(work / "dumps"), str(results)],
                          work, work / f"sanitize-{tool}.out", timeout=task.timeouts.get("sanitize", 600),
                          view="sanitize", read_only=(work / "runner",))
        what = f"{tool} ({case.describe()})"
        if run.timed_out:
            result.sanitizer_note += f"{what}: did not finish in time, no finding. "
            continue
        text = sandbox.tail(log, 20000)
        if run.returncode == _SANITIZER_FOUND or (tool == "racecheck" and _race_reported(text)):
            first = _first_finding(text)
            # Every case passed, so the correctness share stays; there are no performance points.
            if tool == "racecheck":
                result.verdict, result.message = Verdict.RACE, f"compute-sanitizer racecheck found a data race: {first}"
            else:
                result.verdict, result.message = Verdict.RUNTIME_ERROR, f"compute-sanitizer {tool} found an error: {first}"
            return
        result.sanitizer_note += f"{what}: clean. "
    result.sanitizer_note = result.sanitizer_note.strip()


_SANITIZER_FOUND = 86


def _race_reported(log: str) -> bool:
    """racecheck reports some hazards as warnings, which do not set the error exit code."""
    m = re.search(r"RACECHECK SUMMARY: (\d+) hazards? displayed", log)
    return "Race reported" in log or bool(m and int(m.group(1)) > 0)


def _first_finding(log: str) -> str:
    for line in log.splitlines():
        text = line.strip("= ").strip()
        if text.startswith(("Error", "Race", "Invalid", "Warning")) or "hazard" in text.lower():
            return text[:300]
    return (log.strip().splitlines() or ["(no details)"])[-1][:300]


# ---------------------------------------------------------------------------------------------
# Performance.

def performance(task: Task, work: Path, gpu: GpuInfo, secret: int, result: GradeResult) -> None:
    """Times every graded case; the performance points are the mean of theirs. The first failure
    (timeout, fault, wrong timed output, impossible rate) ends the stage with its verdict."""
    for graded in task.graded:
        perf = _time_one(task, work, gpu, graded, protocol.case_seed(graded.case.seed, secret, salt=1), result)
        if perf is None:
            return
        result.performance.append(perf)
    points = sum(p.points for p in result.performance) / len(result.performance)
    result.score = result.correctness_points + points
    result.message = "; ".join(
        f"{p.rate:,.0f} {task.metric}" + (f" ({p.rate / p.baseline_rate:.2f}x {p.baseline_name})" if p.baseline_rate else "")
        + (f" at {describe(p.params)}" if len(task.graded) > 1 else "")
        for p in result.performance)


def _time_one(task: Task, work: Path, gpu: GpuInfo, graded, seed: int, result: GradeResult) -> Optional[Performance]:
    g = graded.case
    line = protocol.plan_line("timed", g.id, seed, g.tol, g.reference, g.params,
                              warmup=graded.warmup, runs=graded.runs)
    plan = work / f"timed-{g.id}.plan"
    protocol.write_fresh(plan, line + "\n")
    results = work / f"timed-{g.id}.jsonl"
    limit = task.timeouts["timed"]
    run = _run_runner(work, plan, work / "dumps", results, limit, 1)
    records = protocol.read_results(results)
    timed = next((r for r in records if r.get("event") == "timed"), None)
    if run.timed_out:
        return _perf_fail(result, Verdict.TIMEOUT, f"the timed runs did not finish within {limit} s")
    if timed is None or run.returncode != 0:
        v, msg = _fault(run, records, g.id)
        return _perf_fail(result, v, f"in the timed runs: {msg}")

    checks = _check(task, work, gpu.arch, [line], f"timed-{g.id}")
    bad = [r for r in checks.get(g.id, []) if not r.get("pass")]
    if bad or not checks.get(g.id):
        r = bad[0] if bad else {"reason": "no output was checked"}
        return _perf_fail(result, Verdict.INCORRECT,
                          f"the output of timed run {r.get('run', '?')} is wrong: {explain(r, g.tol)}")

    # Values the entry point returned (a count of sweeps) enter the work as the checker verified them.
    returned = {}
    for name in task.returned:
        values = sorted(_num(r.get("value")) for r in checks[g.id] if r.get("array") == name and "value" in r)
        if values:
            returned[name] = values[len(values) // 2]
    work_units = task.work(g.params, returned)
    timing = Timing([float(t) for t in timed["times_ms"]], graded.warmup)
    rate = work_units / (timing.median_ms / 1e3)
    nbytes = task.bytes(g.params, returned)
    perf = Performance(g.id, g.params, task.metric, timing, rate,
                       gbs=nbytes / (timing.median_ms / 1e3) / 1e9 if nbytes else None,
                       baseline_name=task.data["performance"].get("baseline", ""))

    for name, timing in _baselines(task, work, gpu.arch, plan, g.id, graded.warmup):
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


def _baselines(task: Task, work: Path, arch: str, plan: Path, case_id: str, warmup: int) -> list:
    """(library route, Timing) for every route the checker times."""
    results = work / f"baseline-{case_id}.jsonl"
    protocol.write_fresh(results, "")
    checker = build.checker_path(task, arch)
    run = sandbox.run([str(checker), "baseline", str(plan), str(results)], work, work / f"baseline-{case_id}.log",
                      timeout=task.timeouts["timed"])
    if run.returncode != 0 or run.timed_out:
        raise build.KitError(f"timing the {task.name} baseline failed (exit {run.returncode}):\n{run.output}")
    return [(r["library"], Timing([float(t) for t in r["times_ms"]], warmup))
            for r in protocol.read_results(results) if r.get("event") == "baseline"]
