"""How a batch runs: the to-do list (what changed since the state), builds in parallel on the CPU
cores, the checks of a few submissions at once on each GPU and the timings one at a time, the jail
every program holding student code runs in, and the reference graded once per GPU for the plots."""
from __future__ import annotations

import copy
import json
import os
import shutil
import sys
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from .. import build, grade, judged, sandbox, submissions, tasks, workdir
from ..gpu import NoGpu
from ..limits import Limits
from ..report import write_record
from ..results import GpuInfo
from . import Options, in_shard
from .outputs import Outputs
from .baselines import SharedBaselines
from .gpus import Closed, Pool, default_checks
from .progress import Progress, StageTimes
from .state import State, now, plain


@dataclass
class Job:
    entry: submissions.Entry
    assignment: str
    src: Path
    digest: str
    work: Path
    result: object = None
    built: bool = False
    error: str = ""
    seconds: float = 0.0
    timed: bool = False
    """Its checks passed: it is timed next."""
    check_s: float = 0.0
    """Seconds its check took (beside others)."""
    timing_s: float = 0.0
    """Seconds its timing took (0: not timed)."""
    checked_alone: bool = False
    """Its checks failed beside another submission's, to be run again with the GPU to itself."""

    @property
    def key(self) -> str:
        return f"{self.entry.student}/{self.assignment}"


NEIGHBOURLY = {grade.Verdict.RUNTIME_ERROR, grade.Verdict.LAUNCH_ERROR, grade.Verdict.TIMEOUT}
"""What a check can end in because of another one on its GPU: the other took the GPU's memory (a
failed allocation, a refused launch) or most of its time. Never a wrong output or a race: another
process cannot write into this one's memory. Nor a stop for going over its work folder's disk or file
limit, which counts what it wrote alone (neighbourly())."""


def neighbourly(result) -> bool:
    """Whether a check's verdict could be another check's doing (NEIGHBOURLY, less the program's going
    over its own work folder's limits)."""
    if result.verdict not in NEIGHBOURLY:
        return False
    failed = next((c for c in result.cases if c.verdict != grade.Verdict.CORRECT), None)
    return not (failed is not None and judged.over_own_limit(failed.message))


class Steps:
    """Every build and GPU stage runs shared; a failed build is tried again alone, with nothing else of
    the batch running, so that another submission's load never becomes a student's verdict."""

    def __init__(self):
        self._cv = threading.Condition()
        self._active = 0
        self._alone = False

    @contextmanager
    def shared(self):
        with self._cv:
            self._cv.wait_for(lambda: not self._alone)
            self._active += 1
        try:
            yield
        finally:
            with self._cv:
                self._active -= 1
                self._cv.notify_all()

    @contextmanager
    def alone(self):
        with self._cv:
            self._cv.wait_for(lambda: not self._alone)
            self._alone = True
            self._cv.wait_for(lambda: self._active == 0)
        try:
            yield
        finally:
            with self._cv:
                self._alone = False
                self._cv.notify_all()


