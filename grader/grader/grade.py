"""The grade verb: one submission of one assignment, built, checked, timed and scored.

  build       kernel.cu compiled on its own, scanned for forbidden calls, linked with the runner
  correctness every case on inputs the judge (no student code) draws from a secret seed when the
              call is due; the runner only calls the entry point; the judge reads the outputs
              itself and decides; a fault costs only its own case
  performance only when every case is correct: fresh secret inputs per timed run, L2 flushed, the
              judge's clock stopped once the outputs are in its hands; every timed run's output
              checked at positions drawn after the run; the library baseline timed by the same
              judge (while kernel.cu compiles, where the cores allow); a rate above the GPU's peak
              is flagged, never scored
"""
from __future__ import annotations

import dataclasses
import shutil
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from . import build, judged, performance, protocol, score, workdir
from .checks import case_result
from .gpu import NoGpu
from .profile import run as profile_run
from .results import CaseResult, GpuInfo, GradeResult, Verdict
from .sanitize import sanitize
from .tasks import Task


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
    """Times the library's route for a graded case, as performance.library_times does (a batch passes one that times
    it once for the whole class); None: timed in this grading, while kernel.cu compiles where the machine
    has the cores for both (performance.EarlyBaselines)."""


def grade(task: Task, submission: Path, gpu: GpuInfo, opts: Options = Options()) -> GradeResult:
    work = workdir.new_jailed(f"kit-{task.name}-")
    try:
        return _grade(task, submission, gpu, opts, work)
    finally:
        if opts.keep:
            workdir.keep(work.parent)
            print(f"   Work folder kept: {work}", file=sys.stderr)
        else:
            protocol.clear(work.parent)


def _grade(task: Task, submission: Path, gpu: GpuInfo, opts: Options, work: Path) -> GradeResult:
    result = new_result(task, submission, gpu, opts)
    if skipped(task, gpu, result):
        return result
    t0 = time.monotonic()
    build.build_harness(task, gpu.arch, work / "harness.log")  # once per architecture, then cached
    result.stage_seconds["harness"] = time.monotonic() - t0
    early = None
    if opts.baselines is None and performance.EarlyBaselines.fit(task):
        early = performance.EarlyBaselines(task, work, gpu.arch, opts.gpus, opts.all_routes)
        opts = dataclasses.replace(opts, baselines=early)
    try:
        if not build_stage(task, submission, gpu.arch, work, result):
            return result
        if early is not None:  # the GPU is the student's code's alone from here on
            t0 = time.monotonic()
            early.wait()
            result.stage_seconds["library"] = time.monotonic() - t0  # what the build did not cover
        return gpu_stages(task, work, gpu, opts, result)
    finally:
        if early is not None:
            early.stop()


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
    try:
        forbidden = build.scan_forbidden(work / "kernel.o")
    except build.ScanError as e:
        _fail(result, Verdict.BUILD_ERROR, f"kernel.o could not be checked for forbidden calls: {e}")
        return False
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
    except judged.Forbidden as f:
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
        performance.performance(task, work, gpu, opts.secret, result, opts.gpus, opts.all_routes, opts.baselines)
    except judged.Forbidden as f:
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
    """One CaseResult per case. The public cases run in `work`; the hidden ones at the same time in a
    runner and a folder of their own, removed after: what a runner saw of a hidden case (its sizes)
    cannot reach a public case's message, which says what the program computed (a relative error it
    can choose within the tolerance), nor through a file a later run of the grading (the timing)."""
    public = [c for c in task.cases if not c.hidden]
    hidden = [c for c in task.cases if c.hidden]
    if not hidden:
        verdicts, seconds, checks = _cases(task, work, arch, public, secret, gpus, "correctness")
    else:
        apart = workdir.new_jailed("kit-hidden-")
        try:
            shutil.copy2(work / "runner", apart / "runner")
            with ThreadPoolExecutor(2) as pool:
                mine = pool.submit(_cases, task, apart, arch, hidden, secret, gpus, "hidden")
                verdicts, seconds, checks = _cases(task, work, arch, public, secret, gpus, "correctness")
                for got, more in zip((verdicts, seconds, checks), mine.result()):
                    got.update(more)
        finally:
            protocol.clear(apart.parent)
        # A program the jail stopped keeps no case's points, in whichever run a look found it: the other
        # run may have ended before any look (hostile/descriptor_flood.cu kept a hidden case's 5.6).
        stop = next((v for v in verdicts.values() if v is not None and v[1].startswith(judged.STOPPED)), None)
        if stop is not None:
            verdicts = {i: stop if v is None else v for i, v in verdicts.items()}

    out = []
    for c in task.cases:
        v = verdicts.get(c.id, (Verdict.NOT_RUN, "not run"))
        if v is None:
            r = case_result(c, checks.get(c.id, []), seconds.get(c.id))
        else:
            r = CaseResult(c.id, c.params, v[0], v[1], tolerance=c.tol)
        if c.hidden:  # what students see of a hidden case: its verdict, never its sizes (nor a number
            r.params, r.seconds, r.rel_error = {}, None, None  # the program chose, which could carry them)
        out.append(r)
    return out


