"""Running untrusted programs: own process group, time limit, capped output, nothing trusted.

Output goes to files, and only their last few kilobytes are ever read back: a submission that
prints gigabytes costs disk up to the file-size limit, not the grader's memory.
"""
from __future__ import annotations

import ctypes
import os
import resource
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

try:  # loaded once here: after fork, in the child, only the call is made
    _LIBC = ctypes.CDLL(None) if sys.platform.startswith("linux") else None
except OSError:
    _LIBC = None

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
    if _LIBC is not None:
        _LIBC.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: it dies with the grader, even a grader killed -9
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


def run(cmd: list, cwd: Path, log: Path, timeout: float, env: dict = None, watchdog=None,
        untrusted: bool = False) -> Run:
    """Run cmd with stdout and stderr into `log`. `watchdog()` is polled while it runs; when it
    returns True the process is stopped as timed out (used for per-case limits). With `untrusted`
    (a program holding student code) and a jail set by confine(), it runs inside that jail."""
    start = time.monotonic()
    if untrusted and _JAIL is not None:
        cmd, env = _JAIL.wrap(cmd, Path(cwd))
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=env, preexec_fn=_limits)
        timed_out = False
        try:
            while True:
                try:
                    proc.wait(timeout=0.05)
                    break
                except subprocess.TimeoutExpired:
                    if time.monotonic() - start > timeout or (watchdog and watchdog()):
                        timed_out = True
                        break
        finally:  # also when the grader itself is interrupted (Ctrl-C)
            kill(proc)  # also whatever it left running in the background, which could hold the GPU
    if untrusted and _JAIL is not None and _JAIL.namespaces and 128 < proc.returncode < 160:
        return Run(-(proc.returncode - 128), timed_out, time.monotonic() - start, tail(log))
    return Run(proc.returncode, timed_out, time.monotonic() - start, tail(log))


def kill(proc: subprocess.Popen):
    """SIGKILL to its whole process group, then reap it (its exit status is kept if it had ended)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


# ---------------------------------------------------------------------------------------------
# The jail for batch grading: programs that hold student code (the compiler reading kernel.cu, the
# runner, compute-sanitizer running the runner) run with a scrubbed environment, a memory limit and,
# where unprivileged user namespaces work, no network, their own process tree, and empty folders
# mounted over the kit's reference/, the submissions, the batch's outputs and every other
# submission's work folder. /dev stays as it is: the runner needs the GPU's device nodes.

DEFAULT_MEMORY_BYTES = 16 << 30
"""RLIMIT_DATA of a jailed program. RLIMIT_AS cannot be used: the CUDA driver reserves address
space far larger than the machine's memory. RLIMIT_DATA counts only private writable mappings
(malloc, new, the heap), which is what a runaway host allocation uses, and leaves the driver's
reservations alone."""

_JAIL_SCRIPT = r"""
set -e
W=$1 C=$2 R=$3 M=$4 N=$5; shift 5
if [ "$M" != - ]; then ulimit -d "$M"; fi
ulimit -c 0
cd "$W"
if [ "$R" != - ]; then
  while [ "$N" -gt 0 ]; do mount -t tmpfs -o size=16k,mode=555 kit-hidden "$1"; shift; N=$((N - 1)); done
  if [ "$R" != + ]; then
    mount -t tmpfs -o size=64k,mode=755 kit-hidden "$R"
    mkdir -p "$W"
    mount --no-canonicalize --bind . "$W"
  fi
else
  shift "$N"
