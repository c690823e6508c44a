"""Building: the harness once per architecture (through the Makefile), then each submission's
kernel.cu compiled on its own, scanned for forbidden calls, and linked with the runner."""
from __future__ import annotations

import os
import re
import shutil
import struct
from dataclasses import dataclass
from pathlib import Path

from . import cpp_text, protocol, sandbox
from .jail import toolkit_root
from .libraries import FORBIDDEN_LIBS
from .tasks import ROOT, Task


class KitError(Exception):
    """The kit itself could not do its part (no nvcc, a harness that does not build)."""


@dataclass
class Forbidden:
    library: str
    """What is forbidden (cuBLAS, CUB device-wide algorithm, Thrust, run-time library loading)."""
    call: str
    """The call that was found, as the student would write it."""


_VERSION_NS = re.compile(r"::(?:THRUST|CUB)_\w+?(?:_NS)?::|::_V_\w+::")
# CUB's device-wide algorithms run kernels of their own (DeviceReduceKernel, DeviceScanKernel, ...),
# whose names stay in the object whatever the algorithm's class was renamed to with #define.
_CUB_KERNEL = re.compile(r"cub::(?:\w+::)*(Device\w*?)(?:SingleTile|Onesweep|Upsweep|Downsweep|Init|Histogram)?\w*Kernel\b")
_CUB_ALGORITHMS = (r"Reduce|SegmentedReduce|Scan|RadixSort|SegmentedRadixSort|MergeSort|SegmentedSort|Select|"
                   r"Partition|Histogram|RunLengthEncode|Spmv|AdjacentDifference|Copy|Memcpy|For|Transform|Find|TopK")
"""CUB's device-wide algorithms, by the name after "Device" (DeviceReduce, ...)."""
_CUB_DEVICE = re.compile(rf"cub::(?:\w+::)*(Device(?:{_CUB_ALGORITHMS}))")
_THRUST_CALL = re.compile(r"thrust::(?:\w+::)*?(\w+)(?=[<(])")
_THRUST_DETAIL = {"tag", "execution_policy", "get_stream", "stream", "detail", "system", "cuda_cub", "pointer",
                  "reference", "device_ptr", "operator", "allocator"}


def require_nvcc() -> str:
    nvcc = shutil.which("nvcc")
    if not nvcc:
        raise KitError("nvcc not found: install the CUDA Toolkit and put its bin/ folder on PATH")
    return nvcc


STUDENT_FLAGS = ["-std=c++17", "-O3"]
"""How a kernel.cu is compiled (with -arch and -I harness/include), the same for every student."""


def make(args: list, log: Path, timeout: float) -> sandbox.Run:
    """`make` in the kit's folder (the harness: kit code only)."""
    return sandbox.run(["make", "--no-print-directory", "-s", "-C", str(ROOT), *args], ROOT, log, timeout)


def _nvcc() -> str:
    """The toolkit's own nvcc (not a wrapper script on PATH, which a jail's view may not show)."""
    require_nvcc()
    return str(toolkit_root() / "bin" / "nvcc")


def build_harness(task: Task, arch: str, log: Path) -> None:
    """The checker and the runner's objects of one assignment, built once per architecture."""
    build_harnesses([task], arch, log)


def build_harnesses(tasks: list, arch: str, log: Path) -> None:
    """build_harness for several assignments at once, their files compiled in parallel (a batch's
    first step: one after the other, six assignments took 90 s of a fresh machine's time)."""
    require_nvcc()
    names = " ".join(t.name for t in tasks)
    run = make([f"-j{os.cpu_count() or 1}", "harness", f"A={names}", f"ARCH={arch}"], log, timeout=1800)
    if run.returncode != 0:
        raise KitError(f"the harness of {names} did not build (see {log}):\n{run.output}")


def runner_objects(task: Task, arch: str) -> list:
    """The runner's own objects, linked with a student's kernel.o (as `make harness` builds them)."""
    b = ROOT / "build" / arch
    return [b / task.name / "problem_runner.o", b / "harness" / "librunner.a"]


def probe_path(arch: str) -> Path:
    """A CUDA program built and linked as the runner is, that opens the GPU and runs one kernel."""
    return ROOT / "build" / arch / "harness" / "gpu_probe"


def checker_path(task: Task, arch: str) -> Path:
    """The assignment's checker, as `make harness` builds it."""
    return ROOT / "build" / arch / task.name / "checker"


