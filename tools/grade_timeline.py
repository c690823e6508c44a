"""Where a grading's time goes: grades submissions and prints, for every judged session, its wall
time and when the judge's records arrived (seconds from the judge's start).

    PYTHONPATH=grader python3 tools/grade_timeline.py trmm reference/trmm/kernel.cu [ASSIGNMENT FILE ...]
"""
import sys
import time
from pathlib import Path

from grader import gpu, judged, tasks
from grader.grade import grade

SHOWN = ("ready", "start", "done", "timed", "checked", "baseline", "overhead")

sessions = []
_run = judged.run


def _timed_run(*args, **kwargs):
    s = _run(*args, **kwargs)
    sessions.append((args[4], s))
    return s


judged.run = _timed_run


def main(argv: list) -> None:
    info = gpu.detect()
    for name, file in zip(argv[::2], argv[1::2]):
        sessions.clear()
        t0 = time.monotonic()
        r = grade(tasks.load(name), Path(file), info)
        print(f"\n== {name} {file}: {r.verdict.value} {r.score:.0f}/100 in {time.monotonic() - t0:.1f} s; stages "
              + ", ".join(f"{k} {v:.2f}" for k, v in r.stage_seconds.items()))
        for label, s in sessions:
            marks = [f"{rec['event']}{'(' + rec['case'] + ')' if rec.get('case') else ''}@{t:.2f}"
                     for rec, t in zip(s.records, s.arrived) if rec.get("event") in SHOWN]
            print(f"  {label}: {s.seconds:.2f} s: " + " ".join(marks))


if __name__ == "__main__":
    main(sys.argv[1:])
