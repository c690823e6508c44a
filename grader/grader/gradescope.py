"""Gradescope: results.json from grading records, and the `gradescope` verb that grades inside
Gradescope's autograder layout:

  /autograder/source/       the kit (this grader runs from there)
  /autograder/submission/   the student's files (kernel.cu for one or more assignments)
  /autograder/results/      results.json is written here

  python -m grader gradescope [--root /autograder] [--assignments trmm ...]

results.json follows Gradescope's autograder specification: a top-level score, execution_time
(seconds), output and tests; each test has name, score, max_score, status ("passed"/"failed"),
output and visibility. Every test is "visible": a hidden case shows only its opaque id (hidden-1)
and a verdict whose message gives no size away (grade.py conceals them), and a test that is not
visible would keep the student's total from them until the grades are published. A record is a GradeResult as JSON (GradeResult.to_json()),
or {"assignment", "verdict": "not_graded", "message"} for a submission that could not be graded.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from . import build, grade, jail, protocol, report, sandbox, submissions, tasks, workdir
from .limits import DiskLow, Limits
from . import gpu as gpu_mod
from .gpu import NoGpu
from .tasks import Task, describe

NOT_GRADED = "not_graded"
_LOG_CHARS = 3000


def _size(params: dict) -> str:
    return describe(params) if params else ""


def assignment_tests(rec: dict, task: Task, hidden: set = frozenset()) -> list:
    """Gradescope tests for one assignment's record: a build test where it did not build, else one
    per correctness case and one per timed case; their scores add up to the record's score."""
    a = task.name
    pts = task.points
    verdict = rec.get("verdict")
    message = rec.get("message", "")
    if verdict == NOT_GRADED:
        return [_test(f"{a}: grading", 0, task.max_score, "could not be graded: " + message)]
    if verdict == "skipped":  # this machine cannot grade it (e.g. too few GPUs)
        return [_test(f"{a}: grading", 0, task.max_score, "not graded: " + message)]
    if verdict in ("build_error", "forbidden_call") or not rec.get("cases"):
        log = (rec.get("build_log") or "")[:_LOG_CHARS]
        return [_test(f"{a}: build", 0, task.max_score, f"{verdict}: {message}" + (f"\n\n{log}" if log else ""))]
    tests = []
    scored = [c for c in task.cases if c.scored]
    share = pts["correctness"] / len(scored) if scored else 0.0
    by_id = {c.id: c for c in task.cases}
    withdrawn = rec.get("score", 0) + 1e-9 < rec.get("correctness_points", 0)
    for c in rec["cases"]:
        case = by_id.get(c["id"])
        is_hidden = c["id"] in hidden or bool(case and getattr(case, "hidden", False))
        max_score = share if (case is None or case.scored) else 0.0
        ok = c.get("verdict") == "correct"
        out = c.get("message", "") if not ok else ("correct" + (f", {c['message']}" if c.get("message") else ""))
        if ok and withdrawn:
            ok, out = False, f"correct here, but points withdrawn: {message}"
        name = f"{a}: case {c['id']}" + ("" if is_hidden else f" ({_size(c.get('params', {}))})")
        tests.append(_test(name, max_score if ok else 0.0, max_score, out, "visible", ok))
    per = pts["performance"] / len(task.graded) if task.graded else 0.0
    timed = {p["case_id"]: p for p in rec.get("performance", [])}
    for g in task.graded:
        p = timed.get(g.case.id)
        name = f"{a}: performance ({_size(g.case.params)})"
        if p is None or verdict != "correct":
            why = message if verdict != "correct" else "not timed"
            if p is not None:
                why = f"{p['rate']:,.1f} {p['metric']}: " + why
            tests.append(_test(name, 0.0, per, why))
            continue
        got = float(p.get("points", 0.0)) / len(task.graded)  # the task averages its graded cases' points
        line = f"{p['rate']:,.1f} {p['metric']}"
        if p.get("baseline_rate"):
            line += f" ({p['rate'] / p['baseline_rate']:.2f}x {p.get('baseline_name', 'the library')} on this GPU)"
        th = p.get("thresholds")
        if th:
            line += "; tiers: " + ", ".join(f"{r:,.0f} -> {q:g}" for r, q in zip(th["rates"], th["points"]))
        tests.append(_test(name, got, per, line, passed=got >= per - 1e-9))
    return tests


def _test(name: str, score: float, max_score: float, output: str, visibility: str = "visible",
          passed: bool = None) -> dict:
    if passed is None:
        passed = score >= max_score - 1e-9 and max_score > 0
    return {"name": name, "score": round(float(score), 6), "max_score": round(float(max_score), 6),
            "status": "passed" if passed else "failed", "output": output, "visibility": visibility}


def results_json(records: list, task_of: dict, missing: list = (), output: str = "",
                 execution_time: float = 0.0, hidden: dict = None) -> dict:
    """Gradescope's results.json for one student: `records` are their assignments' records,
    `task_of` maps assignment names to Tasks, `missing` names assignments with no submission."""
    hidden = hidden or {}
    tests, score = [], 0.0
    for rec in records:
        task = task_of[rec["assignment"]]
        tests += assignment_tests(rec, task, set(hidden.get(task.name, ())))
        score += float(rec.get("score", 0.0))
    for a in missing:
        tests.append(_test(f"{a}: submission", 0.0, task_of[a].max_score,
                           f"no file for {a} was found in the submission"))
    lines = [output] if output else []
    for rec in records:
        lines.append(f"{rec['assignment']}: {rec.get('verdict')} ({rec.get('score', 0):g} / "
                     f"{task_of[rec['assignment']].max_score:g})" + (f": {rec['message']}" if rec.get("message") else ""))
    return {
        "score": round(score, 4),
        "execution_time": int(round(execution_time)),
        "output": "\n".join(lines),
        "stdout_visibility": "hidden",
        "tests": tests,
        "leaderboard": leaderboard(records),
        "extra_data": {"verdicts": {r["assignment"]: r.get("verdict") for r in records}},
    }