def compile_submission(src: Path, workdir: Path, arch: str, timeout: float) -> tuple:
    """(ok, messages): kernel.cu compiled alone into workdir/kernel.o."""
    require_nvcc()
    dst = workdir / "kernel.cu"
    try:
        shutil.copyfile(src, dst)
    except OSError as e:
        return False, f"cannot read the submission {src}: {e.strerror}"
    include = sandbox.expose(ROOT / "harness" / "include")
    run = sandbox.run([_nvcc(), *STUDENT_FLAGS, f"-arch={arch}", f"-I{include}", "-c", "kernel.cu", "-o", "kernel.o"],
                      workdir, workdir / "build.log", timeout, view="compile")
    text = _clean(sandbox.tail(workdir / "build.log", 20000), workdir)
    if run.timed_out:
        if run.cpu_s is not None and run.cpu_s >= OWN_TIME_OUT * timeout:
            return False, f"the compiler did not finish within {timeout:.0f} s, {HAD_THE_CPU} {run.cpu_s:.0f} s of them"
        return False, f"the compiler did not finish within {timeout:.0f} s"
    return run.returncode == 0, text


HAD_THE_CPU = "having had the CPU for"
"""How a build time-out says the compiler was not starved: its cgroup used the CPU for OWN_TIME_OUT of its
time limit (a kernel.cu that includes itself twice per level, 40 levels deep, never compiles)."""
OWN_TIME_OUT = 0.9
"""The share of its time limit a compile must have had the CPU for before its time-out is the source's
error. Its steps run one after another, so that much means it would not finish alone either; half was
not enough: three idle-priority builds on two CPUs get two thirds of one each, and an honest file that
built alone in 3.7 s timed out beside two never-ending ones under a 4.9 s limit, charged at once."""
_SOURCE_ERROR = re.compile(r"^\S+\(\d+\): error\b|multiple definition of|undefined reference to|" + HAD_THE_CPU, re.M)
"""What only the source can cause: the compiler's diagnostic of one of its lines ("kernel.cu(11): error:
..."), a symbol the link finds defined twice or nowhere, or a compile that ran out of time with the CPU
to itself. Not a "catastrophic error" (a header that could not be opened), a tool that died, a fork that
failed or a starved compile's timeout: another program's load can cause those."""


def source_error(log: str) -> bool:
    """Whether a failed build's messages say the source itself is at fault (_SOURCE_ERROR): building it
    again, alone, would fail the same way."""
    return _SOURCE_ERROR.search(log) is not None


NM = "nm"
"""binutils' symbol lister. Its demangler (-C) parses names the submission chose (an asm label can be
any string), so it runs where the compiler does: in the jail's compile view, never as the TA."""
SYMBOLS_BYTES = 256 << 20
"""The most of nm's listing that is read: an object that lists more is refused, not half scanned."""
OBJECT_BYTES = 256 << 20
"""The largest kernel.o scanned: the scan reads it into the grader's own memory, outside every limit
of the jail (a student's `.space 1500000000` made 1.5 GB in two seconds). A kernel's is a few MB."""


class ScanError(Exception):
    """The object's symbols could not be listed in full: the submission goes no further."""


def list_symbols(obj: Path, timeout: float = 120) -> str:
    """`nm -C` of the object, run as the compiler is (in the jail, where there is one)."""
    nm = shutil.which(NM)
    if nm is None:
        raise KitError(f"{NM} (binutils) was not found: the scan for forbidden calls needs it (apt-get install binutils)")
    log = obj.parent / "symbols.txt"
    r = sandbox.run([nm, "-C", obj.name], obj.parent, log, timeout, view="compile", read_only=(Path(nm),))
    data = protocol.read_regular(log, SYMBOLS_BYTES + 1)
    text = data.decode(errors="replace")
    if r.timed_out:
        raise ScanError(f"listing the symbols of {obj.name} did not finish within {timeout:.0f} s")
    if r.returncode != 0:
        raise ScanError(f"the symbols of {obj.name} could not be listed (nm exited {r.returncode}: "
                        f"{sandbox.last_line(text)})")
    if len(data) > SYMBOLS_BYTES:
        raise ScanError(f"{obj.name} lists more than {SYMBOLS_BYTES >> 20} MiB of symbols")
    return text


