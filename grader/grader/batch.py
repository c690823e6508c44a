"""The batch verb: a whole class graded at once.

  python -m grader batch DIR [--out DIR] [--jobs N] [--regrade STUDENT ...] [--regrade-all]
                             [--assignments a b ...] [--timed-runs N] [--no-reference]

DIR holds one entry per student (see submissions.py for the layouts and how files are matched to
assignments). Builds run in parallel on the CPU cores; the GPU stages (correctness, races,
performance) run one submission at a time, so that no two timings share the GPU. Hidden cases are
included. Each submission is graded in its own work folder, its programs in the sandbox's jail.

Under --out (default grades/batch):
  gradebook.csv                  one row per student: a column per assignment, the total, notes
  records/<student>/<a>.json     the full record of each grading (GradeResult, plus a "batch" part)
  reports/<student>.md, .html    per student: verdicts, cases, and their rate against the
                                 reference and the library on this GPU (an SVG plot)
  gradescope/<student>/results.json
  reference/<a>.json             the reference solution graded once on this GPU (for the plots)
  sources/<student>/<a>.cu       the file graded, as it was (archives' files included)
  state.json                     what is graded: (student, assignment, file hash); a batch run again
                                 skips those unless --regrade names the student or --regrade-all
  summary.md, summary.json       every entry's verdicts, what was not gradeable, the stage times
  similarity/<a>.html            with --similarity: pairs of submissions that share code, with each
                                 other, the reference or the lecture's examples (similarity.py)
Everything is written as each submission finishes, each file whole or not at all.
"""
from __future__ import annotations

import csv
import datetime
import html
import io
import json
import os
import shutil
import signal
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from . import build, gpu as gpu_mod, grade, gradescope, jail, sandbox, similarity, submissions, tasks, workdir
from .limits import Limits
from .gpu import NoGpu
from .report import atomic_write
from .results import GpuInfo
from .tasks import describe

STAGES = ("build", "correctness", "sanitize", "performance")


@dataclass
class Options:
    submissions: Path
    out: Path
    jobs: int = 0
    """Parallel builds (0: one per CPU core)."""
    assignments: list = field(default_factory=list)
    """Assignments graded (empty: every one in the registry)."""
    regrade: list = field(default_factory=list)
    """Students graded again even where nothing changed."""
    regrade_all: bool = False
    timed_runs: int = 0
    """Timed runs per graded case instead of the task's (at least 10; 0: the task's)."""
    reference: bool = True
    """Grade reference/<a>/kernel.cu once on this GPU, for the plots (kept in out/reference/)."""
    isolation: bool = True
    """Run student code in the jail (jail.py); off only to debug the kit."""
    memory_bytes: int = Limits.memory_bytes
    """Host memory of all of one submission's processes together."""
    tty: Optional[bool] = None
    """Progress updated in place (default: when stderr is a terminal)."""


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

    @property
    def key(self) -> str:
        return f"{self.entry.student}/{self.assignment}"


def main(args) -> int:
    opts = Options(
        submissions=Path(args.submissions), out=Path(args.out or tasks.ROOT / "grades" / "batch"), jobs=args.jobs or 0,
        assignments=args.assignments or [], regrade=args.regrade or [], regrade_all=args.regrade_all,
        timed_runs=args.timed_runs or 0, reference=not args.no_reference, isolation=not args.no_isolation,
        memory_bytes=int(args.memory_gib * (1 << 30)))
    if opts.memory_bytes < (1 << 30):
        raise tasks.TaskError(f"--memory-gib {args.memory_gib:g}: a submission needs at least 1 GiB of host memory")
    if not opts.submissions.is_dir():
        raise tasks.TaskError(f"{opts.submissions} is not a folder of submissions")
    if opts.isolation:
        jail.find(tasks.ROOT / "harness" / "include")  # no jail, no grading: say so before anything else
    similar = getattr(args, "similarity", False)
    if similar:
        similarity.require()  # likewise: a report that cannot be made is said before the grading
    info = gpu_mod.detect()
    previous = signal.signal(signal.SIGTERM, _interrupt)  # a TERM stops it like Ctrl-C: what finished is kept
    try:
        rc = Batch(opts, info).run()
    finally:
        signal.signal(signal.SIGTERM, previous)
    if similar:
        similarity.report(opts.out, getattr(args, "threshold", None) or similarity.THRESHOLD)
    return rc


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def plain(record: dict) -> dict:
    """A record as it reads back from its JSON file (verdicts as words)."""
    return json.loads(json.dumps(record, default=str))


