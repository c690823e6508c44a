"""What a batch writes, each file as soon as its submission is graded and whole or not at all: the
records, the per-student reports and Gradescope files, the gradebook, the summary."""
from __future__ import annotations

import csv
import io
import json
import os
from typing import Optional

from .. import gradescope
from ..report import atomic_write, md_fence, one_line, printable, write_record
from . import classview
from .progress import fmt_s
from .reports import student_report
from .state import now, plain

STAGES = ("build", "correctness", "sanitize", "performance")


class Outputs:
    """The output files of a Batch (self.out, self.tasks, self.state, self.gpu, self.isolation, ...)."""

    def _write_record(self, job) -> tuple:
        """The record of a finished job, and what was graded, written; returns (record, its path)."""
        e, a = job.entry, job.assignment
        task = self.tasks[a]
        rec_path = self.out / "records" / e.student / f"{a}.json"
        if job.error:
            rec = gradescope.not_graded(a, job.error)
        else:
            rec = plain(job.result.to_json())
        rec["batch"] = {
            "student": e.student, "name": e.name, "members": [vars(m) for m in e.members], "entry": e.source,
            "file": e.shown.get(a, ""), "sha256": job.digest, "graded_at": now(), "seconds": job.seconds,
            "hidden_cases": [c.id for c in task.cases if getattr(c, "hidden", False)],
            "timed_runs": [g.runs for g in task.graded],
        }
        if self.opts.burst_gap_ms is not None:
            rec["batch"]["burst_gap_ms"] = self.opts.burst_gap_ms
        if job.checked_alone:
            rec["batch"]["checked_alone"] = ("its checks ended in a fault or a timeout while another submission's ran "
                                             "on the same GPU, and were run again with the GPU to itself: this "
                                             "verdict is from then")
        rec["isolation"] = self.isolation
        try:  # what was graded, kept: an archive's files are gone once the batch ends
            atomic_write(self.out / "sources" / e.student / f"{a}.cu", job.src.read_text(errors="replace"))
        except OSError:
            pass
        write_record(rec, rec_path)
        return rec, rec_path

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
        md, page, images = student_report(student, info, recs, self.tasks, refs, self.gpu)
        for file, svg in images.items():
            atomic_write(self.out / "reports" / file, svg)
        atomic_write(self.out / "reports" / f"{student}.md", printable(md))
        atomic_write(self.out / "reports" / f"{student}.html", printable(page))
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
            maxima = {a: t.max_score for a, t in self.tasks.items()}
            atomic_write(self.out / "gradebook-canvas.csv", canvas_csv(self.state, maxima))
            atomic_write(self.out / "gradebook-moodle.csv", moodle_csv(self.state, list(self.tasks)))

    def _summary(self, entries: list, wall: float) -> str:
        """The batch's summary, for the terminal and summary.md: a row per submission, each one line
        whatever the student named (report.one_line), so that no row can be forged by a file name."""
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
        lines += [f"{one_line(s):<24} {one_line(a):<10} {one_line(sc):<10} {one_line(v)}" for s, a, v, sc, _ in rows]
        lines += ["", f"{'stage':<12} {'submissions':>11} {'total s':>9} {'mean s':>8} {'max s':>8}"]
        stats = {}
        for s in STAGES:
            v = stage_tot[s]
            if v:
                stats[s] = {"count": len(v), "total_s": sum(v), "mean_s": sum(v) / len(v), "max_s": max(v)}
                lines.append(f"{s:<12} {len(v):>11} {sum(v):>9.1f} {sum(v) / len(v):>8.2f} {max(v):>8.2f}")
        lines.append(f"wall time of this run: {fmt_s(wall)} ({wall:.1f} s), {self.done} graded in it; builds in parallel on {self.opts.jobs or os.cpu_count()} "
                     f"workers; on {len(self.gpus)} GPU{'s' if len(self.gpus) > 1 else ''}, up to {self.gpus.checks} checks "
                     f"at once per GPU and one timing")
        lines.append(f"outputs: {self.out}")
        summary = {"wall_s": wall, "graded_this_run": self.done, "stages": stats, "gpu": self.gpu.name,
                   "isolation": self.isolation,
                   "rows": [{"student": s, "assignment": a, "verdict": v, "score": sc, "file": f}
                            for s, a, v, sc, f in rows]}
        gradescope.write_json(summary, self.out / "summary.json")
        atomic_write(self.out / "summary.md", md_fence(printable("\n".join(lines).strip())) + "\n")
        try:
            lines.append(f"the class per assignment (no names): {classview.write(self.out, self.tasks, self.gpu)}")
        except (OSError, ValueError, KeyError) as e:  # a record that cannot be read: the grades stand
            lines.append(f"the class view could not be drawn: {one_line(e)}")
        return "\n".join(lines)


FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
"""How a cell a spreadsheet reads as a formula starts. A class download carries names students set
themselves (Moodle's profile, Gradescope's account), and a gradebook is opened in a spreadsheet."""


class _Writer:
    """csv.writer whose text cells are never formulas: one that starts as one gets a leading
    apostrophe, which a spreadsheet shows as text (scores, never negative, start with a digit); and
    control characters are written out (report.printable)."""

    def __init__(self, buf: io.StringIO):
        self._w = csv.writer(buf, lineterminator="\n")

    def writerow(self, row) -> None:
        self._w.writerow([printable("'" + c if c.startswith(FORMULA_STARTS) else c) if isinstance(c, str) else c
                          for c in row])


def gradebook_csv(state: dict, assignments: list) -> str:
    """student, name, one column per assignment, total, notes: one row per student (each member of
    a group submission). An empty cell: nothing graded for that assignment (the notes say why)."""
    buf = io.StringIO()
    w = _Writer(buf)
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




def _rows(state: dict, assignments: list):
    """(member, entry info, {assignment: score or None}) per student (each member of a group)."""
    for student in sorted(state["entries"], key=str.lower):
        info = state["entries"][student]
        scores = {a: state["done"][f"{student}/{a}"]["score"] if f"{student}/{a}" in state["done"] else None
                  for a in assignments}
        for m in info.get("members") or [{"id": student, "name": info.get("name", "")}]:
            yield m, info, scores


def _cell(score) -> str:
    return "" if score is None else f"{round(score, 2):g}"


def canvas_csv(state: dict, maxima: dict) -> str:
    """Canvas's gradebook import layout: Student, ID, SIS User ID, SIS Login ID, Section, then a column
    per assignment, and a "Points Possible" row. Canvas matches a row by ID (its user id: known where the
    class came from a Canvas bulk download), SIS User ID or SIS Login ID (an e-mail address); a column
    whose name is not an existing assignment's becomes a new one."""
    buf = io.StringIO()
    w = _Writer(buf)
    w.writerow(["Student", "ID", "SIS User ID", "SIS Login ID", "Section", *maxima])
    w.writerow(["    Points Possible", "", "", "", "", *(f"{m:g}" for m in maxima.values())])
    for m, info, scores in _rows(state, list(maxima)):
        ident = m.get("id") or ""
        canvas_id = ident if info.get("layout") == "canvas" else ""
        login = m.get("email") or (ident if "@" in ident else "")
        sis = ident if not canvas_id and ident != login else ""
        w.writerow([m.get("name") or info.get("name", ""), canvas_id, sis, login, "",
                    *(_cell(scores[a]) for a in maxima)])
    return buf.getvalue()


def moodle_csv(state: dict, assignments: list) -> str:
    """For Moodle's "Import grades: CSV file": one column to map students by (Identifier: Moodle's
    participant id for a Moodle download, else the id the class gave; map it to the user field that
    holds it), their e-mail address where known, and a column per assignment to map to a grade item."""
    buf = io.StringIO()
    w = _Writer(buf)
    w.writerow(["Identifier", "Email address", "Full name", *assignments])
    for m, info, scores in _rows(state, assignments):
        w.writerow([m.get("id") or "", m.get("email") or "", m.get("name") or info.get("name", ""),
                    *(_cell(scores[a]) for a in assignments)])
    return buf.getvalue()
