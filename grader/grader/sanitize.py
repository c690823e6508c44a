"""compute-sanitizer, on a small case, for the tasks that ask for it (reduce): the runner alone, one
call per case, under racecheck and memcheck. Nothing of this run is timed or compared; its findings,
and how it ended, are the verdict."""
from __future__ import annotations

import re
from pathlib import Path

from . import jail, protocol, sandbox
from .results import GradeResult, Verdict
from .tasks import Task



def sanitize(task: Task, work: Path, result: GradeResult, gpus=None) -> None:
    """Runs the runner alone (its own arrays, one call per case) under each tool; a race is a verdict
    of its own even when the output was right, a memory error is a runtime error, and so is a run
    that does not end cleanly (a submission could kill the tool to hide what it found). Where
    compute-sanitizer is missing, says so. Nothing of this run is timed or compared."""
    case, tools = task.sanitize
    exe = jail.sanitizer_executable()
    if not exe:
        result.sanitizer_note = f"{', '.join(tools)} not run: compute-sanitizer is not on PATH"
        return
    plan = protocol.write_alone_plan(work / "sanitize.plan", case, salt=2)
    for tool in tools:
        log = work / f"sanitize-{tool}.log"
        limit = task.timeouts.get("sanitize", 600)
        run = sandbox.run([exe, "--tool", tool, "--error-exitcode", str(_SANITIZER_FOUND), "--print-limit", "10",
                           "--log-file", str(log), str(work / "runner"), "--alone", str(plan)],
                          work, work / f"sanitize-{tool}.out", timeout=limit, view="sanitize", read_only=(work / "runner",),
                          gpus=gpus)
        what = f"{tool} ({case.describe()})"
        if run.timed_out:
            result.verdict, result.message = Verdict.TIMEOUT, f"under compute-sanitizer {what}: did not finish within {limit} s"
            return
        text = sandbox.tail(log, 20000)
        if run.returncode not in (0, _SANITIZER_FOUND):
            why = run.stopped_for or (f"killed by signal {-run.returncode}" if run.returncode < 0 else f"exit {run.returncode}")
            result.verdict, result.message = (Verdict.RUNTIME_ERROR,
                                              f"under compute-sanitizer {what}, the program did not end cleanly ({why})")
            return
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