def _now() -> str:
    return datetime.datetime.now().astimezone().isoformat(timespec="seconds")


def _fmt_s(s: float) -> str:
    s = int(round(s))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


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


class Batch:
    def __init__(self, opts: Options, gpu: GpuInfo):
        self.opts, self.gpu = opts, gpu
        self.out = opts.out.resolve()
        names = opts.assignments or tasks.registry()
        self.tasks = {n: tasks.load(n, include_hidden=True) for n in names}
        if opts.timed_runs:
            for t in self.tasks.values():
                for g in t.graded:
                    g.runs = max(10, opts.timed_runs)
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

    # -- state ------------------------------------------------------------------------------------
    def _load_state(self) -> dict:
        try:
            st = json.loads(self.state_path.read_text())
            if isinstance(st, dict) and st.get("version") == 1:
                return st
        except (OSError, ValueError):
            pass
        return {"version": 1, "done": {}, "errors": {}, "entries": {}}

    def _save_state(self) -> None:
        atomic_write(self.state_path, json.dumps(self.state, indent=1, sort_keys=True) + "\n")

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
        for a in needed:  # the harness once per assignment, before anything else
            build.build_harness(self.tasks[a], self.gpu.arch, work_root / f"harness-{a}.log")
        self._setup_jail(work_root)
        self._say("batch: isolation: " + "; ".join(f"{k} {v}" for k, v in self.isolation.items()))
        for e in entries:
            self._write_student(e.student)
        self._write_gradebook()

        self.total, self.started = len(todo), time.monotonic()
        jobs = self.opts.jobs or os.cpu_count() or 1
        pool = ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="build")
        interrupted = False
        try:
            futures = [pool.submit(self._build, j) for j in todo]
            if o.reference:
                self._references(needed, work_root)
            for fut in as_completed(futures):
                job = fut.result()
                if job.built and not job.error:
                    self._gpu(job)
                self._finish(job)
        except KeyboardInterrupt:
            interrupted = True
        finally:
            pool.shutdown(wait=not interrupted, cancel_futures=True)
        if interrupted:
            self._progress(final=True)
            self._say(f"batch: interrupted after {self.done} of {self.total}; what finished is saved: run the "
                      f"same command again to go on from there")
            sandbox.confine(None)
            shutil.rmtree(work_root, ignore_errors=True)
            sys.stderr.flush()
            sys.stdout.flush()
            os._exit(130)  # the build threads' compilers are left to finish on their own
        self._progress(final=True)
        wall = time.monotonic() - wall0
        text = self._summary(entries, wall)
        print(text, flush=True)
        return 2 if any(k.split("/")[0] in {e.student for e in entries} for k in self.state["errors"]) else 0

    def _say(self, line: str) -> None:
        with self.lock:
            if self.tty:
                sys.stderr.write("\r\033[K")
            print(line, file=sys.stderr, flush=True)

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
                                      Limits(memory_bytes=self.opts.memory_bytes))
        self.isolation = self.jail.describe()

    # -- the stages -------------------------------------------------------------------------------
    def _build(self, job: Job) -> Job:
        t0 = time.monotonic()
        task = self.tasks[job.assignment]
        try:
            job.work.mkdir(parents=True)
            with self.steps.shared():
                job.built = self._build_once(job, task)
            if not job.built and job.result.verdict == grade.Verdict.BUILD_ERROR:
                # Another submission's load (a fork bomb, a full disk) can make a build fail: a build error
                # counts only when the build fails again with nothing else running.
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

    def _gpu(self, job: Job) -> None:
        t0 = time.monotonic()
        task = self.tasks[job.assignment]
        try:
            with self.steps.shared():
                grade.gpu_stages(task, job.work, self.gpu, grade.Options(), job.result)
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
        except Exception as e:  # noqa: BLE001
            job.error = f"the GPU stages failed: {type(e).__name__}: {e}"
        job.seconds += time.monotonic() - t0

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
            try:
                r = grade.grade(self.tasks[a], src, self.gpu)
            except Exception as e:  # noqa: BLE001
                self._say(f"batch: the reference of {a} could not be graded ({e}); its plots show no reference")
                continue
            rec = plain(r.to_json())
            rec["batch"] = {"graded_at": _now(), "seconds": time.monotonic() - t0}
            gradescope.write_json(rec, path)
            self._say(f"batch: reference {a}: {r.verdict.value}, {r.message}")
            for s in self._students_with(a):
                self._write_student(s)

    def _students_with(self, a: str) -> list:
        return sorted({k.split("/")[0] for k in self.state["done"] if k.endswith("/" + a)})

    # -- when one finishes ------------------------------------------------------------------------
    def _finish(self, job: Job) -> None:
        e, a = job.entry, job.assignment
        task = self.tasks[a]
        rec_path = self.out / "records" / e.student / f"{a}.json"
        if job.error:
            rec = gradescope.not_graded(a, job.error)
        else:
            rec = plain(job.result.to_json())
        rec["batch"] = {
            "student": e.student, "name": e.name, "members": [vars(m) for m in e.members], "entry": e.source,
            "file": e.shown.get(a, ""), "sha256": job.digest, "graded_at": _now(), "seconds": job.seconds,
            "hidden_cases": [c.id for c in task.cases if getattr(c, "hidden", False)],
            "timed_runs": [g.runs for g in task.graded],
        }
        rec["isolation"] = self.isolation
        try:  # what was graded, kept: an archive's files are gone once the batch ends
            atomic_write(self.out / "sources" / e.student / f"{a}.cu", job.src.read_text(errors="replace"))
        except OSError:
            pass
        gradescope.write_json(rec, rec_path)
        with self.lock:
            skipped = self.state.setdefault("skipped", {})
            skipped.pop(job.key, None)
            if job.error:
                self.state["errors"][job.key] = {"message": job.error, "sha256": job.digest, "at": _now()}
                self.state["done"].pop(job.key, None)
            elif rec["verdict"] == "skipped":  # this machine cannot grade it (too few GPUs): a later batch will
                self.state["errors"].pop(job.key, None)
                self.state["done"].pop(job.key, None)
                skipped[job.key] = {"message": rec.get("message", ""), "sha256": job.digest, "at": _now()}
            else:
                self.state["errors"].pop(job.key, None)
                self.state["done"][job.key] = {
                    "sha256": job.digest, "verdict": rec["verdict"], "score": rec["score"],
                    "max_score": task.max_score, "stage_seconds": rec.get("stage_seconds", {}),
                    "seconds": job.seconds, "record": str(rec_path.relative_to(self.out)), "graded_at": _now()}
            self._save_state()
            verdict = rec["verdict"]
            self.counts[verdict] = self.counts.get(verdict, 0) + 1
            self.done += 1
        self._write_student(e.student)
        self._write_gradebook()
        if not self.tty:
            self._say(f"batch: {e.student} {a}: {verdict} {rec.get('score', 0):g}/{task.max_score:g}"
                      + (f": {rec.get('message', '')[:160]}" if rec.get("message") else ""))
        self._progress()
        if not os.environ.get("KIT_BATCH_KEEP_WORK"):
            shutil.rmtree(job.work, ignore_errors=True)

    def _progress(self, final: bool = False) -> None:
        elapsed = time.monotonic() - self.started
        left = elapsed / self.done * (self.total - self.done) if self.done else None
        counts = ", ".join(f"{k} {v}" for k, v in sorted(self.counts.items()))
        line = (f"[{self.done}/{self.total}] {counts or 'started'} | elapsed {_fmt_s(elapsed)}"
                + (f" | left ~{_fmt_s(left)}" if left is not None and self.done < self.total else ""))
        with self.lock:
            if self.tty:
                sys.stderr.write("\r\033[K" + line + ("\n" if final else ""))
                sys.stderr.flush()
            elif final:
                print(line, file=sys.stderr, flush=True)

    # -- outputs ----------------------------------------------------------------------------------
    def _records(self, student: str) -> list:
        recs = []
        for a in self.tasks:
            p = self.out / "records" / student / f"{a}.json"
            k = f"{student}/{a}"
            if p.is_file() and (k in self.state["done"] or k in self.state["errors"] or k in self.state.get("skipped", {})):
                try:
                    recs.append(json.loads(p.read_text()))
                except ValueError:
                    pass
        return recs

    def _reference(self, a: str) -> Optional[dict]:
        try:
            return json.loads((self.out / "reference" / f"{a}.json").read_text())
        except (OSError, ValueError):
            return None

    def _write_student(self, student: str) -> None:
        info = self.state["entries"].get(student, {})
        recs = self._records(student)
        refs = {a: self._reference(a) for a in self.tasks}
        md, page = student_report(student, info, recs, self.tasks, refs, self.gpu)
        atomic_write(self.out / "reports" / f"{student}.md", md)
        atomic_write(self.out / "reports" / f"{student}.html", page)
        hidden = {n: [c.id for c in t.cases if getattr(c, "hidden", False)] for n, t in self.tasks.items()}
        graded = {r["assignment"] for r in recs}
        missing = [a for a in self.tasks if a not in graded and a not in info.get("files", {})]
        note = info.get("problem") or ""
        data = gradescope.results_json(recs, self.tasks, missing, note,
                                       sum(r.get("batch", {}).get("seconds", 0) for r in recs), hidden)
        gradescope.write_json(data, self.out / "gradescope" / student / "results.json")

    def _write_gradebook(self) -> None:
        with self.lock:
            atomic_write(self.out / "gradebook.csv", gradebook_csv(self.state, list(self.tasks)))

    def _summary(self, entries: list, wall: float) -> str:
        rows, stage_tot = [], {s: [] for s in STAGES}
        for e in entries:
            if e.problem:
                rows.append((e.student, "-", e.problem, "", ""))
            for a in sorted(e.files):
                k = f"{e.student}/{a}"
                d = self.state["done"].get(k)
                if d:
                    rows.append((e.student, a, d["verdict"], f"{d['score']:g}/{d['max_score']:g}", e.shown.get(a, "")))
                    for s in STAGES:
                        if s in d.get("stage_seconds", {}):
                            stage_tot[s].append(d["stage_seconds"][s])
                else:
                    err = (self.state["errors"].get(k) or self.state.get("skipped", {}).get(k) or {}).get(
                        "message", "not graded")
                    rows.append((e.student, a, "not graded: " + err, "", e.shown.get(a, "")))
        lines = ["", "== Batch summary", "", f"{'student':<24} {'assignment':<10} {'score':<10} verdict"]
        lines += [f"{s:<24} {a:<10} {sc:<10} {v}" for s, a, v, sc, _ in rows]
        lines += ["", f"{'stage':<12} {'submissions':>11} {'total s':>9} {'mean s':>8} {'max s':>8}"]
        stats = {}
        for s in STAGES:
            v = stage_tot[s]
            if v:
                stats[s] = {"count": len(v), "total_s": sum(v), "mean_s": sum(v) / len(v), "max_s": max(v)}
                lines.append(f"{s:<12} {len(v):>11} {sum(v):>9.1f} {sum(v) / len(v):>8.2f} {max(v):>8.2f}")
        lines.append(f"wall time of this run: {_fmt_s(wall)} ({wall:.1f} s), {self.done} graded in it; builds in parallel on {self.opts.jobs or os.cpu_count()} "
                     f"workers, GPU stages one at a time")
        lines.append(f"outputs: {self.out}")
        summary = {"wall_s": wall, "graded_this_run": self.done, "stages": stats, "gpu": self.gpu.name,
                   "isolation": self.isolation,
                   "rows": [{"student": s, "assignment": a, "verdict": v, "score": sc, "file": f}
                            for s, a, v, sc, f in rows]}
        gradescope.write_json(summary, self.out / "summary.json")
        atomic_write(self.out / "summary.md", "```\n" + "\n".join(lines).strip() + "\n```\n")
        return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# The gradebook.

