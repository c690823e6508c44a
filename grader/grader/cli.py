"""The grader's command line: a thin layer over one module per verb.

  python -m grader grade [ASSIGNMENT ...] [--submission FILE] [--json FILE]
  python -m grader arch            the local GPU's sm_XY (sm_90 without a GPU)
  python -m grader list            the registry
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import gpu, report, tasks
from .build import KitError
from .grade import Options, grade
from .results import Verdict

EXIT_NOT_FULL_MARKS = 1  # graded, but not everything correct
EXIT_CANNOT_GRADE = 2    # bad input, no GPU, or a kit problem


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="grader", description="The CUDA course kit's grader.")
    sub = ap.add_subparsers(dest="verb", required=True)
    g = sub.add_parser("grade", help="build, check, time and score submissions")
    g.add_argument("assignments", nargs="*", help="assignment names (default: all in the registry)")
    g.add_argument("--submission", type=Path, help="the kernel.cu to grade (default: student_template/<name>/kernel.cu)")
    g.add_argument("--json", type=Path, help="where to write the JSON record (default: grades/<name>.json)")
    g.add_argument("--seed", type=lambda s: int(s, 0), help="fixed secret, for reproducible inputs (debugging)")
    g.add_argument("--keep", action="store_true", help="keep the work folder (plans, dumps, logs)")
    sub.add_parser("arch", help="print the local GPU's architecture (sm_90 without a GPU)")
    sub.add_parser("list", help="list the assignments")
    args = ap.parse_args(argv)

    if args.verb == "arch":
        print(gpu.arch_or_default())
        return 0
    try:
        if args.verb == "list":
            for name in tasks.registry():
                print(f"{name:<10} {tasks.load(name).title}")
            return 0
        return _grade(args)
    except (tasks.TaskError, KitError, gpu.NoGpu) as e:
        print(f"grader: {e}", file=sys.stderr)
        return EXIT_CANNOT_GRADE


def _grade(args) -> int:
    names = args.assignments or tasks.registry()
    if args.submission and len(names) != 1:
        raise tasks.TaskError("--submission grades one file: name one assignment (e.g. A=trmm)")
    loaded = [tasks.load(n) for n in names]
    if args.submission:
        if not args.submission.is_file():
            raise tasks.TaskError(f"submission {args.submission} is not a file")
    info = gpu.detect()
    worst = 0
    for task in loaded:
        src = args.submission or tasks.ROOT / "student_template" / task.name / "kernel.cu"
        result = grade(task, src.resolve(), info, Options(secret=args.seed, keep=args.keep))
        print(report.terminal(result), flush=True)
        out = args.json or tasks.ROOT / "grades" / f"{task.name}.json"
        report.write_json(result, out)
        print(f"   Record: {out}\n", flush=True)
        if result.verdict != Verdict.CORRECT or result.score < result.max_score:
            worst = EXIT_NOT_FULL_MARKS
    return worst
