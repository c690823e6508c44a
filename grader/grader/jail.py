"""The jail for student code in batch and Gradescope grading: an allow-list bubblewrap sandbox.

A program that holds student code (the compiler reading kernel.cu, the linker, the runner,
compute-sanitizer running the runner) starts in an empty root, with all namespaces unshared (user,
mount, PID, network, IPC, UTS, cgroup), every capability dropped, uid and gid 65534, no_new_privs,
no way to make a user namespace of its own, a new session, a PID namespace that dies with the
grader, and the system calls seccomp.py lists refused. It sees only what its step needs:

  compile   /usr and the CUDA toolkit read-only, the kit's public headers (harness/include) and the
            runner's objects read-only, its work folder, a private /tmp; a kit, a class or outputs
            kept under /usr (/usr/local) covered by an empty folder, and the forbidden libraries'
            files (cuBLAS, cuFFT, ...) by /dev/null: kernel.cu could `.incbin` one into its object
  run       the runtime libraries the runner loads (the C and C++ runtimes, libcuda and the driver's
            own helpers: no cuBLAS, cuFFT, cuDNN, NCCL, no toolkit), /dev/nvidia*, its work folder,
            a private /tmp; compute-sanitizer's or Nsight Compute's folder too when it runs under one, with
            the system libraries it loads

Nothing else exists in there: not the kit's source or build folder, the references, the task files,
other submissions, the outputs, the TA's home, other checkouts on the disk, the host's /tmp, the
network. Processes, memory and disk are bounded per submission (limits.py). Without bubblewrap, or
where it cannot make its namespaces (Docker's default seccomp profile refuses them), there is no
jail: find() says why in one line, and batch and Gradescope grading refuse to run student code.
Which libraries each view shows, empties or hides is worked out in libraries.py.
"""
from __future__ import annotations

import functools
import os
import platform
import re
import shutil
import stat
import subprocess
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from . import protocol, seccomp
from .libraries import _SYSTEM_TOPS, _UNDER_SYSTEM, library_files, library_trees, runtime_libraries, tool_libraries
from .limits import NOBODY, Limits

INSTALL_HINT = ("install bubblewrap (Debian and Ubuntu: apt-get install bubblewrap), or pass --no-isolation "
                "to run student code unjailed, for debugging the kit only")

class JailError(Exception):
    """No working jail here: one line that says why and what to do."""