def gradebook_csv(state: dict, assignments: list) -> str:
    """student, name, one column per assignment, total, notes: one row per student (each member of
    a group submission). An empty cell: nothing graded for that assignment (the notes say why)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["student", "name", *assignments, "total", "notes"])
    for student in sorted(state["entries"], key=str.lower):
        info = state["entries"][student]
        cells, notes, total = [], [], 0.0
        if info.get("problem"):
            notes.append(info["problem"])
        for a in assignments:
            k = f"{student}/{a}"
            d = state["done"].get(k)
            if d:
                cells.append(f"{round(d['score'], 2):g}")  # to the hundredth, as gradebooks show it
                total += d["score"]
                if d["verdict"] != "correct":
                    notes.append(f"{a}: {d['verdict']}")
            else:
                cells.append("")
                if k in state["errors"]:
                    notes.append(f"{a}: could not be graded ({state['errors'][k]['message'][:120]})")
                elif k in state.get("skipped", {}):
                    notes.append(f"{a}: {state['skipped'][k]['message'][:120]}")
                elif a in info.get("files", {}):
                    notes.append(f"{a}: not graded yet")
        members = info.get("members") or [{"id": student, "name": info.get("name", "")}]
        for m in members:
            w.writerow([m.get("id") or student, m.get("name") or info.get("name", ""), *cells, f"{round(total, 2):g}",
                        "; ".join(notes)])
    return buf.getvalue()


# ---------------------------------------------------------------------------------------------
# Per-student reports: Markdown and HTML, with an SVG plot drawn by hand.

def rate_plot(title: str, metric: str, bars: list, tiers: list = ()) -> str:
    """A horizontal bar chart as inline SVG: bars are (label, rate or None, colour); tiers are
    (rate, points) drawn as dashed lines."""
    vals = [v for _, v, _ in bars if v] + [r for r, _ in tiers]
    top = max(vals) * 1.12 if vals else 1.0
    left, width, row = 170, 420, 28
    height = 40 + row * len(bars) + 30
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{left + width + 90}" height="{height}" '
           f'role="img" aria-label="{html.escape(title)}" font-family="sans-serif" font-size="12">',
           f'<text x="4" y="16" font-weight="bold">{html.escape(title)}</text>']
    for i, (label, v, colour) in enumerate(bars):
        y = 30 + i * row
        out.append(f'<text x="{left - 6}" y="{y + 15}" text-anchor="end">{html.escape(label)}</text>')
        if v:
            w = max(1.0, width * v / top)
            out.append(f'<rect x="{left}" y="{y + 3}" width="{w:.1f}" height="{row - 8}" fill="{colour}"/>')
            out.append(f'<text x="{left + w + 4:.1f}" y="{y + 15}">{v:,.0f}</text>')
        else:
            out.append(f'<text x="{left + 4}" y="{y + 15}" fill="#888">not measured</text>')
    base = 30 + row * len(bars)
    for r, pts in tiers:
        x = left + width * r / top
        out.append(f'<line x1="{x:.1f}" y1="26" x2="{x:.1f}" y2="{base}" stroke="#999" stroke-dasharray="4 3"/>')
        out.append(f'<text x="{x:.1f}" y="{base + 12}" text-anchor="middle" fill="#666" font-size="10">{pts:g}</text>')
    out.append(f'<line x1="{left}" y1="{base}" x2="{left + width}" y2="{base}" stroke="#333"/>')
    out.append(f'<text x="{left + width / 2}" y="{base + 26}" text-anchor="middle">{html.escape(metric)} '
               f'(dashed: performance tiers, with their points)</text>')
    out.append("</svg>")
    return "\n".join(out)


def _plots(rec: dict, task, ref: Optional[dict], gpu_name: str) -> list:
    """One plot per graded case: the student's rate, the reference's and the library's on this GPU."""
    plots = []
    mine = {p["case_id"]: p for p in rec.get("performance", [])}
    theirs = {p["case_id"]: p for p in (ref or {}).get("performance", [])} if ref else {}
    for g in task.graded:
        p, r = mine.get(g.case.id), theirs.get(g.case.id)
        base_name = (p or r or {}).get("baseline_name") or task.data["performance"].get("baseline", "library")
        base = (p or {}).get("baseline_rate") or (r or {}).get("baseline_rate")
        th = (p or r or {}).get("thresholds") or {}
        tiers = list(zip(th.get("rates", []), th.get("points", [])))
        bars = [("this submission", p["rate"] if p else None, "#1f77b4"),
                ("reference solution", r["rate"] if r else None, "#2ca02c"),
                (base_name[:26], base, "#ff7f0e")]
        plots.append(rate_plot(f"{task.name}, {describe(g.case.params)}, on {gpu_name}", task.metric, bars, tiers))
    return plots


