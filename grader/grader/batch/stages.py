"""The stages of one submission in a batch, as the scheduler (scheduling.py) hands them out: the build
(parallel, at the idle priority, a failure tried again alone), the checks (correctness, races) on a GPU
shared with a few others, a check whose verdict a neighbour could have caused run again alone, and the
timing with the GPU to itself; the reference graded once per GPU for the plots."""
from __future__ import annotations

import copy
import json
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from .. import build, grade, judged, performance, protocol, sandbox, submissions, tasks, workdir
from ..gpu import NoGpu
from ..limits import DISK_LOW, DiskLow
from ..report import write_record
from .gpus import Closed
from .state import now, plain


@dataclass
class Job:
    """One file of one entry, graded for one assignment."""
    entry: submissions.Entry
    """The student (or group) it belongs to."""
    assignment: str
    src: Path
    """The file graded."""
    digest: str
    """Its SHA-256, kept in the state: an unchanged file is not graded again."""
    work: Path
    """Its work folder, removed once its outputs are written."""
    result: object = None
    """Its GradeResult, filled in stage by stage."""
    built: bool = False
    error: str = ""
    """Why the kit could not grade it (not the student's verdict): it goes to the errors list."""
    seconds: float = 0.0
    """Seconds spent on it, all stages together."""
    timed: bool = False
    """Its checks passed: it is timed next."""
    check_s: float = 0.0
    """Seconds its check took (beside others)."""
    timing_s: float = 0.0
    """Seconds its timing took (0: not timed)."""
    checked_alone: bool = False
    """Its checks failed beside another submission's, to be run again with the GPU to itself."""
    alone: bool = False
    """The disk fell below the jail's reserve while it ran, or was below it when a run was to start:
    maybe another submission's doing, so its GPU stages run again with nothing else of the batch
    running (a stop for the reserve then is its own; a disk still short stops the batch)."""

    @property
    def key(self) -> str:
        return f"{self.entry.student}/{self.assignment}"


NEIGHBOURLY = {grade.Verdict.RUNTIME_ERROR, grade.Verdict.LAUNCH_ERROR, grade.Verdict.TIMEOUT}
"""What a check can end in because of another one on its GPU: the other took the GPU's memory (a
failed allocation, a refused launch) or most of its time. Never a wrong output or a race: another
process cannot write into this one's memory. Nor a stop for going over its work folder's disk or file
limit, which counts what it wrote alone, or for forking past its own process limit (neighbourly())."""


def neighbourly(result) -> bool:
    """Whether a check's verdict could be another check's doing (NEIGHBOURLY, less the program's going
    over its own work folder's limits)."""
    if result.verdict not in NEIGHBOURLY:
        return False
    failed = next((c for c in result.cases if c.verdict != grade.Verdict.CORRECT), None)
    return not (failed is not None and judged.over_own_limit(failed.message))


def short_of_disk(result) -> bool:
    """Whether a run of this grading was stopped for the disk's reserve (limits.DISK_LOW). The grader's
    own words open the message: the same words in a fault's text, which the program writes, do not count."""
    stop = judged.STOPPED + DISK_LOW
    return result is not None and (result.message.startswith(performance.IN_TIMED_RUNS + stop)
                                   or any(c.message.startswith(stop) for c in result.cases))


def disk_low(e: DiskLow) -> tasks.TaskError:
    """The batch stops on a disk below the jail's reserve: every later run would find the same disk,
    and none of them is a student's verdict."""
    return tasks.TaskError(f"{e}; the batch stopped here: what was graded is saved, run the same command "
                           f"again to go on")


class Steps:
    """Every build and GPU stage runs shared; a failed build is tried again alone, with nothing else of
    the batch running, so that another submission's load never becomes a student's verdict (unless its
    source is at fault: build.source_error)."""

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


