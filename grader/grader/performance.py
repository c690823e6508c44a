"""The performance stage of a grading: each graded case timed by the judge on fresh secret inputs,
every timed run's output checked, the library's route timed by the same judge with no runner of the
student's alive (while kernel.cu compiles, or after the student's timing), and the rate scored
against the GPU's thresholds (a rate above the GPU's peak is flagged, never scored)."""
from __future__ import annotations

import os
import statistics
import threading
import time
from pathlib import Path
from typing import Callable, Optional

from . import build, judged, protocol, sandbox, score
from .checks import explain, number
from .gpu import peak
from .results import Baseline, GpuInfo, GradeResult, Performance, Timing, Verdict
from .tasks import Task, describe


CPU_WAIT_MS = 0.02
"""A timed run is disturbed when the two threads its round trip depends on (the judge's and the one
serving it) waited for a CPU, while other processes had it, for longer than this..."""
CPU_WAIT_SHARE = 0.01
"""... and than this share of the run's time. On an idle machine they wait next to nothing; with twice as
many busy processes as cores, an H200's empty call read 7.6 ms in place of 0.3 and, taken off every
student's times, left 11 of a class's 13 correct conv1d entries with no time at all (invalid measurements)."""
RETIMES = 2
"""Times a student's timing is taken again, after a pause, when its runs disturbed by other processes
could have moved its median (MEDIAN_SHIFT); disturbed so every time, it is not graded (the machine is
too busy), never scored. A run that
waited while the program's own other threads or processes ran was slowed by the program itself: that
timing counts as it came, so a program cannot choose which of its timings is kept. For the same reason
no single run is ever left out: only a whole timing is taken again."""
OWN_SHARE = 0.5
"""A disturbed run was slowed by the program itself when its other threads and processes used at least this
share of the wait in CPU meanwhile (a thread of its own spinning on its CPU uses all of it; the CUDA
runtime's own threads next to nothing). Never less: an honest program must not lose its retry."""
MEDIAN_SHIFT = 0.002
"""A timing's disturbed runs could have moved its median when, each run's wait taken off its time (the
most a wait can have added), the median falls by more than this share of the time scored (the median
less the empty call's round trip). One run of ten that waits while the rest do not cannot move it: on an
idle H200, jacobi's last run at n = 512 once waited 1.4 ms of its 84.5 (a wake-up, no process beside
it), and the whole timing was taken again, 5 s more for the same median. A fifth of a percent is less
than any reference's medians spread from one grading to the next on an H200 (bench/: 0.1% for jacobi's
to 10% for syr2k's), so keeping such a timing costs a student no more than grading again would."""
UNACCOUNTED = ("timed runs waited for a CPU, and this machine gives the grader no cgroup to tell the program's "
               "processes from other programs': they count as they came (graded as root, such a timing is taken again)")
"""How a jailed timing is marked whose disturbed runs would have had it taken again, where the runner had no
cgroup that counts its CPU (the grader is not root): the judge then counts only the runner's threads, and
a program's child processes spinning during its runs would read as other programs, letting it choose
which of its timings is kept (fixtures/batch/hostile/child_spinners.cu)."""
RETIME_PAUSE_S = 1.0
LIBRARY_TRIES = 3
"""Sessions in which the library's routes and the empty call are timed (their disturbed runs left out: no
student code runs then) before the machine is called too busy to time."""
IN_TIMED_RUNS = "in the timed runs: "
"""How the message of a timing whose program ended early starts (then judged.Session.fault's words)."""


def disturbed(times_ms: list, waits_ms: list) -> list:
    """For each run, whether it waited for a CPU long enough to change its time (CPU_WAIT_MS, CPU_WAIT_SHARE)."""
    return [w is not None and w > max(CPU_WAIT_MS, CPU_WAIT_SHARE * t)
            for t, w in zip(times_ms, list(waits_ms) + [None] * (len(times_ms) - len(waits_ms)))]


def _disturbed_runs(s: judged.Session) -> tuple:
    """(runs disturbed, of those the ones the program's own other threads or processes ran during) of
    the student's timed runs in session `s`."""
    total = own = 0
    for r in (r for r in s.records if r.get("event") == "timed"):
        waits, others = list(r.get("wait_ms") or []), list(r.get("others_cpu_ms") or [])
        for i, bad in enumerate(disturbed(r.get("times_ms") or [], waits)):
            total += bad
            own += bad and i < len(others) and others[i] >= max(CPU_WAIT_MS, OWN_SHARE * waits[i])
    return total, own