def scan_forbidden(obj: Path) -> list:
    """Calls the assignments forbid, found in the object's symbols (undefined ones too: a library's
    function or the driver's loader of prebuilt GPU code called the ordinary way) and strings. The
    symbols decide; the source beside the object (kernel.cu) only helps to name Thrust calls.
    ScanError where the symbols cannot be listed in full, or the object is larger than OBJECT_BYTES."""
    try:
        size = obj.stat().st_size
    except OSError:
        size = 0
    if size > OBJECT_BYTES:
        raise ScanError(f"{obj.name} is {size / 2**20:,.0f} MiB, more than the {OBJECT_BYTES >> 20} MiB the grader reads")
    out = list_symbols(obj)
    found, seen = [], set()

    def add(library, call):
        if (library, call) not in seen:
            seen.add((library, call))
            found.append(Forbidden(library, call))

    data, sections = _elf(obj)
    for library, call in (_by_name(data, sections) + _by_registration(obj, data, sections)
                          + _by_macro(obj.with_suffix(".cu"))):
        add(library, call)
    for line in out.splitlines():
        parts = line.split(None, 2) if line[:1] != " " else ["", *line.split(None, 1)]
        if len(parts) < 3:
            continue
        kind, name = parts[1], _VERSION_NS.sub("::", parts[2])
        if m := _LOADER_SYMBOL.match(name):
            add("prebuilt GPU code loaded at run time", m.group(1))
        elif m := _LOOKUP_SYMBOL.match(name):
            add("a driver function looked up by name at run time", m.group(1))
        elif re.match(r"cublas\w*", name):
            add("cuBLAS", re.sub(r"_v2$", "", re.match(r"cublas\w*", name).group(0)))
        elif m := _CUB_DEVICE.search(name):
            add("CUB device-wide algorithm", f"cub::{m.group(1)}")
        elif m := _CUB_KERNEL.search(name):
            add("CUB device-wide algorithm", f"cub::{m.group(1)} (its kernel {m.group(0).rsplit('::', 1)[-1]})")
        elif "thrust::" in name and kind in "TtWw":
            calls = [c for c in _THRUST_CALL.findall(name) if c not in _THRUST_DETAIL and not c.startswith("_")]
            if calls:
                add("Thrust", f"thrust::{calls[0]}")
    if any(f.library == "Thrust" for f in found):
        # Thrust's algorithms are inlined at -O3 and leave only helper symbols (and the CUB kernels
        # they are built on): name the calls as the source wrote them.
        source = obj.with_suffix(".cu").read_text(errors="replace") if obj.with_suffix(".cu").exists() else ""
        calls = sorted(set(re.findall(r"thrust::(\w+)\s*[(<]", source)) - _THRUST_DETAIL - {"device_vector", "host_vector"})
        thrust = [Forbidden("Thrust", f"thrust::{c}") for c in calls] or [f for f in found if f.library == "Thrust"][:3]
        if "cub::Device" not in source and not any(f.library.endswith("#define") for f in found):
            found = [f for f in found if f.library != "CUB device-wide algorithm"]
        found = [f for f in found if f.library != "Thrust"] + thrust
    return found


_LOADER_NAMES = r"cu(?:Module|Library)Load\w*|cudaLibraryLoad\w*|cuLinkAdd\w*"
"""The driver's and the runtime's loaders of prebuilt GPU code: a symbol of the object where it calls
one the ordinary way, a string where it looks one up by name."""
_LOADERS = re.compile(rb"\b(" + _LOADER_NAMES.encode() + rb")")
_LOADER_SYMBOL = re.compile(r"(" + _LOADER_NAMES + r")$")
_LOOKUP_SYMBOL = re.compile(r"(cudaGetDriverEntryPoint\w*|cuGetProcAddress\w*)$")
"""The runtime's and the driver's lookups of a driver function by name, which a kernel has no need of:
with the name built at run time (no string names the loader), cuModuleLoadData was found and called."""
_BY_NAME = re.compile(rb"\b((?:" + b"|".join(lib.encode() for lib in FORBIDDEN_LIBS) + rb")\w*(?:\.so[.\d]*)?"
                      rb"|cublas[A-Z]\w*|cufft[A-Z]\w*|cudnn[A-Z]\w*)")
_RENAMED = re.compile(rf"^[ \t\f\v]*#[ \t\f\v]*define[ \t\f\v]+(Device(?:{_CUB_ALGORITHMS})\w*|cublas\w*|cufft\w*|cudnn\w*|cub|thrust)\b",
                      re.M)  # blanks, not \s: \s* crossed lines, and took quadratic time on a file of newlines


def _by_name(data: bytes, sections) -> list:
    """What the object asks for by name, as text: a prebuilt GPU binary loaded through the driver
    (cuModuleLoadData and the like, found with cuGetProcAddress or dlsym), or a forbidden library or
    function looked up at run time (dlopen("libcublas.so"), dlsym(h, "cublasDgemm_v2")). Only its
    read-only data (.rodata*: its string constants) is read, not its symbol table, where a call made
    the ordinary way (and found by the symbol scan) also names the function."""
    text = data if sections is None else b"\0".join(data[h.offset:h.offset + h.size] for h in sections
                                                     if h.name.startswith(b".rodata"))
    found = []
    for m in _LOADERS.finditer(text):
        found.append(("prebuilt GPU code loaded at run time", m.group(1).decode()))
    for m in _BY_NAME.finditer(text):
        found.append(("a forbidden library looked up by name at run time", m.group(1).decode()))
    return found


