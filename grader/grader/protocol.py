"""How the grader and the harness talk: plan files in, JSON-lines results and exit codes out.

Results come only from the judge (judged.py), through a pipe the grader alone holds: never from a
file or an output a runner could write.
"""
from __future__ import annotations

import errno
import json
import os
import secrets
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


MAX_NESTING = 1024
"""The longest path, in bytes, that a jailed program may make under its work folder. Every path the
grader walks stays well below PATH_MAX (4,096 bytes), past which nothing can be opened or looked at
by its name: what a program wrote there was never counted against its disk limit, nor swept. Bytes,
not characters: 16 folders of 63 four-byte emoji are 1,024 characters and 4,048 bytes."""


class Hidden(OSError):
    """Part of the folder walked that the grader cannot see into: nested past MAX_NESTING bytes of
    path, or closed to it (a grader that is not root, and a folder its jailed program made mode 000)."""

    def __init__(self, path: str, why: str):
        super().__init__(f"{why}: {path[:200]}")
        self.path, self.why = path, why


# Hidden's reasons, as a record says them of a jailed program's work folder.
NESTED = f"made folders nested past {MAX_NESTING:,} bytes of path in its work folder"
CLOSED = "made a folder in its work folder that the grader cannot read"

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def entries(top: Path):
    """(path, lstat result) of everything under `top`, found lazily, without recursion; links are never
    followed, and a folder swapped for a link or another folder between its listing and its opening
    (renameat2's RENAME_EXCHANGE, in a loop) is not entered. Hidden where a folder is nested past
    MAX_NESTING bytes under `top` or cannot be opened or looked into (permissions)."""
    top = os.fsencode(str(top))
    try:
        st = os.lstat(top)
    except OSError:
        return
    stack = [(top, (st.st_dev, st.st_ino))]
    while stack:
        folder, seen = stack.pop()
        name = os.fsdecode(folder)
        if len(folder) - len(top) > MAX_NESTING:
            raise Hidden(name, NESTED)
        found = []
        try:
            fd = os.open(folder, _DIR)
        except OSError as e:
            if e.errno in (errno.EACCES, errno.EPERM):
                raise Hidden(name, CLOSED) from None
            if e.errno == errno.ENAMETOOLONG:
                raise Hidden(name, NESTED) from None
            continue  # gone, or a link now
        try:
            here = os.fstat(fd)
            if (here.st_dev, here.st_ino) != seen:
                continue  # not the folder listed: swapped in since
            with os.scandir(fd) as it:
                for e in it:
                    try:  # looked at through the folder's descriptor, never by a path
                        found.append((e.name, e.stat(follow_symlinks=False)))
                    except PermissionError:
                        raise Hidden(name, CLOSED) from None
                    except OSError:
                        continue
        finally:
            os.close(fd)
        for entry, st in found:
            path = folder + b"/" + os.fsencode(entry)
            if stat.S_ISDIR(st.st_mode):
                stack.append((path, (st.st_dev, st.st_ino)))
            yield os.fsdecode(path), st


def clear(path: Path) -> None:
    """Removes whatever stands at `path` (a file, a link, a folder of any depth), not following links."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(st.st_mode):
        remove_tree(path)
    else:
        os.unlink(path)


def remove_tree(path: Path) -> None:
    """Removes the folder `path` and everything in it, however deep, as far as it can; errors are
    ignored. Each folder met below the first level is first moved up to be a child of `path`, so no
    path grows long and nothing recurses: shutil.rmtree recursed once per level, and 3,000 nested
    folders left in a work folder raised RecursionError out of the grader."""
    try:
        top = os.open(path, _DIR)
    except OSError:
        return
    moved = 0
    try:
        queue = [None]  # names in `top` of the folders still to empty; None is `top` itself
        while queue:
            name = queue.pop()
            try:
                fd = top if name is None else os.open(name, _DIR, dir_fd=top)
            except OSError:
                continue
            try:
                try:
                    os.chmod(fd, 0o700)  # a folder its maker closed (mode 000) is opened again
                except OSError:
                    pass
                for child in os.listdir(fd):
                    try:
                        os.unlink(child, dir_fd=fd)
                        continue
                    except IsADirectoryError:
                        pass
                    except OSError:
                        continue
                    if name is None:
                        queue.append(child)
                        continue
                    while True:  # a fresh name in `top`: its own entries may be named like ours
                        moved += 1
                        try:
                            os.rename(child, f"~{moved}", src_dir_fd=fd, dst_dir_fd=top)
                            queue.append(f"~{moved}")
                            break
                        except OSError as e:  # taken: try the next name; anything else: leave it
                            if e.errno not in (errno.EEXIST, errno.ENOTEMPTY, errno.EISDIR, errno.ENOTDIR):
                                break
            finally:
                if fd != top:
                    os.close(fd)
            if name is not None:
                try:
                    os.rmdir(name, dir_fd=top)
                except OSError:
                    pass
    finally:
        os.close(top)
    try:
        os.rmdir(path)
    except OSError:
        pass


def write_fresh(path: Path, text: str) -> None:
    """A new regular file at `path` holding `text`, whatever stood there before."""
    clear(path)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "w") as f:
        f.write(text)