class Stages:
    """The stages of a Job, as methods of the Batch (which has the tasks, the GPUs, the jail's steps and
    the shared library timings they use)."""

    def _build(self, job: Job) -> Job:
        t0 = time.monotonic()
        task = self.tasks[job.assignment]
        try:
            job.work.mkdir(parents=True)
            # Beside timings: on CPUs they do not use, and even there a CPU only when nothing else wants it.
            try:
                with self.steps.shared(), sandbox.idle_builds(), sandbox.on_cpus(self.shared_cpus):
                    job.built = self._build_once(job, task)
            except DiskLow:  # maybe another run's doing: again once nothing else runs (short then: the batch stops)
                with self.steps.alone():
                    job.built = self._build_once(job, task)
            if (not job.built and job.result.verdict == grade.Verdict.BUILD_ERROR
                    and not build.source_error(job.result.build_log)):
                # Another submission's load (a fork bomb, a full disk) can make a build fail, and a machine busy
                # with other work starves an idle-priority build: such a build error counts only when the
                # build fails again with nothing else of the batch running, at the normal priority. That
                # waits for every build and GPU stage running to end, so an error of the source itself
                # (a compiler diagnostic of a line, a symbol defined twice) counts at once.
                with self.steps.alone():
                    job.built = self._build_once(job, task)
        except DiskLow as e:
            raise disk_low(e) from None
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
            with self.gpus.check(n) as held, sandbox.on_cpus(self.shared_cpus):
                t0 = time.monotonic()
                job.timed = self._stage(job, held.ids, grade.check_stages)
                job.check_s = time.monotonic() - t0
        except KeyboardInterrupt:
            self.stop = True  # the batch stops as on Ctrl-C; this grading is not saved
            return job
        except Closed:
            return job
        if job.alone or short_of_disk(job.result):  # the disk: builds and other GPUs' runs share it too
            job.result, job.error, job.checked_alone, job.alone = before, "", True, True
        elif held.shared and (job.error or neighbourly(job.result)):
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
            with sandbox.on_cpus(self._cpus_of(ids)):
                if job.checked_alone:
                    job.timed = self._stage(job, ids, grade.check_stages, alone=job.alone)
                if job.timed:
                    t0 = time.monotonic()
                    before, was_alone = copy.deepcopy(job.result), job.alone
                    self._stage(job, ids, grade.timing_stages, alone=was_alone)
                    if not was_alone and (job.alone or short_of_disk(job.result)):
                        job.result, job.error, job.alone = before, "", True
                        self._stage(job, ids, grade.timing_stages, alone=True)
                    job.timing_s = time.monotonic() - t0
        except KeyboardInterrupt:
            self.stop = True
        finally:
            self.gpus.release(ids)
        return job

    def _cpus_of(self, ids: tuple):
        """The CPUs kept for the timings on GPUs `ids` (None: no CPUs are kept apart here)."""
        cpus = [c for i in ids for c in self.timing_cpus.get(i, ())]
        return cpus or None

    def _stage(self, job: Job, ids: tuple, stages, alone: bool = False, settled: bool = False) -> bool:
        """grade.check_stages or grade.timing_stages on GPUs `ids` (`alone`: with nothing else of the batch
        running; `settled`: once more, the disk having come back above the reserve): what it returns, False
        on an error."""
        t0 = time.monotonic()
        task = self.tasks[job.assignment]
        going_on = False
        try:
            with self.steps.alone() if alone else self.steps.shared():
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
        except DiskLow as e:
            if self._short_disk(job, e, alone, settled):
                job.seconds += time.monotonic() - t0
                return self._stage(job, ids, stages, alone=True, settled=True)
        except Exception as e:  # noqa: BLE001
            job.error = f"the GPU stages failed: {type(e).__name__}: {e}"
        job.seconds += time.monotonic() - t0
        return going_on is True

    def _short_disk(self, job: Job, e: DiskLow, alone: bool, settled: bool) -> bool:
        """What a run refused its start for the disk's reserve does to `job`: True where its stage is to
        run once more, alone; TaskError where the disk is short for no grading's files."""
        if not alone:
            job.alone = True  # maybe another run's doing: the caller runs it again alone
            return False
        why, others_hold_it = e.left_by(job.work, self.work_root, self.jail.limits.drop_to if self.jail else None)
        if others_hold_it:  # other gradings' files, kept until their outputs are written
            job.error = ("not graded in this run: the disk holding the work folders was below the jail's "
                         "reserve while other gradings kept their files; the next run grades it")
        elif why:  # what its own program left there, with nothing else running
            job.result.verdict, job.result.score = grade.Verdict.RUNTIME_ERROR, 0.0
            job.result.message = f"{judged.STOPPED}{why}"
        elif not settled and e.passes():  # the blocks of folders just removed, given back late
            return True
        else:
            raise disk_low(e) from None
        return False

    def _gpu_works(self) -> bool:
        d = workdir.new_jailed("kit-probe-")
        try:
            r = sandbox.run([str(build.probe_path(self.gpu.arch))], d, d.parent / "probe.log", timeout=120)
            return r.returncode == 0
        finally:
            protocol.clear(d.parent)

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
                with sandbox.on_cpus(self._cpus_of(ids)):
                    r = grade.grade(self.tasks[a], src, self.gpus.info(ids),
                                    grade.Options(gpus=ids, profile=self.opts.profile))
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