@dataclass
class Jail:
    bwrap: str
    """The bubblewrap executable."""
    toolkit: Path
    """The CUDA toolkit's folder (nvcc's bin/..), visible only where student code is compiled."""
    include: Path
    """harness/include: the headers a kernel.cu may include (public: the student kit ships them)."""
    runtime: list = field(default_factory=list)
    """The library files a run sees (each bound read-only at its own path)."""
    devices: list = field(default_factory=list)
    """/dev/nvidia* device nodes bound into a run."""
    sanitizer: Optional[Path] = None
    """compute-sanitizer's own folder, bound only when a run goes through it."""
    profiler: Optional[Path] = None
    """Nsight Compute's own folder (ncu's), bound only when a run is profiled."""
    limits: Limits = field(default_factory=Limits)
    """Processes, memory, disk and the private /tmp of each submission."""
    stage: Optional[Path] = None
    """A folder of copies of the kit files a jailed step reads (expose()), readable by the jailed
    user; None: the files are bound where they are."""
    emptied: list = field(default_factory=list)
    """The forbidden libraries' files (FORBIDDEN_LIBS) in the toolkit and the system folders, each covered
    by /dev/null where code is compiled: an asm block's `.incbin "libcublas.so"` would put cuBLAS's GPU code
    into the student's object, in a section of its own that the scan of its strings never reads."""
    hidden: list = field(default_factory=list)
    """Folders never to be seen (the kit, the class, the outputs): where one lies under the system
    folders a view binds (a kit installed in /usr/local), an empty tmpfs covers it there."""
    _exposed: dict = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def expose(self, path: Path) -> Path:
        """Where a jailed step reads the kit file or folder `path`: a read-only copy in `stage`, made
        once, so that the kit's own folder (perhaps in a home the jailed user cannot enter) stays out."""
        path = Path(path).resolve()
        if self.stage is None:
            return path
        with self._lock:
            if path not in self._exposed:
                dst = self.stage / f"{len(self._exposed):03d}" / path.name
                dst.parent.mkdir(parents=True)
                if path.is_dir():
                    shutil.copytree(path, dst)
                else:
                    shutil.copy2(path, dst)
                for d, dirs, files in os.walk(dst.parent):
                    os.chmod(d, 0o755)
                    for f in files:
                        os.chmod(os.path.join(d, f), 0o755 if os.access(os.path.join(d, f), os.X_OK) else 0o644)
                self._exposed[path] = dst
            return self._exposed[path]

    def prepare(self, work: Path) -> None:
        """Makes the folder `work` the jailed user's to write in (a grader running as root hands it to
        the jail's own uid; otherwise it is the grader's own already)."""
        if self.limits.drop_to is not None:  # its folders; the grader's own files (plans) stay the grader's
            os.chown(work, self.limits.drop_to, self.limits.drop_to, follow_symlinks=False)
            try:
                for d, st in protocol.entries(work):
                    if stat.S_ISDIR(st.st_mode):
                        os.chown(d, self.limits.drop_to, self.limits.drop_to, follow_symlinks=False)
            except protocol.Hidden:  # its own folders, made by an earlier step and stopped for it
                pass

    def command(self, cmd: list, work: Path, view: str, read_only: tuple = (), gpus: Optional[tuple] = None,
                seccomp_fd: Optional[int] = None) -> list:
        """bwrap's command line that runs `cmd` in `work` (bound read-write, at its own path) with the
        given view ("compile", "run", "sanitize" or "profile") and the extra files or folders `read_only`,
        under the filter of refused calls that bubblewrap reads from `seccomp_fd` (seccomp.descriptor(),
        handed to it open). With
        `gpus` (as CUDA_VISIBLE_DEVICES names them), a run sees only those GPUs' device nodes where
        they are numbers: the driver then shows it those GPUs alone, whatever the program sets in its
        environment; GPUs named otherwise (UUIDs) are chosen through CUDA_VISIBLE_DEVICES."""
        a = [self.bwrap, "--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent",
             "--new-session", "--cap-drop", "ALL", "--uid", str(NOBODY), "--gid", str(NOBODY),
             "--hostname", "jail", "--clearenv",
             "--setenv", "PATH", f"{self.toolkit}/bin:/usr/bin:/bin", "--setenv", "LANG", "C.UTF-8",
             "--setenv", "HOME", str(work), "--setenv", "TMPDIR", "/tmp",
             "--proc", "/proc", "--dev", "/dev", "--size", "4096", "--tmpfs", "/dev/pts",  # no pty: see _read_only
             "--perms", "1777", "--size", str(self.limits.tmp_bytes), "--tmpfs", "/tmp",
             "--perms", "1777", "--size", str(64 << 20), "--tmpfs", "/dev/shm"]
        if seccomp_fd is not None:
            a += ["--seccomp", str(seccomp_fd)]
        a += _ro("/etc/ld.so.cache")
        # Views that show the system folders whole: a file under them is there already (bound again, a
        # link such as /usr/bin/nm would make bubblewrap fail).
        shows_system = view in ("check", "compile") or (view == "profile" and self.profiler is not None)
        if view == "check":  # only the namespaces and /usr: can bubblewrap work here at all?
            a += _system_dirs()
        elif view == "compile":
            a += _system_dirs() + _ro(self.toolkit) + _ro("/etc/alternatives")
            for f in self.emptied:
                a += ["--ro-bind", os.devnull, f]
        elif view in ("run", "sanitize", "profile"):
            if shows_system:  # a profiled run
                # ncu and the system files it needs (read-only, as when compiling), before the libraries:
                # nothing of a profiled run is graded, so a library reachable there earns nothing.
                a += _system_dirs() + _ro(self.profiler)
            for lib in self.runtime:
                if not (shows_system and _under_system(lib)):
                    a += _ro(lib)
            by_node = gpus is not None and all(g.isdigit() for g in gpus)
            wanted = {str(int(g)) for g in gpus} if by_node else set()
            for dev in self.devices:
                node = _gpu_node(dev)
                if not by_node or not node or node in wanted:
                    a += ["--dev-bind", dev, dev]
            a += ["--setenv", "CUDA_DEVICE_ORDER", "PCI_BUS_ID"]
            if gpus is not None and not by_node:
                a += ["--setenv", "CUDA_VISIBLE_DEVICES", ",".join(gpus)]
            if view == "sanitize" and self.sanitizer:
                # The tool's own executables load libraries the runner does not (libutil, libpthread):
                # those too, and nothing more (the sanitized run's findings can only lower a grade).
                a += _ro(self.sanitizer)
                for lib in tool_libraries(self.sanitizer):
                    if lib not in self.runtime:
                        a += _ro(lib)
        else:
            raise ValueError(f"no such view: {view}")
        # The covers go over every folder bound so far (a toolkit found at /usr/local would show all of
        # /usr/local again), and under the kit's staged files and the work folder, bound next.
        a += _covers(self.hidden)
        if view == "compile":
            a += _ro(self.include)
        a += ["--bind", str(work), str(work)]
        for p in read_only:  # after the work folder: a file inside it (the runner) is bound over itself
            if not (shows_system and _under_system(p)):
                a += _ro(p)
        a += _read_only(self.hidden) + ["--chdir", str(work), "--"]
        return a + [str(c) for c in cmd]

    def describe(self) -> dict:
        """What was in force, as each batch record shows it."""
        lim = self.limits
        outside = (f"uid {lim.drop_to} outside it, which no account, no process outside a jail and no user's "
                   f"containers have" if lim.drop_to is not None else "the grader's own user outside it")
        return {
            "jail": "bubblewrap, allow-list: an empty root with only what the step needs",
            "user": f"uid {NOBODY} in its own user namespace ({outside}), no capabilities, no_new_privs, no further "
                    f"namespaces",
            "network": "cut (own network namespace)",
            "filesystem": ("compile: /usr and the CUDA toolkit read-only, the math libraries' files (cuBLAS, cuFFT, "
                           "...) empty, other CUDA toolkits and pip's NVIDIA wheels hidden; run: the C/C++ runtimes and libcuda "
                           "only, /dev/nvidia*; both: the submission's work folder and a private /tmp, nothing else"),
            "processes": f"own PID namespace, ended with the run; {lim.describe_processes()}",
            "memory": lim.describe_memory(),
            "disk": lim.describe_disk(),
            "environment": "cleared: PATH, LANG, HOME and TMPDIR only",
        }