class Batch(State, Outputs, Progress):
    def __init__(self, opts: Options, gpu: GpuInfo):
        self.opts, self.gpu = opts, gpu
        self.out = opts.out.resolve()
        names = opts.assignments or tasks.registry()
        self.tasks = {n: tasks.load(n, include_hidden=True) for n in names}
        for t in self.tasks.values():
            for g in t.graded:
                if opts.timed_runs:
                    g.runs = max(10, opts.timed_runs)
                g.gap_ms = opts.burst_gap_ms
        self.state_path = self.out / "state.json"
        self.state = self._load_state()
        self.lock = threading.Lock()
        self.counts = {}
        self.done = 0
        self.total = 0
        self.started = time.monotonic()
        self.tty = opts.tty if opts.tty is not None else sys.stderr.isatty()
        self.jail = None
        self.isolation = {}
        self.steps = Steps()
        self.baselines = SharedBaselines()
        self.stages = StageTimes()
        self.gpus = Pool(opts.gpu_infos or {0: gpu}, opts.checks_per_gpu or default_checks(gpu))
        self.finishing = threading.Lock()  # one submission's outputs written at a time
        self.stopping = False  # interrupted: gradings still running on the GPUs are not recorded
        self.stop = False  # a grading thread was interrupted: the batch stops as on Ctrl-C

    # -- the run ----------------------------------------------------------------------------------
    def run(self) -> int:
        self.out.mkdir(parents=True, exist_ok=True)
        wall0 = time.monotonic()
        work_root = workdir.new("kit-batch-")
        try:
            return self._run(work_root, wall0)
        finally:
            sandbox.confine(None)
            shutil.rmtree(work_root, ignore_errors=True)

    def _run(self, work_root: Path, wall0: float) -> int:
        o = self.opts
        eps = {n: t.entry_point for n, t in self.tasks.items()}
        entries = submissions.discover(o.submissions, eps, work_root / "_staging")
        mine = in_shard([e.student for e in entries], o.shard)
        entries = [e for e in entries if e.student in mine]
        for e in entries:
            self.state["entries"][e.student] = {
                "name": e.name, "members": [vars(m) for m in e.members], "source": e.source, "layout": e.layout,
                "problem": e.problem, "notes": e.notes, "files": e.shown}
        self._save_state()
        regrade = {s.lower() for s in o.regrade}
        unknown = regrade - {e.student.lower() for e in entries} - {
            m.id.lower() for e in entries for m in e.members}
        if unknown:
            raise tasks.TaskError(f"--regrade: no entry for {', '.join(sorted(unknown))} in {o.submissions}")
        todo, skipped = [], 0
        for e in entries:
            again = o.regrade_all or e.student.lower() in regrade or any(m.id.lower() in regrade for m in e.members)
            for a, src in sorted(e.files.items()):
                digest = submissions.sha256(src)
                prev = self.state["done"].get(f"{e.student}/{a}")
                if prev and prev.get("sha256") == digest and not again:
                    skipped += 1
                    continue
                todo.append(Job(e, a, src, digest, work_root / f"{len(todo):04d}-{e.student}-{a}"))
        nothing = [e for e in entries if e.problem]
        self._say(f"batch: {len(entries)} entries in {o.submissions} ({len(nothing)} with nothing gradeable); "
                  f"{len(todo)} submissions to grade, {skipped} already graded (kept)")
        needed = sorted({j.assignment for j in todo} | (set() if not o.reference else {
            a for e in entries for a in e.files}))
        if needed:  # the harness once per assignment, before anything else
            build.build_harnesses([self.tasks[a] for a in needed], self.gpu.arch, work_root / "harness.log")
        self._setup_jail(work_root)
        self._say("batch: isolation: " + "; ".join(f"{k} {v}" for k, v in self.isolation.items()))
        for e in entries:
            self._write_student(e.student)
        self._write_gradebook()

        self.total, self.started = len(todo), time.monotonic()
        jobs = self.opts.jobs or os.cpu_count() or 1
        pool = ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="build")
        check_pool = ThreadPoolExecutor(max_workers=len(self.gpus) * self.gpus.checks, thread_name_prefix="check")
        time_pool = ThreadPoolExecutor(max_workers=len(self.gpus), thread_name_prefix="time")
        interrupted = False
        try:
            pending = {pool.submit(self._build, j): "built" for j in todo}
            if o.reference:
                self._references(needed, work_root)
            for fut, step in self._completed(pending):
                job = fut.result()
                if step == "built" and job.built and not job.error:
                    self.gpus.expect_check()
                    pending[check_pool.submit(self._check, job)] = "checked"
                elif step == "checked" and (job.timed or job.checked_alone):
                    self.stages.checked(job.check_s, job.timed, job.checked_alone)
                    pending[time_pool.submit(self._time, job)] = "timed"
                else:
                    if step == "checked":
                        self.stages.checked(job.check_s, False, False)
                    elif step == "timed":
                        self.stages.timed(job.timing_s)
                    self._finish(job)
        except KeyboardInterrupt:
            interrupted = True
        finally:
            self.gpus.close()
            pool.shutdown(wait=not interrupted, cancel_futures=True)
            check_pool.shutdown(wait=not interrupted, cancel_futures=True)
            time_pool.shutdown(wait=not interrupted, cancel_futures=True)
        if interrupted:
            with self.finishing:  # from here on, a grading cut short (its work folder going) records nothing
                self.stopping = True
            self._progress(final=True)
            self._say(f"batch: interrupted after {self.done} of {self.total}; what finished is saved: run the "
                      f"same command again to go on from there")
            sandbox.confine(None)
            shutil.rmtree(work_root, ignore_errors=True)
            sys.stderr.flush()
            sys.stdout.flush()
            os._exit(130)  # the build threads' compilers are left to finish on their own
        self._progress(final=True)
        self.state["complete"] = True  # this run reached its end (a Slurm shard's merge reads it)
        self._save_state()
        wall = time.monotonic() - wall0
        text = self._summary(entries, wall)
        print(text, flush=True)
        return 2 if any(k.split("/")[0] in {e.student for e in entries} for k in self.state["errors"]) else 0

    def _completed(self, pending: dict):
        """(future, step) of `pending` as they complete (those completing together in the order they
        were added), while the caller adds more; checking every 0.2 s whether a grading thread asked
        the batch to stop (KeyboardInterrupt here)."""
        order = {}
        while pending:
            for f in pending:
                order.setdefault(f, len(order))
            done, _ = wait(set(pending), timeout=0.2, return_when=FIRST_COMPLETED)
            if self.stop:
                raise KeyboardInterrupt
            for f in sorted(done, key=order.get):
                yield f, pending.pop(f)

    # -- isolation --------------------------------------------------------------------------------
    def _setup_jail(self, work_root: Path) -> None:
        """The jail every program holding student code runs in (jail.py), checked with the GPU inside
        it: without one, the batch stops here (JailError) rather than run anything unjailed."""
        if not self.opts.isolation:
            self.isolation = {"jail": "OFF (--no-isolation): student code ran as the TA, with the TA's files "
                                      "and network"}
            self._say("batch: WARNING: --no-isolation: student code runs unjailed, as you, with your files and "
                      "network. For debugging the kit only, never for a class.")
            return
        self.jail = sandbox.open_jail(work_root, tasks.ROOT / "harness" / "include", build.probe_path(self.gpu.arch),
                                      Limits(memory_bytes=self.opts.memory_bytes),
                                      hidden=(tasks.ROOT, self.opts.submissions, self.out))
        self.isolation = self.jail.describe()

    # -- the stages -------------------------------------------------------------------------------
    def _build(self, job: Job) -> Job:
        t0 = time.monotonic()
        task = self.tasks[job.assignment]
        try:
            job.work.mkdir(parents=True)
            with self.steps.shared(), sandbox.idle_builds():  # beside timings: a CPU only when they want none
                job.built = self._build_once(job, task)
            if not job.built and job.result.verdict == grade.Verdict.BUILD_ERROR:
                # Another submission's load (a fork bomb, a full disk) can make a build fail, and a machine busy
                # with other work starves an idle-priority build: a build error counts only when the build
                # fails again with nothing else of the batch running, at the normal priority.
                with self.steps.alone():
                    job.built = self._build_once(job, task)
        except Exception as e:  # noqa: BLE001 - whatever happens costs this submission only
            job.error = f"the build stage failed: {type(e).__name__}: {e}"
        job.seconds += time.monotonic() - t0
        return job

    def _build_once(self, job: Job, task) -> bool:
        job.result = grade.new_result(task, job.src, self.gpu, grade.Options())
        job.result.submission = f"{job.entry.source}: {job.entry.shown.get(job.assignment, '')}"
        return grade.build_stage(task, job.src, self.gpu.arch, job.work, job.result)

    def _check(self, job: Job) -> Job:
        """Correctness and races, on GPUs shared with other checks (job.timed: it goes on to be timed).
        A check that ends in a verdict another check beside it could have caused (NEIGHBOURLY) is run
        again alone (_time) before that verdict counts."""
        n = self.tasks[job.assignment].gpus_required
        before = copy.deepcopy(job.result)
        try:
            with self.gpus.check(n) as held:
                t0 = time.monotonic()
                job.timed = self._stage(job, held.ids, grade.check_stages)
                job.check_s = time.monotonic() - t0
        except KeyboardInterrupt:
            self.stop = True  # the batch stops as on Ctrl-C; this grading is not saved
            return job
        except Closed:
            return job
        if held.shared and (job.error or neighbourly(job.result)):
            job.result, job.error, job.checked_alone = before, "", True
        return job

    def _time(self, job: Job) -> Job:
        """The timing (and a check to run again alone first) on GPUs of its own, as many as the
        assignment needs; it waits until no check is left to start and those running have ended."""
        try:
            ids = self.gpus.acquire(self.tasks[job.assignment].gpus_required)
        except Closed:
            return job  # the batch stopped before its turn: not graded, not recorded
        try:
            if job.checked_alone:
                job.timed = self._stage(job, ids, grade.check_stages)
            if job.timed:
                t0 = time.monotonic()
                self._stage(job, ids, grade.timing_stages)
                job.timing_s = time.monotonic() - t0
        except KeyboardInterrupt:
            self.stop = True
        finally:
            self.gpus.release(ids)
        return job

    def _stage(self, job: Job, ids: tuple, stages) -> bool:
        """grade.check_stages or grade.timing_stages on GPUs `ids`: what it returns, False on an error."""
        t0 = time.monotonic()
        task = self.tasks[job.assignment]
        going_on = False
        try:
            with self.steps.shared():
                going_on = stages(task, job.work, self.gpus.info(ids),
                                  grade.Options(gpus=ids, profile=self.opts.profile, baselines=self.baselines),
                                  job.result)
            for p in job.result.performance:
                p.baseline_note = self.baselines.note(task.name, p.case_id, ids) or ""
        except NoGpu as e:
            if self._gpu_works():
                # The device is fine: the submission's own process ended with the runner's "no GPU" status.
                job.result.verdict = grade.Verdict.RUNTIME_ERROR
                job.result.message = ("the program exited with the status the runner keeps for \"no GPU\", "
                                      "while the GPU works")
                job.result.score = 0.0
            else:
                raise tasks.TaskError(f"the GPU stopped working during the batch ({e}); run the same command "
                                      f"again to go on") from None
        except build.KitError as e:  # the kit's own words ("the machine is too busy to time trmm: ...")
            job.error = str(e)
        except Exception as e:  # noqa: BLE001
            job.error = f"the GPU stages failed: {type(e).__name__}: {e}"
        job.seconds += time.monotonic() - t0
        return going_on is True

    def _gpu_works(self) -> bool:
        d = workdir.new("kit-probe-")
        try:
            r = sandbox.run([str(build.probe_path(self.gpu.arch))], d, d / "probe.log", timeout=120)
            return r.returncode == 0
        finally:
            shutil.rmtree(d, ignore_errors=True)

    def _references(self, names: list, work_root: Path) -> None:
        """reference/<a>/kernel.cu graded once on this GPU (kept across runs), for the plots."""
        for a in names:
            path = self.out / "reference" / f"{a}.json"
            try:
                rec = json.loads(path.read_text())
                if rec.get("gpu", {}).get("name") == self.gpu.name:
                    continue
            except (OSError, ValueError):
                pass
            src = tasks.ROOT / "reference" / a / "kernel.cu"
            if not src.is_file():
                continue
            t0 = time.monotonic()
            ids = self.gpus.first(self.tasks[a].gpus_required)
            try:
                r = grade.grade(self.tasks[a], src, self.gpus.info(ids), grade.Options(gpus=ids, profile=self.opts.profile))
            except Exception as e:  # noqa: BLE001
                self._say(f"batch: the reference of {a} could not be graded ({e}); its plots show no reference")
                continue
            rec = plain(r.to_json())
            rec["batch"] = {"graded_at": now(), "seconds": time.monotonic() - t0}
            write_record(rec, path)
            self._say(f"batch: reference {a}: {r.verdict.value}, {r.message}")
            for s in self._students_with(a):
                self._write_student(s)

    def _students_with(self, a: str) -> list:
        return sorted({k.split("/")[0] for k in self.state["done"] if k.endswith("/" + a)})

    # -- when one finishes ------------------------------------------------------------------------
    def _finish(self, job: Job) -> None:
        with self.finishing:
            if not self.stopping:
                self._finish_one(job)

    def _finish_one(self, job: Job) -> None:
        e, a = job.entry, job.assignment
        task = self.tasks[a]
        rec, rec_path = self._write_record(job)
        verdict = self._remember(job, rec, rec_path)
        self._write_student(e.student)
        self._write_gradebook()
        if not self.tty:
            self._say(f"batch: {e.student} {a}: {verdict} {rec.get('score', 0):g}/{task.max_score:g}"
                      + (f": {rec.get('message', '')[:160]}" if rec.get("message") else ""))
        self._progress()
        if not os.environ.get("KIT_BATCH_KEEP_WORK"):
            shutil.rmtree(job.work, ignore_errors=True)
