"""The grader's command line: a thin layer over one module per verb.

  python -m grader grade [ASSIGNMENT ...] [--submission FILE] [--json FILE]
  python -m grader arch            the local GPU's sm_XY (sm_90 without a GPU)
  python -m grader list            the registry
  python -m grader batch DIR [--out DIR] [--jobs N] [--regrade STUDENT ...]   a whole class (TAs)
  python -m grader gradescope [--root /autograder]                            inside Gradescope
  python -m grader handouts [--out DIR]    every handout (Markdown, HTML, PDF) and the index
  python -m grader dist [--out FILE]       the student kit, a .tar.gz
  python -m grader bench [ASSIGNMENT ...] [--out DIR] [--repeat N]   the references, baselines and limits on this GPU
  python -m grader calibrate [ASSIGNMENT ...] [--estimate] [--write] per-GPU threshold profiles
"""
from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

from . import gpu, report, tasks
from .build import KitError
from .jail import JailError
from .grade import Options, grade
from .results import Verdict

EXIT_NOT_FULL_MARKS = 1  # graded, but not everything correct
EXIT_CANNOT_GRADE = 2    # bad input, no GPU, or a kit problem


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    if args.verb == "arch":
        print(gpu.arch_or_default())
        return 0
    try:
        if args.verb == "list":
            for name in tasks.registry():
                print(f"{name:<10} {tasks.load(name).title}")
            return 0
        if args.verb in ("batch", "gradescope", "bench", "calibrate", "similarity"):
            return importlib.import_module(f".{args.verb}", __package__).main(args)
        if args.verb in ("handouts", "dist"):
            # Instructor-side modules (Jinja2, Chromium), imported only for their verb.
            return importlib.import_module(f".{args.verb}", __package__).main(args)
        return _grade(args)
    except JailError as e:
        print(f"grader: no jail for student code, so nothing was run: {e}", file=sys.stderr)
        return EXIT_CANNOT_GRADE
    except (tasks.TaskError, KitError, gpu.NoGpu) as e:
        print(f"grader: {e}", file=sys.stderr)
        return EXIT_CANNOT_GRADE


def parser() -> argparse.ArgumentParser:
    """The command line: one sub-command per verb, each declared by its own function below."""
    ap = argparse.ArgumentParser(prog="grader", description="The CUDA course kit's grader.")
    sub = ap.add_subparsers(dest="verb", required=True)
    _grade_verb(sub)
    _handouts_verb(sub)
    _dist_verb(sub)
    _batch_verb(sub)
    _similarity_verb(sub)
    _gradescope_verb(sub)
    _bench_verb(sub)
    _calibrate_verb(sub)
    sub.add_parser("arch", help="print the local GPU's architecture (sm_90 without a GPU)")
    sub.add_parser("list", help="list the assignments")
    return ap


def _grade_verb(sub) -> None:
    g = sub.add_parser("grade", help="build, check, time and score submissions")
    g.add_argument("assignments", nargs="*", help="assignment names (default: all in the registry)")
    g.add_argument("--submission", type=Path, help="the kernel.cu to grade (default: student_template/<name>/kernel.cu)")
    g.add_argument("--json", type=Path, help="where to write the JSON record (default: grades/<name>.json)")
    g.add_argument("--seed", type=lambda s: int(s, 0), help="fixed secret, for reproducible inputs (debugging)")
    g.add_argument("--keep", action="store_true", help="keep the work folder (plans, dumps, logs)")
    g.add_argument("--hidden", action="store_true", help="include the hidden cases (TA grading)")
    g.add_argument("--profile", action="store_true", help="after grading, profile one call with Nsight Compute: "
                                                          "numbers per kernel, hints, a roofline (not scored)")


def _handouts_verb(sub) -> None:
    h = sub.add_parser("handouts", help="render every handout (Markdown, HTML, PDF) and the index")
    h.add_argument("--out", type=Path, help="output folder (default: build/handouts)")
    h.add_argument("--no-pdf", action="store_true", help="Markdown and HTML only (no Chromium needed)")
    h.add_argument("--templates", type=Path, help="the templates' folder (default: handouts/)")


def _dist_verb(sub) -> None:
    d = sub.add_parser("dist", help="build the student kit (no references, no hidden cases)")
    d.add_argument("--out", type=Path, help="the tarball (default: build/dist/cuda-kit-student.tar.gz)")
    d.add_argument("--no-pdf", action="store_true", help="handouts in Markdown and HTML only (no Chromium needed)")


