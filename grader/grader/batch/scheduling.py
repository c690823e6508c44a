"""How a batch runs: the to-do list (what changed since the state), builds in parallel on the CPU
cores, the checks of a few submissions at once on each GPU and the timings one at a time (each stage
in stages.py), and the jail every program holding student code runs in."""
from __future__ import annotations

import os
import sys
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from pathlib import Path

from .. import build, protocol, sandbox, submissions, tasks, workdir
from ..cpus import cpu_list
from ..limits import Limits
from ..report import printable
from ..results import GpuInfo
from . import Options, in_shard
from .baselines import SharedBaselines
from .gpus import Pool, default_checks, split_cpus
from .outputs import Outputs
from .progress import Progress, StageTimes
from .stages import Job, Stages, Steps
from .state import State


class Batch(State, Outputs, Progress, Stages):
    """One run of the batch verb over a class: what to grade, the pools that grade it, and the outputs
    written as each submission finishes."""

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
        self.shared_cpus, self.timing_cpus = split_cpus(os.sched_getaffinity(0), list(self.gpus.infos))
        self.finishing = threading.Lock()  # one submission's outputs written at a time
        self.stopping = False  # interrupted: gradings still running on the GPUs are not recorded
        self.stop = False  # a grading thread was interrupted: the batch stops as on Ctrl-C

    # -- the run ----------------------------------------------------------------------------------
    def run(self) -> int:
        self.out.mkdir(parents=True, exist_ok=True)
        wall0 = time.monotonic()
        work_root = self.work_root = workdir.new("kit-batch-")
        cpus = os.sched_getaffinity(0)
        try:
            return self._run(work_root, wall0)
        finally:
            os.sched_setaffinity(0, cpus)
            sandbox.confine(None)
            protocol.clear(work_root)

    def _run(self, work_root: Path, wall0: float) -> int:
        o = self.opts
        entries, todo, skipped = self._todo(work_root)
        nothing = [e for e in entries if e.problem]
        self._say(f"batch: {len(entries)} entries in {o.submissions} ({len(nothing)} with nothing gradeable); "
                  f"{len(todo)} submissions to grade, {skipped} already graded (kept)")
        needed = sorted({j.assignment for j in todo} | (set() if not o.reference else {
            a for e in entries for a in e.files}))
        if needed:  # the harness once per assignment, before anything else
            build.build_harnesses([self.tasks[a] for a in needed], self.gpu.arch, work_root / "harness.log")
        self._setup_jail(work_root)
        self._say("batch: isolation: " + "; ".join(f"{k} {v}" for k, v in self.isolation.items()))
        if self.timing_cpus:
            self._say(f"batch: CPUs: builds and checks on {cpu_list(self.shared_cpus)}; timings on " + ", ".join(
                f"{cpu_list(c)} (GPU {g})" for g, c in self.timing_cpus.items()) + ", where nothing else runs")
            # The grader's own threads too, started from here on: their looks at every run's processes
            # and files take milliseconds of CPU at a program holding thousands of descriptors, which a
            # timing's judge would wait for, as if other programs had taken its CPU.
            os.sched_setaffinity(0, self.shared_cpus)
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
            protocol.clear(work_root)
            sys.stderr.flush()
            sys.stdout.flush()
            os._exit(130)  # the build threads' compilers are left to finish on their own
        self._progress(final=True)
        self.state["complete"] = True  # this run reached its end (a Slurm shard's merge reads it)
        self._save_state()
        wall = time.monotonic() - wall0
        text = self._summary(entries, wall)
        print(printable(text), flush=True)
        return 2 if any(k.split("/")[0] in {e.student for e in entries} for k in self.state["errors"]) else 0

    def _todo(self, work_root: Path) -> tuple:
        """(entries of the class in this shard, the Jobs to grade, how many are kept as graded): a file
        is graded again when it changed since the state, or when --regrade names its student."""
        o = self.opts
        eps = {n: t.entry_point for n, t in self.tasks.items()}
        entries = submissions.discover(o.submissions, eps, work_root / "_staging")
        mine = in_shard([e.student for e in entries], o.shard)
        entries = [e for e in entries if e.student in mine]
        if o.shard:
            # A shard is every n-th student by name: a new entry moves the others along. What this shard
            # graded of a student it no longer holds is another shard's now, and the merge (shards in
            # order) would lay it over that shard's newer grade: it goes.
            gone = set(self.state["entries"]) - mine
            for key in ("done", "errors", "skipped"):
                self.state[key] = {k: v for k, v in self.state.get(key, {}).items() if k.split("/")[0] not in gone}
            for student in gone:
                del self.state["entries"][student]
                for sub in ("records", "sources"):
                    protocol.clear(self.out / sub / student)
        else:
            self._set_aside(entries)
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
                key = f"{e.student}/{a}"
                aside = self.state.get("set_aside", {})
                if key in aside and aside[key].get("sha256") == digest and not again:
                    self.state["done"][key] = aside.pop(key)  # the same file back: its grade with it
                prev = self.state["done"].get(key)
                if prev and prev.get("sha256") == digest and not again:
                    skipped += 1
                    continue
                todo.append(Job(e, a, src, digest, work_root / f"{len(todo):04d}-{e.student}-{a}"))
        return entries, todo, skipped

    def _set_aside(self, entries: list) -> None:
        """The grades of files no longer in the class folder (a student's folder gone or renamed, a file
        removed) leave the gradebooks, which show the folder as it is; their records stay in out/records,
        and the grade comes back, ungraded again, with the same file (state "set_aside")."""
        present = {f"{e.student}/{a}" for e in entries for a in e.files}
        names = {e.student for e in entries}
        gone = sorted(k for k in self.state["done"] if k not in present and k.split("/")[1] in self.tasks)
        aside = self.state.setdefault("set_aside", {})
        for k in gone:
            aside[k] = self.state["done"].pop(k)
        for key in ("errors", "skipped"):
            self.state[key] = {k: v for k, v in self.state.get(key, {}).items()
                               if k in present or k.split("/")[1] not in self.tasks}
        for student in set(self.state["entries"]) - names:
            del self.state["entries"][student]
        if gone:
            self._say(f"batch: {len(gone)} graded file{'s' if len(gone) > 1 else ''} no longer in "
                      f"{self.opts.submissions}, left out of the gradebooks (records kept in {self.out / 'records'}): "
                      + ", ".join(gone[:10]) + (", ..." if len(gone) > 10 else ""))

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
                                      Limits(memory_bytes=self.opts.memory_bytes, disk_bytes=self.opts.disk_bytes),
                                      hidden=(tasks.ROOT, self.opts.submissions, self.out))
        self.isolation = self.jail.describe()

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
            protocol.clear(job.work)
