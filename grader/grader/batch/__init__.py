"""The batch verb: a whole class graded at once.

  python -m grader batch DIR [--out DIR] [--jobs N] [--regrade STUDENT ...] [--regrade-all]
                             [--assignments a b ...] [--timed-runs N] [--no-reference] [--gpus 0,2]
                             [--similarity] [--slurm ... | --status | --shard I/N]

DIR holds one entry per student (see submissions.py for the layouts and how files are matched to
assignments). Builds run in parallel on the CPU cores; the checks (correctness, races) of up to
--checks-per-gpu submissions share a GPU, and a timing has its GPU to itself (gpus.py), so that
nothing else runs while a submission is timed; on a cluster, as a Slurm job array (slurm.py).
Hidden cases are included. Each submission is graded in its own work folder, its programs in the
sandbox's jail.

Under --out (default grades/batch):
  gradebook.csv                  one row per student: a column per assignment, the total, notes
  gradebook-canvas.csv, gradebook-moodle.csv   the same scores in the layouts Canvas and Moodle import
  records/<student>/<a>.json     the full record of each grading (GradeResult, plus a "batch" part)
  reports/<student>.md, .html    per student: verdicts, cases, and their rate against the
                                 reference and the library on this GPU (an SVG plot)
  gradescope/<student>/results.json
  reference/<a>.json             the reference solution graded once on this GPU (for the plots)
  sources/<student>/<a>.cu       the file graded, as it was (archives' files included)
  state.json                     what is graded: (student, assignment, file hash); a batch run again
                                 skips those unless --regrade names the student or --regrade-all
  summary.md, summary.json       every entry's verdicts, what was not gradeable, the stage times
  class/README.md and pictures   per assignment, with no names: scores and rates across the class,
                                 tiers reached, the class on the roofline (with --profile)
  similarity/<a>.html            with --similarity: pairs of submissions that share code, with each
                                 other, the reference or the lecture's examples (similarity.py)
Everything is written as each submission finishes, each file whole or not at all.

One module per job: scheduling.py (the to-do list, the pools that build in parallel, check side by
side and time alone, the jail), stages.py (one submission's build, checks and timing), gpus.py
(which GPUs, handed out), state.py (state.json), outputs.py (records, gradebook, summary),
reports.py (per-student reports), progress.py (the progress line), slurm.py (the cluster).
"""
from __future__ import annotations

import os
import signal
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from .. import gpu as gpu_mod, jail, similarity, tasks
from ..limits import Limits
from ..report import atomic_write  # noqa: F401
from . import gpus as gpus_mod
from .outputs import gradebook_csv  # noqa: F401

MAX_BURST_GAP_MS = 10000
"""The longest --burst-gap-ms: 10 s between bursts, 40 s of pauses per timed case."""


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
    burst_gap_ms: Optional[float] = None
    """Milliseconds between the bursts of timed runs (None: the judge's 400). Shorter grades a class
    faster, with less of the GPU's drift averaged out; the kit's own tests use it."""
    reference: bool = True
    """Grade reference/<a>/kernel.cu once on this GPU, for the plots (kept in out/reference/)."""
    isolation: bool = True
    """Run student code in the jail (jail.py); off only to debug the kit."""
    memory_bytes: int = Limits.memory_bytes
    """Host memory of all of one submission's processes together."""
    disk_bytes: int = Limits.disk_bytes
    """Disk space of one submission's work folder (what its programs write there, measured as they run)."""
    tty: Optional[bool] = None
    """Progress updated in place (default: when stderr is a terminal)."""
    shard: Optional[tuple] = None
    """(i, n): grade only the i-th of n shares of the class (1-based), as one task of a Slurm array."""
    gpus: Optional[list] = None
    """The GPUs to grade on, checks side by side, one timing each at once (None: every GPU of GPU 0's model)."""
    mixed_gpus: bool = False
    """Allow GPUs of different models in one batch (each record names its own)."""
    gpu_infos: Optional[dict] = None
    """{index: GpuInfo} of the GPUs chosen (filled in by main)."""
    checks_per_gpu: int = 0
    """Submissions checked (correctness, races) at once on one GPU (0: one per 16 GiB of its memory,
    1 to 4); a timing always has it alone."""
    profile: bool = False
    """Profile each submission that was timed (Nsight Compute, in its jail); never part of the score."""


MIN_DISK_GIB, MAX_DISK_GIB = 0.25, 1024
"""The disk a submission's work folder may be given (--disk-gib): its runner, objects and logs take a few
MiB."""