def median_moved(times_ms: list, waits_ms: list, round_trip_ms: Callable) -> bool:
    """Whether the disturbed runs (disturbed()) of one case's timing could have moved its median by more
    than MEDIAN_SHIFT of the time scored: their waits taken off, as much as a wait can have added.
    round_trip_ms() is the empty call's, asked only where a run was disturbed."""
    bad = disturbed(times_ms, waits_ms)
    if not any(bad):
        return False
    least = [t - waits_ms[i] if b else t for i, (t, b) in enumerate(zip(times_ms, bad))]
    med = statistics.median(times_ms)
    return med - statistics.median(least) > MEDIAN_SHIFT * max(med - round_trip_ms(), 1e-6)


def _moved(s: judged.Session, task: Task, round_trip: Callable) -> bool:
    """Whether the disturbed runs of a case of session `s` could have moved its median (median_moved);
    round_trip(graded) is the empty call's, asked only of a case with a disturbed run."""
    timed = {r.get("case"): r for r in s.records if r.get("event") == "timed"}
    return any(median_moved(timed[g.case.id].get("times_ms") or [], timed[g.case.id].get("wait_ms") or [],
                            lambda g=g: round_trip(g)) for g in task.graded if g.case.id in timed)


def _counts_every_process(s: judged.Session) -> bool:
    """Whether the judge could count the CPU of every process of the program (its cgroup's), or nothing is
    at stake: outside the jail the program already runs as whoever grades it."""
    return sandbox.current_jail() is None or (s.runner is not None and s.runner.cpu_s is not None)


def _finished_right(s: judged.Session, ncases: int) -> bool:
    """Whether a timing ran to its end with every output right (only such a timing is ever taken again)."""
    finished = sum(1 for r in s.records if r.get("event") == "checked") == ncases
    wrong = any(r.get("event") == "check" and not r.get("pass") for r in s.records)
    return finished and not wrong and not s.timed_out and not s.ended_early()


def performance(task: Task, work: Path, gpu: GpuInfo, secret: Optional[int], result: GradeResult,
                gpus: Optional[tuple] = None, all_routes: bool = False, baselines: Optional[Callable] = None) -> None:
    """Times every graded case, in one session (taken again, up to RETIMES times, where other processes
    took the CPU from a run); the performance points are the mean of theirs. The first failure
    (timeout, fault, wrong timed output, impossible rate) ends the stage with its verdict."""
    plan = "".join(graded_line(g) + "\n" for g in task.graded)
    limit = task.timeouts["timed"]
    asked = {}

    def library(graded) -> tuple:
        """(routes, overhead ms) of a graded case, asked once: by the retiming, then by the score."""
        if graded.case.id not in asked:
            asked[graded.case.id] = (baselines or library_times)(
                task, work, gpu.arch, graded_line(graded) + "\n", graded.case.id, graded.warmup, gpus,
                routes_timed(task, all_routes))
        return asked[graded.case.id]

    unaccounted = 0
    for attempt in range(RETIMES + 1):
        s = judged.session(task, work, gpu.arch, plan, "timed", limit, len(task.graded), secret, gpus, timed=True)
        disturbed_runs, own = _disturbed_runs(s)
        if (not disturbed_runs or own or not _finished_right(s, len(task.graded))
                or not _moved(s, task, lambda g: library(g)[1])):
            break
        if not _counts_every_process(s):
            unaccounted = disturbed_runs
            break
        if attempt == RETIMES:
            raise build.KitError(
                f"the machine is too busy to time {task.name}: in each of {RETIMES + 1} timings, other processes "
                f"took the CPU from the judge or the program ({disturbed_runs} runs of the last one); grade "
                f"again when it is idle")
        time.sleep(RETIME_PAUSE_S)
    for graded in task.graded:
        perf = score_one(task, gpu, graded, s, result, library)
        if perf is None:
            return
        result.performance.append(perf)
    points = sum(p.points for p in result.performance) / len(result.performance)
    result.score = result.correctness_points + points
    result.message = "; ".join(
        f"{p.rate:,.0f} {task.metric}" + (f" ({p.rate / p.baseline_rate:.2f}x {p.baseline_name})" if p.baseline_rate else "")
        + (f" at {describe(p.params)}" if len(task.graded) > 1 else "")
        for p in result.performance)
    if attempt:
        result.message += f" (timed {attempt + 1} times: other processes took the CPU from the earlier timings)"
    if unaccounted:
        result.message += f" ({unaccounted} {UNACCOUNTED})"
    if own:
        result.message += (f" ({own} timed runs waited for a CPU that the program's own threads were using: "
                           f"they count as they came)")


def graded_line(graded) -> str:
    """The plan line of a graded case, for the student's timing and the library's alike."""
    g = graded.case
    gap = {} if graded.gap_ms is None else {"gap_ms": f"{graded.gap_ms:g}"}
    return protocol.plan_line("timed", g.id, g.seed, g.tol, g.reference, g.params, warmup=graded.warmup,
                              runs=graded.runs, **gap)