@dataclass
class _Section:
    name: bytes
    type: int
    offset: int
    size: int
    link: int


def _elf(obj: Path) -> tuple:
    """(the object's bytes, its section headers), read once for the scans of its strings and of its
    relocations; the headers are None where it is not a 64-bit ELF object (nvcc on Linux makes those)."""
    try:
        data = obj.read_bytes()
    except OSError:
        return b"", None
    if data[:4] != b"\x7fELF" or data[4] != 2:
        return data, None
    try:
        shoff, = struct.unpack_from("<Q", data, 0x28)
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
        headers = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
        names = headers[shstrndx]

        def name(h):
            start = names[4] + h[0]
            return data[start:data.index(b"\0", start)]
        return data, [_Section(name(h), h[1], h[4], h[5], h[6]) for h in headers]
    except (struct.error, ValueError, IndexError) as e:
        raise ScanError(f"the sections of {obj.name} could not be read ({e})")


_REGISTRATION = re.compile(rb"__cudaRegister(?:FatBinary|LinkedBinary)\w*")
"""The CUDA runtime's hooks that register a GPU binary with the process. nvcc's stub for kernel.cu
calls __cudaRegisterFatBinary and __cudaRegisterFatBinaryEnd once each, for the code nvcc compiled
(even where the file has no kernel); a second call registers an image the program carries, which
then launches as any kernel would."""


def _by_registration(obj: Path, data: bytes, sections) -> list:
    """A GPU binary registered by hand: more references to a registration hook in the object's
    relocations (calls, and addresses taken) than nvcc's own stub makes."""
    if sections is None:
        return []
    counts = {}
    try:
        for rela in (s for s in sections if s.type == 4):  # SHT_RELA, against the symbol table it links
            symtab = sections[rela.link]
            strtab = sections[symtab.link]
            for at in range(rela.offset, rela.offset + rela.size - 23, 24):
                info, = struct.unpack_from("<Q", data, at + 8)
                sym = symtab.offset + (info >> 32) * 24
                name_at = strtab.offset + struct.unpack_from("<I", data, sym)[0]
                name = data[name_at:data.index(b"\0", name_at)]
                if _REGISTRATION.fullmatch(name):
                    counts[name] = counts.get(name, 0) + 1
    except (struct.error, ValueError, IndexError) as e:
        raise ScanError(f"the relocations of {obj.name} could not be read ({e})")
    return [("prebuilt GPU code registered by hand", name.decode()) for name, n in sorted(counts.items()) if n > 1]


def _by_macro(source: Path) -> list:
    """#define directives that rename a library's identifier (`#define DeviceReduce DevR` before
    including CUB compiles CUB's device-wide reduction under another name), read as the preprocessor
    reads them (cpp_text.as_preprocessed: any line end, a byte-order mark, lines joined, comments
    taken for a space but not inside a string) and the digraph %: for # (`%:define cub kub`,
    `#/**/define cub kub`, `#def\\<newline>ine cub kub`, a "/*" string before the line and a "*/"
    string after it: each renames the namespace of all of CUB, which no symbol then names)."""
    try:
        text = source.read_text(errors="replace")
    except OSError:
        return []
    text = cpp_text.as_preprocessed(text).replace("%:", "#")
    return [("a library identifier renamed with #define", f"#define {m.group(1)}") for m in _RENAMED.finditer(text)]


def link_runner(task: Task, workdir: Path, arch: str, timeout: float) -> tuple:
    """(ok, messages): the student's object linked with the runner into workdir/runner."""
    objects = [sandbox.expose(p) for p in runner_objects(task, arch)]
    run = sandbox.run([_nvcc(), f"-arch={arch}", "kernel.o", *objects, "-o", "runner"], workdir, workdir / "link.log",
                      timeout, view="compile", read_only=tuple(objects))
    text = _clean(sandbox.tail(workdir / "link.log", 20000), workdir)
    if run.returncode != 0 and "undefined reference" in text:
        entry = task.entry_point.split("(")[0].split()[-1]
        if entry in text:
            text = f"kernel.cu must define the entry point `{task.entry_point}` (exactly this signature)\n" + text
    return run.returncode == 0, text


def _clean(text: str, workdir: Path) -> str:
    """Compiler output as a student reads it: their file is kernel.cu, make's noise removed."""
    lines = []
    for line in text.replace(str(workdir) + "/", "").splitlines():
        if line.startswith(("make:", "make[", "nvcc -")) or "Error 1" in line:
            continue
        lines.append(line)
    return "\n".join(lines).strip()