def leaderboard(records: list) -> list:
    """Gradescope's leaderboard entries: each graded case's rate, for submissions correct and scored
    (a rate that is not a measurement, or of wrong output, is no entry)."""
    out = []
    for rec in records:
        if rec.get("verdict") != "correct":
            continue
        perf = rec.get("performance", [])
        for p in perf:
            label = f"{rec['assignment']} {p.get('metric', '')}" + (f" ({p.get('case_id')})" if len(perf) > 1 else "")
            out.append({"name": label.strip(), "value": round(float(p.get("rate", 0.0)), 1), "order": "desc"})
    return out


def write_json(data: dict, path: Path) -> None:
    """Written whole or not at all."""
    report.atomic_json(data, path)


def not_graded(assignment: str, message: str) -> dict:
    return {"assignment": assignment, "verdict": NOT_GRADED, "message": message, "score": 0.0}


# ---------------------------------------------------------------------------------------------
# The entry point inside Gradescope's autograder.

def main(args) -> int:
    start = time.monotonic()
    root = Path(args.root)
    sub, results = root / "submission", root / "results"
    out = results / "results.json"
    names = args.assignments or tasks.registry()
    task_of = {n: tasks.load(n, include_hidden=True) for n in names}
    entry_points = {n: t.entry_point for n, t in task_of.items()}
    work_root = workdir.new("kit-gradescope-")
    try:
        entry = submissions.Entry("submission", "submission", "gradescope")
        if sub.is_dir():
            submissions.fill(entry, sub, entry_points, work_root / "_staging")
        else:
            entry.problem = f"nothing gradeable: {sub} does not exist"
        who = _who(root)
        if entry.problem:
            write_json(results_json([], task_of, list(names), f"{who}{entry.problem}" +
                                    "".join(f"\n{n}" for n in entry.notes), time.monotonic() - start), out)
            print(entry.problem)
            return 0
        if not getattr(args, "no_isolation", False):
            try:  # no jail, no grading: nothing of the student's runs open
                jail.find(tasks.ROOT / "harness" / "include")
            except jail.JailError as e:
                return _refuse(f"this autograder has no jail for student code, so the submission was not run: {e}",
                               entry, task_of, names, start, out)
        try:
            gpu = gpu_mod.detect()
        except NoGpu as e:
            write_json(results_json([not_graded(a, str(e)) for a in entry.files], task_of,
                                    [n for n in names if n not in entry.files],
                                    "this autograder machine has no usable CUDA GPU; the submission was not graded",
                                    time.monotonic() - start), out)
            print(f"grader: {e}", file=sys.stderr)
            return 2
        isolation = {"jail": "OFF (--no-isolation): student code ran unjailed"}
        if not getattr(args, "no_isolation", False):
            build.build_harnesses([task_of[a] for a in entry.files], gpu.arch, work_root / "harness.log")
            try:
                isolation = sandbox.open_jail(work_root, tasks.ROOT / "harness" / "include",
                                              build.probe_path(gpu.arch), Limits(), hidden=(tasks.ROOT,)).describe()
            except jail.JailError as e:
                return _refuse(f"the jail for student code does not work here, so the submission was not run: {e}",
                               entry, task_of, names, start, out)
        records = []
        for a, src in sorted(entry.files.items()):
            task = task_of[a]
            work = work_root / a
            work.mkdir()
            result = grade.new_result(task, src, gpu, grade.Options())
            result.submission = entry.shown[a]
            try:
                build.build_harness(task, gpu.arch, work_root / f"harness-{a}.log")
                if grade.build_stage(task, src, gpu.arch, work, result):
                    grade.gpu_stages(task, work, gpu, grade.Options(), result)
                rec = json.loads(json.dumps(result.to_json(), default=str))
            except (build.KitError, NoGpu, OSError, DiskLow, jail.JailError) as e:
                rec = not_graded(a, str(e))
            rec["isolation"] = isolation
            records.append(rec)
            print(report.printable(f"{a}: {rec.get('verdict')} {rec.get('score', 0):g}: {rec.get('message', '')}"),
                  flush=True)
        hidden = {n: [c.id for c in t.cases if getattr(c, "hidden", False)] for n, t in task_of.items()}
        notes = "".join(f"\n{n}" for n in entry.notes)
        write_json(results_json(records, task_of, [n for n in names if n not in entry.files],
                                (who + notes).strip(), time.monotonic() - start, hidden), out)
        return 0
    finally:
        sandbox.confine(None)
        protocol.clear(work_root)


def _refuse(why: str, entry, task_of: dict, names: list, start: float, out: Path) -> int:
    """results.json saying why nothing was run, every assignment of the submission at 0; exit 2."""
    write_json(results_json([not_graded(a, why) for a in entry.files], task_of,
                            [n for n in names if n not in entry.files], why, time.monotonic() - start), out)
    print(f"grader: {why}", file=sys.stderr)
    return 2


def _who(root: Path) -> str:
    try:
        meta = json.loads((root / "submission_metadata.json").read_text())
        users = ", ".join(u.get("name", "") for u in meta.get("users", []) if u.get("name"))
        return f"Submitted by {users}.\n" if users else ""
    except (OSError, ValueError, AttributeError):
        return ""