fi
cd "$C"
if [ "$R" = - ]; then exec "$@"; fi
# In its own PID namespace this shell is process 1, which ignores the signals a program would die of
# (SIGXFSZ at the output limit, SIGABRT): the program runs as its child, and a death by signal comes
# back as 128 + the signal, which run() turns into the negative signal number again.
set +e
"$@"
exit $?
"""


@dataclass
class Jail:
    hide: list = field(default_factory=list)
    """Folders covered by an empty, read-only tmpfs (reference/, submissions, outputs)."""
    work_root: Optional[Path] = None
    """The folder holding every submission's work folder: covered too, all but the one in use."""
    namespaces: bool = False
    """Whether `unshare` gives a user, network, mount and PID namespace here (see namespaces_work())."""
    memory_bytes: Optional[int] = DEFAULT_MEMORY_BYTES
    """RLIMIT_DATA, or None for no limit."""
    base_env: dict = field(default_factory=dict)
    """The environment jailed programs get (see scrubbed_env())."""

    def wrap(self, cmd: list, cwd: Path) -> tuple:
        """(command, environment) that run `cmd` inside the jail, in cwd: a submission's work folder
        (or a folder inside one), which is all of the work root the program sees."""
        cwd = Path(cwd).resolve()
        mine = None
        if self.work_root is not None:
            root = Path(self.work_root).resolve()
            if cwd != root and root in cwd.parents:
                mine = root / cwd.relative_to(root).parts[0]
        env = dict(self.base_env, HOME=str(mine or cwd), TMPDIR=str(mine or cwd))
        mem = str(self.memory_bytes // 1024) if self.memory_bytes else "-"
        # Deepest first, so that a folder inside another hidden one is covered before its parent.
        hide = sorted({str(Path(h).resolve()) for h in self.hide if Path(h).is_dir()},
                      key=lambda h: -h.count("/"))
        if self.namespaces:
            prefix = ["unshare", "--user", "--map-root-user", "--net", "--mount", "--pid", "--fork",
                      "--kill-child", "--mount-proc"]
            root = str(Path(self.work_root).resolve()) if mine else "+"
        else:
            prefix, root = [], "-"
        # cd into cwd first: the shell keeps it open while the work root is covered, then binds it back.
        return [*prefix, "sh", "-c", _JAIL_SCRIPT, "kit-jail", str(mine or cwd), str(cwd), root, mem, str(len(hide)), *hide,
                *cmd], env

    def describe(self) -> dict:
        """What was in force, as each batch record shows it."""
        ns = self.namespaces
        return {
            "network": "cut (own network namespace)" if ns else "not cut: user namespaces unavailable",
            "filesystem": ("reference/, the submissions, the outputs and other submissions' work folders "
                           "hidden (empty mounts)") if ns else "not hidden: user namespaces unavailable",
            "processes": "own PID namespace: nothing outlives the run" if ns else "own process group, killed at the end",
            "memory": (f"RLIMIT_DATA {self.memory_bytes / 2**30:g} GiB" if self.memory_bytes else "not limited"),
            "output": f"RLIMIT_FSIZE {OUTPUT_LIMIT_BYTES / 2**30:g} GiB per file, only the tail read back",
            "environment": "scrubbed: PATH and the CUDA library paths only",
        }


_JAIL: Optional[Jail] = None


def confine(jail: Optional[Jail]) -> None:
    """From now on, untrusted runs go through `jail` (None: no jail, as for a single grading)."""
    global _JAIL
    _JAIL = jail


def current_jail() -> Optional[Jail]:
    return _JAIL


def namespaces_work() -> bool:
    """Whether unprivileged user namespaces (with network, mount and PID ones) can be made here."""
    try:
        r = subprocess.run(["unshare", "--user", "--map-root-user", "--net", "--mount", "--pid", "--fork",
                            "--kill-child", "--mount-proc", "true"], capture_output=True, timeout=30)
        return r.returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def scrubbed_env(kit_root: Path, environ: dict = None) -> dict:
    """PATH (without folders inside the kit) and what CUDA needs to find its libraries and devices;
    nothing else of the grader's environment, which may point at the kit or the submissions."""
    environ = os.environ if environ is None else environ
    root = str(Path(kit_root).resolve())
    env = {"LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}
    for key in ("PATH", "LD_LIBRARY_PATH"):
        parts = [p for p in environ.get(key, "").split(os.pathsep) if p and not (p + "/").startswith(root + "/")]
        if parts or key == "PATH":
            env[key] = os.pathsep.join(parts or ["/usr/local/bin", "/usr/bin", "/bin"])
    for key in ("CUDA_VISIBLE_DEVICES", "CUDA_HOME", "CUDA_PATH", "NVIDIA_VISIBLE_DEVICES",
                "NVIDIA_DRIVER_CAPABILITIES"):
        if key in environ and root not in environ[key]:
            env[key] = environ[key]
    return env
