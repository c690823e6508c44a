"""Which libraries a jail shows, empties or hides: what a run needs (the libraries a probe and
libcuda load, and a tool's), the forbidden math libraries (FORBIDDEN_LIBS) the compile view shows as
/dev/null, and the folders of other copies of them it hides whole. Used by jail.py."""
from __future__ import annotations

import functools
import os
import subprocess
from pathlib import Path
from typing import Optional

_DRIVER_HELPERS = ("libnvidia-ptxjitcompiler.so", "libnvidia-gpucomp.so", "libnvidia-nvvm.so")
"""Libraries libcuda loads itself (PTX and LTO compilation at load time): driver parts, no math library."""

_SYSTEM_TOPS = ("/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32")
"""The top-level system folders beside /usr (links into it where /usr is merged)."""

_UNDER_SYSTEM = tuple(f"{top}/" for top in ("/usr",) + _SYSTEM_TOPS)
"""What a path under the system folders starts with."""


def runtime_libraries(probe: Optional[Path]) -> list:
    """The files a run jail binds: the libraries `probe` loads, libcuda.so.1 (loaded at run time by the
    CUDA runtime) with the libraries it loads, and the driver's helpers beside it. Each as found and as
    resolved, so that the loader's cache and the symlinks both lead somewhere."""
    found = set()
    cuda = _libcuda()
    if cuda:
        found.add(cuda)
    for exe in (probe, cuda):
        if exe:
            found.update(_ldd(exe))
    if cuda:
        real = Path(cuda).resolve()
        for helper in _DRIVER_HELPERS:
            found.update(str(p) for p in real.parent.glob(helper + "*"))
    out = set()
    for f in found:
        out.add(f)
        out.add(str(Path(f).resolve()))
    return sorted(p for p in out if os.path.isfile(p) and not _forbidden(p))


@functools.lru_cache(maxsize=None)
def tool_libraries(folder: Path) -> tuple:
    """The system libraries a tool's folder (compute-sanitizer's) needs: what each program or library
    directly inside it loads (ldd lists nothing for its other files), each as found and as resolved;
    the folder's own files are bound with the folder. Found once per folder."""
    found = set()
    for f in sorted(Path(folder).iterdir()):
        if f.is_file():
            found.update(lib for lib in _ldd(f) if not lib.startswith(f"{folder}/"))
    out = {p for f in found for p in (f, str(Path(f).resolve()))}
    return tuple(sorted(p for p in out if os.path.isfile(p) and not _forbidden(p)))


FORBIDDEN_LIBS = ("libcublas", "libcublasLt", "libcufft", "libcudnn", "libnccl", "libcusolver", "libcusparse",
                   "libcurand", "libnvblas")
"""Libraries no runner may load: never bound into a run jail, and reported by the judge as a forbidden
call (naming the library) if a runner outside a jail maps one."""


def library_files(toolkit: Path) -> list:
    """The files of the forbidden libraries (shared and static) that the compile view would show: in
    the toolkit's library folders and the system's, each as resolved, regular files only."""
    folders = [toolkit / "lib64", toolkit / "lib", *toolkit.glob("targets/*/lib"),
               *(Path(d) for d in ("/usr/lib", "/usr/lib64", "/usr/local/lib")), *Path("/usr/lib").glob("*-linux-gnu")]
    found = set()
    for d in folders:
        if d.is_dir():
            for f in d.iterdir():
                if _forbidden(f.name) and f.resolve().is_file() and f"{f.resolve()}/".startswith(
                        (*_UNDER_SYSTEM, f"{toolkit}/")):
                    found.add(str(f.resolve()))
    return sorted(found)


def library_trees(toolkit: Path, used: tuple = ()) -> list:
    """Folders under /usr that hold copies of the forbidden libraries beside those library_files
    empties: the other CUDA toolkits (/usr/local/cuda-*) and pip's NVIDIA wheels
    (python3*/{site,dist}-packages/nvidia). Hidden whole (Jail.hidden), but for a toolkit that holds
    the one in use or a tool a step runs (`used`: compute-sanitizer's and Nsight Compute's folders)."""
    mine = [f"{Path(p).resolve()}/" for p in (toolkit, *used) if p]
    found = set()
    for d in Path("/usr/local").glob("cuda*"):
        r = d.resolve()
        if r.is_dir() and not any(m.startswith(f"{r}/") or f"{r}/".startswith(m) for m in mine):
            found.add(str(r))
    for top in ("/usr/lib", "/usr/lib64", "/usr/local/lib"):
        found.update(str(d.resolve()) for d in Path(top).glob("python3*/*-packages/nvidia") if d.is_dir())
    return sorted(found)


def _forbidden(path: str) -> bool:
    return os.path.basename(path).startswith(FORBIDDEN_LIBS)


def _libcuda() -> Optional[str]:
    try:
        out = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        out = ""
    for line in out.splitlines():
        if line.strip().startswith("libcuda.so.1 ("):
            return line.rsplit("=>", 1)[-1].strip()
    for d in os.environ.get("LD_LIBRARY_PATH", "").split(":"):
        if d and os.path.isfile(os.path.join(d, "libcuda.so.1")):
            return os.path.join(d, "libcuda.so.1")
    return None


def _ldd(path) -> list:
    try:
        out = subprocess.run(["ldd", str(path)], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return []
    libs = []
    for line in out.splitlines():
        words = line.split()
        if "=>" in words and len(words) > words.index("=>") + 1 and words[words.index("=>") + 1].startswith("/"):
            libs.append(words[words.index("=>") + 1])
        elif words and words[0].startswith("/"):
            libs.append(words[0])  # the loader itself
    return libs