def main(args) -> int:
    checks = getattr(args, "checks_per_gpu", None)
    if checks is not None and not 1 <= checks <= 64:
        raise tasks.TaskError(f"--checks-per-gpu {checks}: expected 1 (one submission at a time) to 64")
    gap = getattr(args, "burst_gap_ms", None)
    if gap is not None and not 0 <= gap <= MAX_BURST_GAP_MS:
        raise tasks.TaskError(f"--burst-gap-ms {gap:g}: expected 0 to {MAX_BURST_GAP_MS} (milliseconds between the "
                              f"bursts of timed runs; 400 when not given)")
    disk_gib = getattr(args, "disk_gib", None)
    if disk_gib is not None and not MIN_DISK_GIB <= disk_gib <= MAX_DISK_GIB:  # NaN too
        raise tasks.TaskError(f"--disk-gib {disk_gib:g}: expected {MIN_DISK_GIB:g} to {MAX_DISK_GIB:g} GiB for a "
                              f"submission's work folder (its runner, objects and logs take a few MiB)")
    disk = Limits.disk_bytes if disk_gib is None else int(disk_gib * (1 << 30))
    opts = Options(
        submissions=Path(args.submissions), out=Path(args.out or tasks.ROOT / "grades" / "batch"), jobs=args.jobs or 0,
        assignments=args.assignments or [], regrade=args.regrade or [], regrade_all=args.regrade_all,
        timed_runs=args.timed_runs or 0, reference=not args.no_reference, isolation=not args.no_isolation,
        memory_bytes=int(args.memory_gib * (1 << 30)), disk_bytes=disk, shard=parse_shard(getattr(args, "shard", None)),
        gpus=gpus_mod.parse(getattr(args, "gpus", None)),
        mixed_gpus=getattr(args, "mixed_gpus", False), profile=getattr(args, "profile", False),
        checks_per_gpu=checks or 0, burst_gap_ms=gap)
    if getattr(args, "slurm", False) or getattr(args, "status", False) or getattr(args, "merge", None):
        from . import slurm  # the cluster route: submit, see progress, merge
        return slurm.main(args, opts)
    if opts.memory_bytes < (1 << 30):
        raise tasks.TaskError(f"--memory-gib {args.memory_gib:g}: a submission needs at least 1 GiB of host memory")
    if not opts.submissions.is_dir():
        raise tasks.TaskError(f"{opts.submissions} is not a folder of submissions")
    if opts.isolation:
        jail.find(tasks.ROOT / "harness" / "include")  # no jail, no grading: say so before anything else
    similar = getattr(args, "similarity", False)
    if similar:
        similarity.require()  # likewise: a report that cannot be made is said before the grading
    opts.gpu_infos = gpus_mod.choose(opts.gpus, opts.mixed_gpus)
    info = next(iter(opts.gpu_infos.values()))
    global _interrupted
    _interrupted = False
    previous = signal.signal(signal.SIGTERM, _interrupt)  # a TERM stops it like Ctrl-C: what finished is kept
    try:
        rc = Batch(opts, info).run()
    finally:
        signal.signal(signal.SIGTERM, previous)
    if similar:
        similarity.report(opts.out, getattr(args, "threshold", None) or similarity.THRESHOLD)
    return rc


_interrupted = False


def _interrupt(signum, frame):
    """A TERM stops the batch as Ctrl-C does, once: Slurm sends TERM more than once at a time limit,
    and a second one must not cut short the saving of what finished."""
    global _interrupted
    if not _interrupted:
        _interrupted = True
        raise KeyboardInterrupt


def parse_shard(text: Optional[str]) -> Optional[tuple]:
    """"I/N" -> (I, N), 1 <= I <= N; TaskError otherwise."""
    if not text:
        return None
    try:
        i, n = (int(x) for x in text.split("/"))
    except ValueError:
        i = n = 0
    if not 1 <= i <= n:
        raise tasks.TaskError(f"--shard {text}: expected I/N with 1 <= I <= N (e.g. 3/10)")
    return i, n


def in_shard(students: list, shard: Optional[tuple]) -> set:
    """The students of share i of n: every n-th, by name, from the i-th."""
    if not shard:
        return set(students)
    i, n = shard
    return {s for k, s in enumerate(sorted(students, key=str.lower)) if k % n == i - 1}


from .scheduling import Batch  # noqa: E402  (it needs Options above)