def _gpu_node(dev: str) -> str:
    """"3" for /dev/nvidia3; "" for the driver's other nodes (nvidiactl, nvidia-uvm, ...)."""
    m = re.fullmatch(r"/dev/nvidia(\d+)", dev)
    return m.group(1) if m else ""


def _ro(path) -> list:
    p = str(path)
    return ["--ro-bind-try", p, p]


def _under_system(path) -> bool:
    """Whether `path` lies under the system folders (which some views show whole, read-only)."""
    return str(path).startswith(_UNDER_SYSTEM)


def _system_dirs() -> list:
    """/usr read-only, and the top-level folders that point into it (merged /usr) as the same links."""
    a = ["--ro-bind", "/usr", "/usr"]
    for top in _SYSTEM_TOPS:
        if os.path.islink(top):
            a += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            a += ["--ro-bind", top, top]
    return a


def _covered(hidden: list) -> list:
    """The `hidden` folders that lie under the system folders (and so would show wherever /usr or a
    tool's folder in it is bound)."""
    return [h for h in hidden if f"{h}/".startswith(_UNDER_SYSTEM)]


def _covers(hidden: list) -> list:
    """An empty tmpfs over each covered folder, of one page: memory the jailed user owns (no limit but
    a cgroup's would hold what it wrote there), made read-only at the end of the command (_read_only)."""
    return [x for h in _covered(hidden) for x in ("--size", "4096", "--tmpfs", str(h))]