def _batch_verb(sub) -> None:
    b = sub.add_parser("batch", help="grade a whole class: every student entry in a folder (TAs)")
    b.add_argument("submissions", type=Path, help="folder with one entry per student (folder, .zip, .tar.gz, "
                                                   "or a Gradescope/LMS export)")
    b.add_argument("--out", type=Path, help="output folder (default: grades/batch)")
    b.add_argument("--jobs", type=int, help="parallel builds (default: one per CPU core)")
    b.add_argument("--assignments", nargs="+", metavar="A", help="grade only these assignments")
    b.add_argument("--regrade", nargs="+", metavar="STUDENT", help="grade these students again")
    b.add_argument("--regrade-all", action="store_true", help="grade everything again")
    b.add_argument("--timed-runs", type=int, help="timed runs per graded case (at least 10) instead of the task's")
    b.add_argument("--burst-gap-ms", type=float, metavar="MS", help="milliseconds between the five bursts of timed "
                   "runs (default 400: the GPU's drift averaged over 1.6 s per timed case); shorter grades faster, "
                   "with less steady rates (a dry run; the kit's own tests)")
    b.add_argument("--no-reference", action="store_true", help="do not time the reference solution for the plots")
    b.add_argument("--no-isolation", action="store_true", help="run student code WITHOUT the jail, as you, with your "
                                                                "files and network (debugging the kit only)")
    b.add_argument("--memory-gib", type=float, default=16, help="host memory of all of one submission's processes, "
                                                                 "GiB (default 16)")
    b.add_argument("--disk-gib", type=float, help="disk space of one submission's work folder, GiB (default 8); "
                                                  "the disk also keeps 1 GiB free")
    b.add_argument("--gpus", metavar="LIST", help="the GPUs to grade on, one timing each at once, as nvidia-smi "
                                                  "numbers them, e.g. 0,2 (default: every GPU of GPU 0's model)")
    b.add_argument("--checks-per-gpu", type=int, metavar="N", help="submissions checked (correctness, races) at once "
                   "on one GPU (default: one per 16 GiB of its memory, at most 4; 1: one at a time; a timing always has "
                   "its GPU alone)")
    b.add_argument("--mixed-gpus", action="store_true", help="allow GPUs of different models in one batch")
    b.add_argument("--shard", metavar="I/N", help="grade only the I-th of N shares of the class (a Slurm array task)")
    b.add_argument("--slurm", action="store_true", help="submit the class to Slurm as a job array (then --status)")
    b.add_argument("--status", action="store_true", help="graded / pending / failed per shard of a --slurm class")
    b.add_argument("--merge", type=int, metavar="N", help="merge the N shards' outputs into OUT (the merge job)")
    b.add_argument("--prepare", action="store_true", help="build the harness and grade the references (the "
                                                           "preparation job)")
    b.add_argument("--array-size", type=int, help="with --slurm: shards of the class, one array task each "
                                                  "(default: 10, or one per student for fewer)")
    b.add_argument("--partition", help="with --slurm: the partition")
    b.add_argument("--gpu-type", help="with --slurm: the GPU type of --gres=gpu:TYPE:1 (e.g. h100)")
    b.add_argument("--time-limit", help="with --slurm: each job's time limit (sbatch --time, e.g. 2:00:00)")
    b.add_argument("--sbatch-flag", action="append", metavar="FLAG", help="with --slurm: a flag passed to sbatch "
                                                                        "as it is (repeat for several)")
    b.add_argument("--profile", action="store_true", help="profile each graded submission with Nsight Compute "
                                                          "(in its jail; not scored)")
    b.add_argument("--similarity", action="store_true", help="after grading, report the submissions that share code "
                                                              "(needs copydetect)")
    b.add_argument("--threshold", type=float, help="with --similarity: the score reported from (default 0.6)")


def _similarity_verb(sub) -> None:
    si = sub.add_parser("similarity", help="on a batch's output: the submissions that share code, with each other, "
                                           "the reference or the lecture's examples (TAs; needs copydetect)")
    si.add_argument("out", type=Path, help="the batch's output folder")
    si.add_argument("--threshold", type=float, default=0.6, help="the score reported from (default 0.6)")


def _gradescope_verb(sub) -> None:
    gs = sub.add_parser("gradescope", help="grade inside Gradescope's autograder (source/, submission/, results/)")
    gs.add_argument("--root", type=Path, default=Path("/autograder"), help="the autograder folder (default /autograder)")
    gs.add_argument("--assignments", nargs="+", metavar="A", help="the assignments this autograder grades "
                                                                  "(default: whichever files the submission holds)")
    gs.add_argument("--no-isolation", action="store_true", help="run student code WITHOUT the jail (debugging only)")


def _bench_verb(sub) -> None:
    be = sub.add_parser("bench", help="grade every hidden reference on this GPU: rates next to the library "
                                      "baselines and the physical limit, stage times, spread over repeats")
    be.add_argument("assignments", nargs="*", help="assignment names (default: all in the registry)")
    be.add_argument("--out", type=Path, help="output folder (default: bench/<gpu>/)")
    be.add_argument("--repeat", type=int, default=1, help="grade each reference N times and report the spread "
                                                          "of its rate (default 1)")


def _calibrate_verb(sub) -> None:
    ca = sub.add_parser("calibrate", help="measure the baselines on this GPU and make its threshold profile, "
                                          "or (--estimate) estimate the profiles of the other GPUs")
    ca.add_argument("assignments", nargs="*", help="assignment names (default: all in the registry)")
    ca.add_argument("--write", action="store_true", help="store the profiles in the task files "
                                                         "(default: only print them)")
    ca.add_argument("--estimate", action="store_true", help="no measuring (no GPU needed): derive the profiles of "
                                                            "the GPUs of gpus.json without a measured one from a "
                                                            "measured one by datasheet ratios")


def _grade(args) -> int:
    names = args.assignments or tasks.registry()
    if args.submission and len(names) != 1:
        raise tasks.TaskError("--submission grades one file: name one assignment (e.g. A=trmm)")
    loaded = [tasks.load(n, include_hidden=args.hidden) for n in names]
    if args.submission:
        if not args.submission.is_file():
            raise tasks.TaskError(f"submission {args.submission} is not a file")
    info = gpu.detect()
    worst = 0
    for task in loaded:
        src = args.submission or tasks.ROOT / "student_template" / task.name / "kernel.cu"
        result = grade(task, src.resolve(), info, Options(secret=args.seed, keep=args.keep, profile=args.profile))
        print(report.terminal(result), flush=True)
        out = args.json or tasks.ROOT / "grades" / f"{task.name}.json"
        report.write_json(result, out)
        print(f"   Record: {out}\n", flush=True)
        if result.verdict == Verdict.SKIPPED:
            continue  # says why; not a mark against the submission
        if result.verdict != Verdict.CORRECT or result.score < result.max_score:
            worst = EXIT_NOT_FULL_MARKS
    return worst
