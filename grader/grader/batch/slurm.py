"""The cluster route: a class graded as a Slurm job array, on the cluster's shared filesystem.

  python3 -m grader batch DIR --slurm [--out OUT] [--array-size N] [--partition P] [--gpu-type T]
                                      [--time-limit T] [--sbatch-flag=FLAG ...]     (make batch ... SLURM=1)
  python3 -m grader batch DIR --status [--out OUT]      graded / pending / failed per shard (no slurmdbd needed)
  python3 -m grader batch DIR --merge N [--out OUT]     what the merge job runs

Three sbatch jobs, their scripts and logs under OUT/slurm/:
  prepare  builds the harness and grades the references once (OUT/reference/), on one GPU;
  array    task i of N, after prepare (afterok), grades every N-th student from the i-th
           (--shard i/N) on its own GPU into OUT/shards/i/: no student folder is copied;
  merge    after the array (afterany: with afterok, one failed task would leave it pending for ever)
           writes the gradebook, records, reports and Gradescope files of the whole class into OUT as a
           one-machine batch would, and lists the tasks and students that failed.
Running the same command again submits only the shards that still have students to grade (a task
resumes its shard from its state, as a batch does), with the same N. A task ended by scancel or its
time limit keeps what it finished.
"""
from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

from .. import gpu as gpu_mod, protocol, submissions, tasks
from ..report import atomic_write, md_fence, printable
from ..results import GpuInfo
from . import Options, in_shard


def main(args, opts: Options) -> int:
    if getattr(args, "prepare", False):
        return prepare(opts)
    if getattr(args, "merge", None):
        return merge(opts, int(args.merge))
    if getattr(args, "status", False):
        return status(opts)
    return submit(args, opts)


# ---------------------------------------------------------------------------------------------
# Submitting.

def grader_command() -> list:
    """How the jobs run the grader: KIT_GRADER_COMMAND (a shell command line) if set, else this Python
    with this kit's grader package."""
    cmd = os.environ.get("KIT_GRADER_COMMAND")
    if cmd:
        return shlex.split(cmd)
    return ["env", f"PYTHONPATH={tasks.ROOT / 'grader'}", sys.executable, "-m", "grader"]


def _students(opts: Options) -> list:
    names = opts.assignments or tasks.registry()
    eps = {n: tasks.load(n).entry_point for n in names}
    with tempfile.TemporaryDirectory(prefix="kit-slurm-") as staging:
        return sorted(e.student for e in submissions.discover(opts.submissions, eps, Path(staging)))


def _plan(out: Path, n: int, students: list) -> int:
    """The array size: the one chosen at the first submission, which the shards depend on."""
    path = out / "slurm" / "plan.json"
    try:
        old = json.loads(path.read_text())["array_size"]
        if n and n != old:
            print(f"batch: --array-size {n} ignored: this class was split in {old} shards at its first submission",
                  file=sys.stderr)
        return old
    except (OSError, ValueError, KeyError):
        pass
    n = max(1, min(n or 10, len(students) or 1))
    atomic_write(path, json.dumps({"array_size": n}) + "\n")
    return n


def shard_left(out: Path, i: int, n: int, students: list) -> list:
    """The students of shard i with a file not yet graded in its folder (one that could not be graded
    because the kit failed counts as not yet graded: it is tried again)."""
    try:
        state = json.loads((out / "shards" / str(i) / "state.json").read_text())
    except (OSError, ValueError):
        state = {}
    done = set(state.get("done", {})) | set(state.get("skipped", {}))

    def finished(s):
        entry = state.get("entries", {}).get(s)
        return entry is not None and all(f"{s}/{a}" in done for a in entry.get("files", {}))
    return sorted(s for s in in_shard(students, (i, n)) if not finished(s))


def _flags(args, opts: Options) -> list:
    """The batch options every job passes on."""
    f = []
    if opts.assignments:
        f += ["--assignments", *opts.assignments]
    if opts.timed_runs:
        f += ["--timed-runs", str(opts.timed_runs)]
    if opts.burst_gap_ms is not None:
        f += ["--burst-gap-ms", f"{opts.burst_gap_ms:g}"]
    if not opts.isolation:
        f.append("--no-isolation")
    f += ["--memory-gib", f"{opts.memory_bytes / 2**30:g}", "--disk-gib", f"{opts.disk_bytes / 2**30:g}"]
    if opts.checks_per_gpu:
        f += ["--checks-per-gpu", str(opts.checks_per_gpu)]
    if opts.jobs:
        f += ["--jobs", str(opts.jobs)]
    return f