def student_report(student: str, info: dict, recs: list, task_of: dict, refs: dict, gpu: GpuInfo) -> tuple:
    """(Markdown, HTML) of one student's grading."""
    name = info.get("name") or student
    total = sum(r.get("score", 0) for r in recs)
    possible = sum(task_of[a].max_score for a in task_of)
    md = [f"# {name} ({student})", "", f"Entry: `{info.get('source', '')}` ({info.get('layout', '')}); "
          f"GPU: {gpu.name}; total {total:g} / {possible:g}.", ""]
    body = [f"<h1>{html.escape(name)} ({html.escape(student)})</h1>",
            f"<p>Entry: <code>{html.escape(info.get('source', ''))}</code> ({html.escape(info.get('layout', ''))}); "
            f"GPU: {html.escape(gpu.name)}; total <b>{total:g} / {possible:g}</b>.</p>"]
    if info.get("problem"):
        md += [f"**{info['problem']}**", ""]
        body.append(f"<p><b>{html.escape(info['problem'])}</b></p>")
    if info.get("notes"):
        md += ["Notes:", *[f"- {n}" for n in info["notes"]], ""]
        body.append("<ul>" + "".join(f"<li>{html.escape(n)}</li>" for n in info["notes"]) + "</ul>")
    for rec in recs:
        a = rec["assignment"]
        task = task_of[a]
        hidden = set(rec.get("batch", {}).get("hidden_cases", []))
        verdict = rec.get("verdict")
        head = f"{a}: {verdict}, {rec.get('score', 0):g} / {task.max_score:g}"
        md += [f"## {head}", "", f"File: `{rec.get('batch', {}).get('file', '')}`", ""]
        body += [f"<h2>{html.escape(head)}</h2>",
                 f"<p>File: <code>{html.escape(rec.get('batch', {}).get('file', ''))}</code></p>"]
        if rec.get("message"):
            md += [rec["message"], ""]
            body.append(f"<p>{html.escape(rec['message'])}</p>")
        if verdict in ("build_error", "forbidden_call") and rec.get("build_log"):
            log = rec["build_log"][:3000]
            md += ["```", log, "```", ""]
            body.append(f"<pre>{html.escape(log)}</pre>")
        if rec.get("cases"):
            md += ["| case | size | result | rel. error | note |", "| --- | --- | --- | --- | --- |"]
            body.append("<table><tr><th>case</th><th>size</th><th>result</th><th>rel. error</th><th>note</th></tr>")
            for c in rec["cases"]:
                size = "(hidden)" if c["id"] in hidden else describe(c.get("params", {}))
                rel = c.get("rel_error")
                rel = f"{rel:.1e}" if isinstance(rel, (int, float)) and rel != float("inf") else "-"
                note = "" if c["verdict"] == "correct" else c.get("message", "")
                md.append(f"| {c['id']} | {size} | {c['verdict']} | {rel} | {note.replace('|', '/')} |")
                body.append("<tr>" + "".join(f"<td>{html.escape(str(x))}</td>"
                                             for x in (c["id"], size, c["verdict"], rel, note)) + "</tr>")
            md.append("")
            body.append("</table>")
        if verdict != gradescope.NOT_GRADED:
            for p in rec.get("performance", []):
                line = (f"Timed at {describe(p.get('params', {}))}: {p['rate']:,.1f} {p['metric']}, median "
                        f"{p.get('median_ms', 0):.3f} ms over {len(p['timing']['times_ms'])} runs")
                if p.get("baseline_rate"):
                    line += f"; {p.get('baseline_name')}: {p['baseline_rate']:,.1f} ({p['rate'] / p['baseline_rate']:.2f}x)"
                md += [line, ""]
                body.append(f"<p>{html.escape(line)}</p>")
            for svg in _plots(rec, task, refs.get(a), gpu.name):
                md += [svg, ""]
                body.append(f"<div>{svg}</div>")
    page = ("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>" + html.escape(f"{name}: grading") +
            "</title><style>body{font-family:sans-serif;max-width:900px;margin:2em auto}"
            "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 6px;text-align:left}"
            "pre{background:#f6f6f6;padding:8px;overflow-x:auto}</style></head><body>\n" + "\n".join(body) +
            "\n</body></html>\n")
    return "\n".join(md) + "\n", page
