"""The known submissions of assignments/<name>/tests/ (each file's first line is `// expect: VERDICT`),
with every assignment's hidden reference and unfilled skeleton, graded once per test session as one
class in a batch, as a TA grades: in the jail where bubblewrap is installed, else without it. The
builds of the next entries overlap the GPU stages of the current one, and no file is graded twice:
the per-file verdict tests and the jailed hostile-corpus test read the same records. Each graded
case is timed TIMED_RUNS times, the fewest a batch allows (a task asks for 10 or 20).

  known()                         (assignment, file) of every known submission
  expectation(file, jailed)       what its header lines promise
  grade_class(gpu, root)          the batch, graded: a Corpus
"""
import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

from grader import batch, tasks

ROOT = tasks.ROOT


def known() -> list:
    """(assignment, file) for every file whose first line is `// expect: VERDICT`."""
    out = []
    for name in tasks.registry():
        for f in sorted((ROOT / "assignments" / name / "tests").glob("*.cu")):
            lines = f.read_text().splitlines()
            if lines and lines[0].startswith("// expect:"):
                out.append((name, f))
    return out


@dataclass
class Expectation:
    verdict: str
    """`// expect:`, or in a jailed batch `// expect-batch:` where the jail changes the outcome."""
    message: str = ""
    """`// expect-message:` words the verdict's message must contain."""
    performance_below: float = None
    """`// expect-performance-below: F`: a correct submission earns less than this fraction of the
    performance points (right, but slow)."""


def expectation(path: Path, jailed: bool) -> Expectation:
    head = path.read_text().splitlines()[:6]
    extra = {h[3:].split(":", 1)[0]: h.split(":", 1)[1].strip() for h in head[1:] if h.startswith("// expect-")}
    below = extra.get("expect-performance-below")
    if jailed and "expect-batch" in extra:  # the message named the outcome the jail prevents
        return Expectation(extra["expect-batch"], "", float(below) if below else None)
    return Expectation(head[0].split(":", 1)[1].strip(), extra.get("expect-message", ""), float(below) if below else None)


def jail_changes(path: Path) -> bool:
    """Whether the file says the jail changes its outcome (`// expect-batch:`)."""
    return expectation(path, jailed=True) != expectation(path, jailed=False)


def student(name: str, path: Path) -> str:
    """The entry a file is in the class: <assignment>-<file stem>, or <assignment>-the-reference and
    <assignment>-the-skeleton for the hidden reference and the unfilled skeleton."""
    if path == reference(name):
        return f"{name}-the-reference"
    if path == skeleton(name):
        return f"{name}-the-skeleton"
    return f"{name}-{path.stem}"


def reference(name: str) -> Path:
    return ROOT / "reference" / name / "kernel.cu"


def skeleton(name: str) -> Path:
    return ROOT / "student_template" / name / "kernel.cu"


TIMED_RUNS = 10


@dataclass
class Corpus:
    out: Path
    """The batch's output folder."""
    exit_code: int
    jailed: bool
    graded: set = field(default_factory=set)
    """The assignments in the class (those this machine has enough GPUs for)."""

    def record(self, name: str, path: Path) -> dict:
        return json.loads((self.out / "records" / student(name, path) / f"{name}.json").read_text())


def grade_class(gpu, root: Path) -> Corpus:
    subs, out = root / "class", root / "out"
    graded = {name for name in tasks.registry() if tasks.load(name).gpus_required <= gpu.count}
    files = known() + [(name, f) for name in tasks.registry() for f in (reference(name), skeleton(name))]
    for name, f in files:
        if name in graded:
            (subs / student(name, f) / name).mkdir(parents=True)
            shutil.copy(f, subs / student(name, f) / name / "kernel.cu")
    jailed = shutil.which("bwrap") is not None
    rc = batch.main(SimpleNamespace(submissions=subs, out=out, jobs=os.cpu_count() or 4, assignments=sorted(graded),
                                    regrade=None, regrade_all=False, timed_runs=TIMED_RUNS, no_reference=True,
                                    no_isolation=not jailed, memory_gib=16))
    return Corpus(out, rc, jailed, graded)
