"""Running untrusted programs: own process group, time limit, capped output, nothing trusted.

Output goes to files, and only their last few kilobytes are ever read back: a submission that
prints gigabytes costs disk up to the file-size limit, not the grader's memory.
"""
from __future__ import annotations

import os
import resource
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

OUTPUT_LIMIT_BYTES = 2 << 30  # per file the child writes: the largest output dumps (1 GiB) fit
TAIL_BYTES = 4000


@dataclass
class Run:
    returncode: int
    """Exit status; negative: killed by that signal."""
    timed_out: bool
    """True when the grader stopped it for running too long."""
    seconds: float
    """Wall time."""
    output: str
    """The last few kilobytes of its stdout and stderr, for messages only."""


def _limits():
    os.setsid()  # its own process group, so a kill reaches everything it started
    resource.setrlimit(resource.RLIMIT_FSIZE, (OUTPUT_LIMIT_BYTES, OUTPUT_LIMIT_BYTES))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def tail(path: Path, limit: int = TAIL_BYTES) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - limit))
            return f.read().decode(errors="replace")
    except OSError:
        return ""


def run(cmd: list, cwd: Path, log: Path, timeout: float, env: dict = None, watchdog=None) -> Run:
    """Run cmd with stdout and stderr into `log`. `watchdog()` is polled while it runs; when it
    returns True the process is stopped as timed out (used for per-case limits)."""
    start = time.monotonic()
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=env, preexec_fn=_limits)
        timed_out = False
        while True:
            try:
                proc.wait(timeout=0.05)
                break
            except subprocess.TimeoutExpired:
                if time.monotonic() - start > timeout or (watchdog and watchdog()):
                    timed_out = True
                    break
        kill(proc)  # also whatever it left running in the background, which could hold the GPU
    return Run(proc.returncode, timed_out, time.monotonic() - start, tail(log))


def kill(proc: subprocess.Popen):
    """SIGKILL to its whole process group, then reap it (its exit status is kept if it had ended)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()
