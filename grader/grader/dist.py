"""The student kit: one tarball with what a student needs to write and grade their kernel.cu.

  python -m grader dist [--out FILE] [--no-pdf]   (make dist; default build/dist/cuda-kit-student.tar.gz)

In it: a Makefile of student targets only (harness/Makefile.student), harness/ (without its tests), the grader package, assignments/registry.txt and gpus.json, and per
assignment its task.json (hidden cases removed), problem.cu and headers; student_template/; the
rendered handouts (Markdown, HTML, PDF and their index); and a README for students rendered from
handouts/README.student.md.j2.

Not in it: reference/ (the solutions), hidden cases (their ids, sizes and seeds), the known-wrong
submissions of assignments/<name>/tests/, the kit's own tests (grader/tests, harness/tests, tools/, .ci/), the
instructors' notes (assignments/README.md), and slides_examples/ (the lectures' kernels: some are
close to the answers of matmul and conv1d; they go out with the slides, when the course decides).
"""
from __future__ import annotations

import json
import shutil
import sys
import tarfile
import tempfile
from pathlib import Path

from . import handouts, tasks
from .handouts import HandoutError

NAME = "cuda-kit-student"
"""The tarball's top folder, and the default file name."""

GRADER_FILES = "*.py"
"""The grader package: its modules, and the subpackages of GRADER_PACKAGES."""
GRADER_PACKAGES = ("profile",)
"""What `make grade` needs beyond the modules (the profile of PROFILE=1); batch stays with the course."""


def strip_hidden(text: str, where: str = "task.json") -> str:
    """A task file's text without its hidden cases; every other character stays as written."""
    data = json.loads(text)
    if not any(c.get("hidden") for c in data.get("cases", [])):
        return text
    span = tasks.find_value(text, ("cases",))
    if span is None or text[span[0]] != "[":
        raise HandoutError(f"{where}: cannot find the \"cases\" list")
    decoder, spans, pos = json.JSONDecoder(), [], span[0] + 1
    while True:
        pos = tasks.skip_space(text, pos)
        if text[pos] == "]":
            break
        obj, end = decoder.raw_decode(text, pos)
        spans.append((pos, end, obj))
        pos = tasks.skip_space(text, end)
        if text[pos] == ",":
            pos += 1
    lead = text[span[0] + 1:spans[0][0]]        # the whitespace before the first case
    tail = text[spans[-1][1]:pos]               # and after the last one
    kept = [text[s:e] for s, e, obj in spans if not obj.get("hidden")]
    out = text[:span[0] + 1] + lead + ("," + lead).join(kept) + tail + text[pos:]
    want = dict(data, cases=[c for c in data["cases"] if not c.get("hidden")])
    if json.loads(out) != want:  # a layout this function does not understand: never ship it
        raise HandoutError(f"{where}: could not remove the hidden cases cleanly")
    return out


def _copy(src: Path, dst: Path) -> None:
    if src.is_dir():
        shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.o"))
    else:
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dst)


def stage(dest: Path, root: Path = tasks.ROOT, pdf: bool = True) -> Path:
    """Lays the kit out in dest/NAME and returns that folder."""
    kit = dest / NAME
    kit.mkdir(parents=True)
    names = tasks.registry(root)
    _copy(root / "harness" / "Makefile.student", kit / "Makefile")  # student targets only
    _copy(root / "harness", kit / "harness")
    shutil.rmtree(kit / "harness" / "tests")  # the kit's own tests stay with the course
    for py in sorted((root / "grader" / "grader").glob(GRADER_FILES)):
        _copy(py, kit / "grader" / "grader" / py.name)
    for package in GRADER_PACKAGES:
        for py in sorted((root / "grader" / "grader" / package).glob(GRADER_FILES)):
            _copy(py, kit / "grader" / "grader" / package / py.name)
    for f in ("registry.txt", "gpus.json"):
        _copy(root / "assignments" / f, kit / "assignments" / f)
    for name in names:
        src, dst = root / "assignments" / name, kit / "assignments" / name
        tasks.load(name, root)  # a broken task file stops here, named
        dst.mkdir(parents=True)
        task_json = src / "task.json"
        (dst / "task.json").write_text(strip_hidden(task_json.read_text(), str(task_json)))
        for f in [src / "problem.cu", *sorted(src.glob("*.h")), *sorted(src.glob("*.cuh"))]:
            _copy(f, dst / f.name)
        _copy(root / "student_template" / name, kit / "student_template" / name)
    handouts.build(kit / "handouts", root, pdf=pdf)
    env = handouts.environment(root / "handouts")
    entries = [{"name": n, "title": tasks.load(n, root).title, "entry_point": tasks.load(n, root).entry_point,
                "metric": tasks.load(n, root).metric, "pdf": pdf} for n in names]
    (kit / "README.md").write_text(handouts.render(env, "README.student.md.j2", assignments=entries, kit=NAME))
    return kit


def _tarinfo(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def build(out: Path, root: Path = tasks.ROOT, pdf: bool = True) -> Path:
    """Writes the student kit to `out` (a .tar.gz) and returns it."""
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="dist-") as tmp:
        kit = stage(Path(tmp), root, pdf)
        partial = out.with_name(out.name + ".part")
        with tarfile.open(partial, "w:gz") as tar:
            tar.add(kit, arcname=NAME, filter=_tarinfo)
        partial.replace(out)
    return out


def main(args) -> int:
    out = args.out or tasks.ROOT / "build" / "dist" / f"{NAME}.tar.gz"
    try:
        build(out, pdf=not args.no_pdf)
    except HandoutError as e:
        print(f"grader: {e}", file=sys.stderr)
        return handouts.EXIT_CANNOT_RENDER
    with tarfile.open(out) as tar:
        count = sum(1 for m in tar.getmembers() if m.isfile())
    print(f"dist: {out} ({count} files, {out.stat().st_size / 1e6:.1f} MB); "
          f"students run: tar xzf {out.name} && cd {NAME} && make grade A=<name>")
    return 0