_TASK_ID = "${SLURM_ARRAY_TASK_ID}"


def _word(c) -> str:
    """A shell word; the array task's id, where it appears, is left for the shell to expand."""
    parts = str(c).split(_TASK_ID)
    return f'"{_TASK_ID}"'.join(shlex.quote(p) if p else "" for p in parts)


def _script(path: Path, command: list) -> Path:
    atomic_write(path, "#!/bin/sh\n# Written by the course kit's batch --slurm.\nexec " +
                 " ".join(_word(c) for c in command) + "\n")
    path.chmod(0o755)
    return path


def _sbatch(args, name: str, out: Path, script: Path, extra: list) -> str:
    gres = f"gpu:{args.gpu_type}:1" if getattr(args, "gpu_type", None) else "gpu:1"
    cmd = ["sbatch", "--parsable", "--job-name", name, "--output", str(out / "slurm" / f"{name}-%A_%a.log"),
           f"--gres={gres}", *extra]
    if getattr(args, "partition", None):
        cmd += ["--partition", args.partition]
    if getattr(args, "time_limit", None):
        cmd += ["--time", args.time_limit]
    cmd += list(getattr(args, "sbatch_flag", None) or [])
    r = subprocess.run([*cmd, str(script)], capture_output=True, text=True)
    if r.returncode != 0:
        raise tasks.TaskError(f"sbatch refused the {name} job: {(r.stderr or r.stdout).strip()[:300]}")
    return r.stdout.strip().split(";")[0]


def submit(args, opts: Options) -> int:
    if not shutil.which("sbatch"):
        raise tasks.TaskError("--slurm needs Slurm's sbatch on PATH: run it on the cluster's login node")
    out = opts.out.resolve()
    students = _students(opts)
    n = _plan(out, getattr(args, "array_size", None) or 0, students)
    left = [i for i in range(1, n + 1) if shard_left(out, i, n, students)]
    if not left:
        print(f"batch: every student of the class is graded in {out}/shards; the merge job writes the outputs")
    grader = grader_command()
    sub = str(Path(opts.submissions).resolve())
    flags = _flags(args, opts)
    s = out / "slurm"
    # The harness is built once, by the preparation, before any task needs it (and the references
    # graded, where they are missing): the tasks never build it side by side on the shared filesystem.
    prep = _script(s / "prepare.sh", [*grader, "batch", sub, "--out", str(out), "--prepare", *flags,
                                      *([] if opts.reference else ["--no-reference"])])
    jobs = {"prepare": _sbatch(args, "kit-prepare", out, prep, [])}
    depend = [f"--dependency=afterok:{jobs['prepare']}"]
    if left:
        task = _script(s / "task.sh", [*grader, "batch", sub, "--out", f"{out / 'shards'}/{_TASK_ID}",
                                       "--shard", f"{_TASK_ID}/{n}", "--no-reference", *flags])
        jobs["array"] = _sbatch(args, "kit-shard", out, task, [f"--array={','.join(map(str, left))}", *depend])
    merge_after = [f"--dependency=afterany:{jobs['array']}"] if left else [f"--dependency=afterany:{jobs['prepare']}"]
    m = _script(s / "merge.sh", [*grader, "batch", sub, "--out", str(out), "--merge", str(n), *flags])
    jobs["merge"] = _sbatch(args, "kit-merge", out, m, merge_after)
    atomic_write(s / "jobs.json", json.dumps({"array_size": n, "shards": left, **jobs}) + "\n")
    print(f"batch: {len(students)} entries in {n} shards; submitted shards {', '.join(map(str, left)) or 'none'} "
          f"(array job {jobs.get('array', '-')}), merge job {jobs['merge']}")
    print(f"batch: progress: python3 -m grader batch {sub} --status --out {out}   (or make batch ... SLURM_STATUS=1)")
    return 0


