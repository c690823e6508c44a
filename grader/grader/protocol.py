"""How the grader and the harness talk: plan files in, JSON-lines results and exit codes out.

Results come only from the judge (judged.py), through a pipe the grader alone holds: never from a
file or an output a runner could write.
"""
from __future__ import annotations

import json
import os
import secrets
import shutil
import stat
from pathlib import Path

# Mirrors kit::ExitCode in harness/include/kit.cuh (a test checks that they agree).
EXIT_OK = 0
EXIT_USAGE = 2
EXIT_NO_GPU = 3
EXIT_LAUNCH_ERROR = 4
EXIT_RUNTIME_ERROR = 5
EXIT_HARNESS_ERROR = 6

_MASK = (1 << 64) - 1


def mix64(x: int) -> int:
    """splitmix64's finaliser, as in kit.cuh."""
    x = (x + 0x9E3779B97F4A7C15) & _MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK
    return x ^ (x >> 31)


def new_secret() -> int:
    """A per-run secret: the inputs of a grading run cannot be known before it starts."""
    return secrets.randbits(64)


def case_seed(public: int, secret: int, salt: int = 0) -> int:
    """The seed the harness uses: the task's public seed mixed with the run's secret."""
    return mix64(mix64(public ^ secret) + salt)


def plan_line(kind: str, case_id: str, seed: int, tol: float, reference: str, params: dict, **extra) -> str:
    words = [kind, f"id={case_id}", f"seed={seed}", f"rtol={tol!r}", f"reference={reference}"]
    words += [f"{k}={v}" for k, v in extra.items()]
    words += [f"{k}={v}" for k, v in params.items()]
    return " ".join(words)


RESULTS_LIMIT = 64 << 20
"""The most of a results file ever read."""


def write_alone_plan(path: Path, case, salt: int, reference: str = "cpu") -> Path:
    """The plan of `runner --alone` (compute-sanitizer's run, the profile's): the one case `case`
    (a tasks.Case) on inputs from a fresh seed, written where a runner cannot have put it first."""
    seed = case_seed(case.seed, new_secret(), salt=salt)
    write_fresh(path, plan_line("case", case.id, seed, case.tol, reference, case.params) + "\n")
    return path


def read_results(path: Path) -> list:
    """The complete JSON lines of a results file; a line cut off by a crash is dropped."""
    return parse_lines(read_regular(path, RESULTS_LIMIT))


def parse_lines(data: bytes) -> list:
    """The JSON objects of `data`, one per line; lines that are not one are dropped."""
    records = []
    for line in data.decode(errors="replace").splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(rec, dict):
            records.append(rec)
    return records


# ---------------------------------------------------------------------------------------------
# Files in a work folder, where a jailed program may have left links, pipes or folders in their place.

def read_regular(path: Path, limit: int, from_end: bool = False) -> bytes:
    """Up to `limit` bytes of `path` (its last ones with from_end) if it is a regular file, else b"":
    never through a link (to a file of the TA's), never from a pipe (which could block for good)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return b""
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return b""
        if from_end and st.st_size > limit:
            os.lseek(fd, st.st_size - limit, os.SEEK_SET)
        chunks, left = [], limit
        while left > 0:
            b = os.read(fd, min(left, 1 << 20))
            if not b:
                break
            chunks.append(b)
            left -= len(b)
        return b"".join(chunks)
    finally:
        os.close(fd)


def entries(top: Path):
    """(path, lstat result) of everything under `top`, found lazily; links are never followed."""
    stack = [str(top)]
    while stack:
        try:
            with os.scandir(stack.pop()) as it:
                found = list(it)
        except OSError:
            continue
        for e in found:
            try:
                st = e.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISDIR(st.st_mode):
                stack.append(e.path)
            yield e.path, st


def clear(path: Path) -> None:
    """Removes whatever stands at `path` (a file, a link, a folder), not following links."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(st.st_mode):
        shutil.rmtree(path, ignore_errors=True)
    else:
        os.unlink(path)


def write_fresh(path: Path, text: str) -> None:
    """A new regular file at `path` holding `text`, whatever stood there before."""
    clear(path)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "w") as f:
        f.write(text)