def _cases(task: Task, work: Path, arch: str, cases: list, secret: Optional[int], gpus: Optional[tuple],
           label: str) -> tuple:
    """({case id: None (ran to its end: its checks decide) or (verdict, message)}, {id: seconds}, {id:
    check records}) of `cases` run in `work`. The judge runs the pending cases in order; after a fault
    the rest run with a fresh runner, after a timeout they are not run, and after a limit of the jail
    every case that run started is charged and the rest are not run. Forbidden when the runner loaded a
    forbidden library."""
    verdicts, seconds, checks = {}, {}, {}
    pending = list(cases)
    attempt = 0
    while pending:
        attempt += 1
        plan = "".join(protocol.plan_line("case", c.id, c.seed, c.tol, c.reference, c.params) + "\n" for c in pending)
        s = judged.session(task, work, arch, plan, f"{label}{attempt}", task.timeouts["case"], len(pending), secret, gpus)
        for r in s.records:
            if r.get("event") == "done":
                verdicts[r["case"]] = None  # ran to the end: the comparison decides
                seconds[r["case"]] = r.get("ms", 0) / 1000
            elif r.get("event") == "check":
                checks.setdefault(r.get("case"), []).append(r)
        started = [r["case"] for r in s.records if r.get("event") == "start"]
        current = started[-1] if started and started[-1] not in verdicts else None
        oom = s.out_of_memory()
        if oom is not None and oom.get("case") in verdicts:  # after "done", checking its outputs
            current = oom["case"]
        if s.runner is not None and s.runner.stopped_for:
            # Over the jail's limits. The grader looks at a run's work folder every quarter second and
            # once it ends, so no case tells when the run went over: every case it started is charged
            # (hostile/wide_char_nesting.cu on an H200 kept 6 cases' points done before the first look),
            # and the rest are not run (a fresh runner would go over again).
            started = {r.get("case") for r in s.records if r.get("event") == "start"}
            for c in pending:
                verdicts[c.id] = (s.fault(c.id, conceal=c.hidden) if c.id in started or c.id == pending[0].id
                                  else (Verdict.NOT_RUN, "not run: an earlier case went over the jail's limits"))
            break
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
            verdicts[current] = (Verdict.TIMEOUT, f"did not finish within {task.timeouts['case']:g} s")
            why = "an earlier case timed out"
        else:
            verdicts[current] = s.fault(current, conceal=next(c.hidden for c in pending if c.id == current))
            # Each fresh runner would take the GPU's memory again.
            why = "an earlier case ran the GPU out of memory" if oom is not None else ""
        if why:
            for later in ids[ids.index(current) + 1:]:
                verdicts[later] = (Verdict.NOT_RUN, f"not run: {why}")
            break
        pending = [c for c in pending[ids.index(current) + 1:]]
    return verdicts, seconds, checks