def _read_only(hidden: list) -> list:
    """The jail's own memory folders read-only once all is bound in them: its empty root, /dev, the
    covers over hidden folders, and the empty /dev/pts over bubblewrap's (no pty: a compiler told to
    `#include "/dev/ptmx"` waited on the new terminal for its whole time limit, using no CPU). Without a
    cgroup, nothing else would bound what a run put there (600 MiB went into each under a 16 MiB /tmp)."""
    return [x for d in ("/dev/pts", "/dev", *_covered(hidden), "/") for x in ("--remount-ro", str(d))]


def find(include: Path, probe: Optional[Path] = None, limits: Optional[Limits] = None,
         stage: Optional[Path] = None, hidden: tuple = ()) -> Jail:
    """The jail of this machine, or JailError saying why there is none. `probe`, a kit-built CUDA
    program, gives the libraries a run needs (those it loads, and libcuda's); `stage`, a folder the
    jailed user can read, receives the kit files jailed steps read (Jail.expose); `hidden`, folders
    no view may show even where they lie under /usr (Jail.hidden)."""
    bwrap = shutil.which("bwrap")
    if not bwrap:
        raise JailError(f"bubblewrap (bwrap) is not installed: {INSTALL_HINT}")
    no_core_socket()
    if platform.machine() not in seccomp.MACHINES:
        raise JailError(f"the jail knows the system calls of {', '.join(seccomp.MACHINES)} machines, not of this "
                        f"{platform.machine()} one: grade on one of those, or pass --no-isolation for debugging only")
    toolkit = toolkit_root() or Path("/usr/local/cuda").resolve()
    sanitizer = sanitizer_executable()
    libs = runtime_libraries(probe)
    profiler = profiler_folder()
    tools = (Path(sanitizer).parent if sanitizer else None, profiler)
    jail = Jail(bwrap=bwrap, toolkit=toolkit, include=Path(include).resolve(), runtime=libs,
                emptied=library_files(toolkit),
                devices=sorted(str(d) for d in Path("/dev").glob("nvidia*") if d.is_char_device()),
                sanitizer=tools[0], profiler=profiler, limits=limits or Limits(), stage=stage,
                hidden=sorted({str(Path(h).resolve()) for h in (*hidden, *library_trees(toolkit, tools))
                               if Path(h).is_dir()}))
    if stage is not None:
        jail.include = jail.expose(include)
    check_namespaces(jail)
    return jail


CORE_PATTERN = Path("/proc/sys/kernel/core_pattern")


def no_core_socket() -> None:
    """JailError where the machine's core_pattern names a socket ("@/path", Linux 6.16 and later): a core
    limit of 1 keeps the kernel from starting a "|program" handler (limits.output_limits), not from
    writing a crashed program's memory to a socket. Looked at when the jail opens and before each run
    (the pattern may change meanwhile)."""
    try:
        pattern = CORE_PATTERN.read_text().strip()
    except OSError:
        return
    if pattern.startswith("@"):
        raise JailError(f"this machine sends core dumps to a socket ({CORE_PATTERN} is {pattern!r}): the kernel "
                        f"then hands a crashed program's memory to a root process outside the jail whatever its core "
                        f"limit, and a graded program can crash on purpose. Set a file name or a |program there "
                        f"(sysctl kernel.core_pattern=core), or pass --no-isolation for debugging only")