def routes_timed(task: Task, all_routes: bool) -> Optional[str]:
    """The library route a grading times: the baseline its score is drawn from, or every route (None)."""
    return None if all_routes else task.data["performance"].get("baseline", "")


def score_one(task: Task, gpu: GpuInfo, graded, s: judged.Session, result: GradeResult,
              library: Callable) -> Optional[Performance]:
    """The rate of graded case `graded` from the timed session `s`, next to the library's (library(graded):
    its routes and the empty call's round trip, timed by the same judge with no runner of the student's
    alive; asked only of a timing that ran right), and its points."""
    g = graded.case
    mine = [r for r in s.records if r.get("case") == g.id]
    timed = next((r for r in mine if r.get("event") == "timed"), None)
    finished = any(r.get("event") == "checked" for r in mine)
    checks = [r for r in mine if r.get("event") == "check"]
    bad = [r for r in checks if not r.get("pass")]
    # A wrong timed output comes first: a time-out or a fault after it keeps the correctness points,
    # and must not buy them back.
    if bad or (finished and not checks):
        r = bad[0] if bad else {"reason": "no output was checked"}
        return _fail(result, Verdict.INCORRECT,
                     f"the output of timed run {r.get('run', '?')} is wrong: {explain(r, g.tol)}")
    if s.timed_out and not finished:
        return _fail(result, Verdict.TIMEOUT, f"the timed runs did not finish within {task.timeouts['timed']} s")
    if timed is None or s.ended_early(g.id) or not finished:
        v, msg = s.fault(g.id)
        return _fail(result, v, f"{IN_TIMED_RUNS}{msg}", forfeit=judged.over_own_limit(msg))

    # Values the entry point returned (a count of sweeps) enter the work as the checker verified them.
    returned = {}
    for name in task.returned:
        values = sorted(number(r.get("value")) for r in checks if r.get("array") == name and "value" in r)
        if values:
            returned[name] = values[len(values) // 2]
    work_units = task.work(g.params, returned)
    baseline = task.data["performance"].get("baseline", "")
    routes, overhead_ms = library(graded)
    timing = Timing(without_overhead(timed["times_ms"], overhead_ms), graded.warmup, list(timed.get("wait_ms") or []),
                    list(timed.get("others_cpu_ms") or []))
    rate = work_units / (timing.median_ms / 1e3)
    nbytes, least = task.bytes(g.params, returned), task.least_bytes(g.params, returned)
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
    elif least and least > gpu.l2_bytes * task.gpus_required:
        # The metric's rate when the bytes no call can avoid move at the bandwidth (for GB/s, the
        # bandwidth itself). A bandwidth bound holds only for data that cannot sit in L2.
        perf.peak = pk * 1e9 * work_units / least
    if perf.peak and rate > perf.peak:
        result.performance.append(perf)  # on the record, unscored
        return _fail(result, Verdict.INVALID_MEASUREMENT,
                          f"{rate:,.0f} {task.metric} is above this GPU's peak of {perf.peak:,.0f} "
                          f"({pk_source}): the time cannot be right, so it is not scored")
    if least and least > gpu.l2_bytes:
        bw, bw_source = peak(gpu, "dram")
        bw *= task.gpus_required
        least_gbs = least / (timing.median_ms / 1e3) / 1e9
        if least_gbs > bw:
            result.performance.append(perf)
            return _fail(result, Verdict.INVALID_MEASUREMENT,
                              f"{least_gbs:,.0f} GB/s is above this GPU's memory bandwidth of {bw:,.0f} GB/s "
                              f"({bw_source}): the time cannot be right, so it is not scored")
    perf.thresholds = score.thresholds(task, gpu, perf.baseline_rate, g.id)
    if perf.thresholds:
        perf.points = score.performance_points(rate, perf.thresholds)
    return perf


def _fail(result: GradeResult, verdict: Verdict, message: str, forfeit: bool = False) -> None:
    """No performance points. A wrong timed output loses the correctness points too, since the
    submission computed right only when it was not being timed; so does a stop for the program's own
    limits (`forfeit`), as anywhere else: a program the jail stopped keeps no points, in whichever run a
    look found it, and its checked runs may have ended between two looks (hostile/descriptor_flood.cu,
    seen only in its timed runs in a busy class, kept its 50)."""
    result.verdict, result.message = verdict, message
    result.score = 0.0 if verdict == Verdict.INCORRECT or forfeit else result.correctness_points
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
    return library_times_of(task, work, arch, plan, {case_id: warmup}, f"baseline-{case_id}", gpus, route)[case_id]


def library_times_of(task: Task, work: Path, arch: str, plan: str, warmups: dict, label: str,
                     gpus: Optional[tuple] = None, route: Optional[str] = None,
                     stop: Optional[threading.Event] = None) -> dict:
    """library_times for every case of `plan` (case id -> its warm-up calls), in one session:
    {case id: (routes, overhead ms)}. `stop`, once set, ends the session early (KitError)."""
    checker = build.checker_path(task, arch)
    limit = task.timeouts["timed"] * 4
    for attempt in range(LIBRARY_TRIES):
        if attempt:
            time.sleep(RETIME_PAUSE_S)
        s = judged.run(checker, plan, [str(checker), "serve"], work, label, limit, limit * len(warmups), view=None,
                       judge_args=("--baseline",) + (("--route", route) if route else ()), gpus=gpus, stop=stop,
                       timed=True)
        judged.judge_failed(task, s)
        got, busy = {}, []
        for case_id, warmup in warmups.items():
            mine = [r for r in s.records if r.get("case") == case_id]
            if s.timed_out or s.ended_early() or not any(r.get("event") == "baseline" for r in mine):
                log = sandbox.tail(work / f"{label}.log")
                raise build.KitError(f"timing the {task.name} baseline failed:\n{log}")
            # The empty call is taken at its least: one undisturbed run will do. A route is taken at its
            # median: at least half of its runs must be undisturbed.
            empty = next((r for r in mine if r.get("event") == "overhead"), None)
            empty_times, _ = _undisturbed(empty) if empty else ([0.0], [])
            if not empty_times:
                busy.append(f"{case_id}: the empty call")
            overhead = min(empty_times, default=0.0)
            routes = []
            for r in (r for r in mine if r.get("event") == "baseline"):
                times, waits = _undisturbed(r)
                if 2 * len(times) < len(r.get("times_ms") or []):
                    busy.append(f"{case_id}: {r['library']}")
                routes.append((r["library"], Timing(without_overhead(times, overhead), warmup, waits)))
            got[case_id] = (routes, overhead)
        if not busy:
            return got
    raise build.KitError(f"the machine is too busy to time the {task.name} library: in {LIBRARY_TRIES} tries, other "
                         f"processes kept taking the CPU from most runs ({', '.join(busy)}); grade again when it is idle")


def _undisturbed(record: dict) -> tuple:
    """(times, waits) of the runs of a library or empty-call record that no other process disturbed: the
    library and the empty call run with no student code alive, so a disturbed run is simply left out."""
    times, waits = record.get("times_ms") or [], record.get("wait_ms") or []
    keep = [i for i, bad in enumerate(disturbed(times, waits)) if not bad]
    return [float(times[i]) for i in keep], [waits[i] for i in keep if i < len(waits)]


class EarlyBaselines:
    """grade.Options.baselines for a grading of its own: the library's route for every graded case,
    timed in one session while kernel.cu compiles. The GPU is idle then and no student code runs
    (the compiler only reads kernel.cu), so the grading saves the build's seconds, and the library is
    timed with no runner of the student's alive, as always. Only where the machine has MIN_CPUS or
    more: with fewer, the compiler would take a core from the judge's round trip."""

    MIN_CPUS = 4

    @classmethod
    def fit(cls, task: Task) -> bool:
        return bool(task.graded) and len(os.sched_getaffinity(0)) >= cls.MIN_CPUS

    def __init__(self, task: Task, work: Path, arch: str, gpus: Optional[tuple], all_routes: bool):
        self.route = routes_timed(task, all_routes)
        self._stop = threading.Event()
        self._got, self._error = None, None
        plan = "".join(graded_line(g) + "\n" for g in task.graded)
        warmups = {g.case.id: g.warmup for g in task.graded}
        cpus = sandbox.pinned()  # the grading's CPUs: on_cpus() holds for the thread that set it
        self._thread = threading.Thread(target=self._time, args=(task, work, arch, plan, warmups, gpus, cpus),
                                        daemon=True)
        self._thread.start()

    def _time(self, task, work, arch, plan, warmups, gpus, cpus):
        try:
            with sandbox.on_cpus(cpus):
                self._got = library_times_of(task, work, arch, plan, warmups, "baseline", gpus, self.route, self._stop)
        except BaseException as e:  # raised where the times are asked for
            self._error = e

    def wait(self) -> None:
        """Returns once the library's session is over: the GPU is the student's code's from then on."""
        self._thread.join()

    def stop(self) -> None:
        """Ends the library's session if it is still on (the grading stopped early)."""
        self._stop.set()
        self._thread.join()

    def __call__(self, task, work, arch, plan, case_id, warmup, gpus=None, route=None):
        self.wait()
        if self._error is not None:
            raise self._error
        return self._got[case_id]