def prepare(opts: Options) -> int:
    """The preparation job: the harness built and the references graded, once for the whole array."""
    from .scheduling import Batch
    from .. import build, workdir
    info = gpu_mod.detect()
    batch = Batch(opts, info)
    batch.out.mkdir(parents=True, exist_ok=True)
    work_root = workdir.new("kit-prepare-")
    try:
        build.build_harnesses(list(batch.tasks.values()), info.arch, work_root / "harness.log")
        if opts.reference:
            batch._references(list(batch.tasks), work_root)
    finally:
        protocol.clear(work_root)
    print(f"batch: prepared {', '.join(batch.tasks)} for {info.name} ({info.arch})")
    return 0


# ---------------------------------------------------------------------------------------------
# Progress, without slurmdbd: from the shards' own state files.

def status(opts: Options) -> int:
    out = opts.out.resolve()
    students = _students(opts)
    try:
        n = json.loads((out / "slurm" / "plan.json").read_text())["array_size"]
    except (OSError, ValueError, KeyError):
        raise tasks.TaskError(f"{out} holds no class submitted with --slurm") from None
    print(f"{'shard':>5} {'students':>8} {'graded':>6} {'failed':>6} {'pending':>7}")
    total = [0, 0, 0]
    for i in range(1, n + 1):
        mine = in_shard(students, (i, n))
        try:
            state = json.loads((out / "shards" / str(i) / "state.json").read_text())
        except (OSError, ValueError):
            state = {"done": {}, "errors": {}}
        graded = {k.split("/")[0] for k in state.get("done", {})}
        failed = {k.split("/")[0] for k in state.get("errors", {})} - graded
        pending = len(mine) - len(graded & mine) - len(failed & mine)
        row = [len(graded & mine), len(failed & mine), pending]
        total = [a + b for a, b in zip(total, row)]
        print(f"{i:>5} {len(mine):>8} {row[0]:>6} {row[1]:>6} {row[2]:>7}")
    print(f"{'all':>5} {len(students):>8} {total[0]:>6} {total[1]:>6} {total[2]:>7}")
    return 0


# ---------------------------------------------------------------------------------------------
# The merge: the shards' outputs made into one batch's.

def merge(opts: Options, n: int) -> int:
    from .scheduling import Batch
    out = opts.out.resolve()
    merged = {"version": 1, "done": {}, "errors": {}, "skipped": {}, "entries": {}}
    failed_shards = []
    students = []
    for i in range(1, n + 1):
        shard = out / "shards" / str(i)
        try:
            state = json.loads((shard / "state.json").read_text())
        except (OSError, ValueError):
            failed_shards.append(i)
            continue
        if not state.get("complete"):
            failed_shards.append(i)
        for key in ("done", "errors", "skipped", "entries"):
            merged[key].update(state.get(key, {}))
        for sub in ("records", "sources"):
            if (shard / sub).is_dir():
                shutil.copytree(shard / sub, out / sub, dirs_exist_ok=True)
        students += list(state.get("entries", {}))
    for k in list(merged["done"]):
        merged["done"][k]["record"] = f"records/{k}.json"
    atomic_write(out / "state.json", json.dumps(merged, indent=1, sort_keys=True) + "\n")
    gpu = _gpu_of(out) or gpu_mod.detect()
    batch = Batch(Options(**{**vars(opts), "shard": None}), gpu)
    for s in sorted(merged["entries"]):
        batch._write_student(s)
    batch._write_gradebook()
    entries = [SimpleNamespace(student=s, problem=e.get("problem", ""), files=e.get("files", {}),
                               shown=e.get("files", {})) for s, e in sorted(merged["entries"].items())]
    text = batch._summary(entries, 0.0)
    not_graded = sorted(k for k in merged["errors"])
    if failed_shards or not_graded:
        text += ("\n\nshards that did not finish: " + (", ".join(map(str, failed_shards)) or "none") +
                 "\nnot graded: " + (", ".join(not_graded) or "none") +
                 "\n(run the same --slurm command again: it submits only what is left)")
        atomic_write(out / "summary.md", md_fence(printable(text.strip())) + "\n")
    print(printable(text), flush=True)
    return 2 if failed_shards or not_graded else 0


def _gpu_of(out: Path):
    """The GPU the class was graded on, as its records say (the merge job may run on a CPU node)."""
    for rec in sorted((out / "records").glob("*/*.json")):
        try:
            g = json.loads(rec.read_text()).get("gpu")
        except (OSError, ValueError):
            continue
        if isinstance(g, dict) and g.get("name"):
            return GpuInfo(**{k: v for k, v in g.items() if k in GpuInfo.__dataclass_fields__})
    return None