@functools.lru_cache(maxsize=None)
def _toolkit_of(nvcc: str) -> Path:
    here = Path(nvcc).resolve()
    if (here.parent / "nvcc.profile").is_file():  # the toolkit's own bin/
        return here.parent.parent
    # A wrapper (/usr/local/bin/nvcc: `exec /usr/local/cuda-13.0/bin/nvcc "$@"`): its folder's parent is
    # not the toolkit, and binding it would show whatever else lies there. nvcc says where it runs from.
    try:
        r = subprocess.run([nvcc, "-dryrun", "-x", "cu", "-c", os.devnull, "-o", os.devnull],
                           capture_output=True, text=True, timeout=120)
        m = re.search(r"^#\$ _HERE_=(.+)$", r.stdout + r.stderr, re.M)
        if m and (Path(m.group(1)) / "nvcc").is_file():
            return Path(m.group(1)).resolve().parent
    except (OSError, subprocess.SubprocessError):
        pass
    return here.parent.parent


def toolkit_root() -> Optional[Path]:
    """The CUDA Toolkit's folder (bin/nvcc, nvvm/, compute-sanitizer/) of the nvcc on PATH, followed
    through links and wrapper scripts; None where there is no nvcc."""
    nvcc = shutil.which("nvcc")
    return _toolkit_of(nvcc) if nvcc else None


def sanitizer_executable() -> Optional[str]:
    """compute-sanitizer's own executable (the one on PATH is often a shell script that calls it), or None."""
    exe = shutil.which("compute-sanitizer")
    if not exe:
        return None
    for top in filter(None, (Path(exe).resolve().parent.parent, toolkit_root())):
        if (top / "compute-sanitizer" / "compute-sanitizer").is_file():
            return str(top / "compute-sanitizer" / "compute-sanitizer")
    return exe


def profiler_folder() -> Optional[Path]:
    """Nsight Compute's folder (ncu with its libraries and sections), or None where ncu is missing."""
    from .profile.ncu import find_ncu  # the profile package needs nothing of the jail's
    exe = find_ncu()
    return Path(exe).resolve().parent if exe else None


def _closed_on_the_way(path: Path) -> Optional[Path]:
    """The first folder on the way to `path` (itself included) that a user other than its owner and
    group cannot pass through; None where every one is open."""
    for p in [*reversed(path.parents), path]:
        try:
            if not p.stat().st_mode & stat.S_IXOTH:
                return p
        except OSError:
            return p
    return None


def check_namespaces(jail: Jail) -> None:
    """JailError unless bubblewrap can make its namespaces here (as the user jails run as)."""
    tmp = Path(tempfile.gettempdir())
    closed = _closed_on_the_way(tmp) if jail.limits.drop_to is not None else None
    if closed is not None:
        # The work folders are made in the temp folder, and a root grader's jails run as a uid of their
        # own: a private TMPDIR (a cluster job's, say) would end every run in "Permission denied".
        raise JailError(f"the jail's user (uid {jail.limits.drop_to}) cannot pass through {closed}, on the way to "
                        f"the temp folder {tmp}, where each submission's work folder is made: point TMPDIR at a "
                        f"folder every user can enter (as /tmp is), or open that one (chmod o+x {closed})")
    try:
        with tempfile.TemporaryDirectory(prefix="kit-jailcheck-") as d, seccomp.descriptor() as refused:
            os.chmod(d, 0o755)
            jail.prepare(Path(d))
            r = subprocess.run(jail.command(["true"], Path(d), "check", seccomp_fd=refused), capture_output=True,
                               text=True, timeout=60, preexec_fn=jail.limits.drop_privileges, pass_fds=(refused,))
    except (OSError, subprocess.SubprocessError) as e:
        raise JailError(f"bubblewrap could not start as the jail's user ({e}): run the grader as root or as an "
                        f"ordinary user with unprivileged user namespaces, or pass --no-isolation for debugging "
                        f"only") from None
    if r.returncode != 0:
        why = (r.stderr.strip().splitlines() or [f"exit {r.returncode}"])[-1]
        raise JailError(f"bubblewrap cannot make its namespaces here ({why}): allow unprivileged user "
                        f"namespaces (sysctl kernel.unprivileged_userns_clone=1; in Docker, a seccomp profile "
                        f"that allows them), or pass --no-isolation for debugging only")
