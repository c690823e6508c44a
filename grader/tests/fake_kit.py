"""The fake kit for batch tests: builds that read a scenario from kernel.cu, and a judge and a runner
(fake_harness.py) that replay that scenario's records, taken on an NVIDIA H200. No nvcc, no GPU.

  patches(folder, calls) -> {(object, name): value}    what a test sets (the fixture fake_kit in conftest.py)
  args, make_class, read_gradebook                     a batch's arguments, a class of five, its gradebook
  python3 fake_kit.py ARGS...                          the grader's CLI with the patches in force (for
                                                       jobs a test starts as other processes: Slurm's)
"""
import csv
import io
import json
import stat
import sys
import tarfile
import zipfile
from pathlib import Path
from types import SimpleNamespace

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parent))  # the grader package, when run as a script

from grader import build, grade, gpu as gpu_mod  # noqa: E402
from grader.build import Forbidden  # noqa: E402
from grader.limits import DiskLow  # noqa: E402
from grader.results import GpuInfo  # noqa: E402

FIXTURES = HERE / "fixtures"
FAKE = HERE / "fake_harness.py"
SCENARIOS = FIXTURES / "batch" / "trmm"
ENTRY = "void trmm(int n, const double* A, double* B) { }\n"


def kernel(scenario: str) -> str:
    """A kernel.cu the fake build recognises: its scenario names the recorded behaviour."""
    return f"// scenario: {scenario}\n{ENTRY}"


def _wrapper(path: Path, role: str, scenario_from: str) -> None:
    path.write_text("#!/bin/sh\n"
                    f"KIT_FAKE_FIXTURE={SCENARIOS}/$(cat \"{scenario_from}\")\n"
                    "export KIT_FAKE_FIXTURE\n"
                    f"exec {sys.executable} {FAKE} {role} \"$@\"\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


def _scenario(text: str) -> str:
    for line in text.splitlines():
        if line.startswith("// scenario:"):
            return line.split(":", 1)[1].strip()
    return "reference"


def patches(folder: Path, calls: dict) -> dict:
    """{(object, attribute): replacement}: the builds, the checker and the GPU replaced by the fake."""
    checker = Path(folder) / "fake-checker"
    # The checker finds the scenario in the folder it runs in (the submission's work folder), or, in
    # the folder of the hidden cases, through the runner copied there (which names the work folder's).
    _wrapper(checker, "checker", "$([ -f \"$PWD/scenario\" ] && echo \"$PWD/scenario\" || "
                                 "sed -n 's/.*cat \"\\(.*\\)\").*/\\1/p' \"$PWD/runner\")")

    def compile_submission(src, work, arch, timeout):
        text = Path(src).read_text()
        calls["build"].append(str(src))
        if "CRASH_THE_GRADER" in text:
            raise RuntimeError("something in the kit broke")
        if "DISK_LOW" in text:  # as sandbox.Proc finds a disk below the jail's reserve
            raise DiskLow(f"the disk holding {work} has less than 1 GiB free, which the jail keeps free")
        (work / "kernel.cu").write_text(text)
        (work / "scenario").write_text(_scenario(text))
        if "COMPILE_ERROR" in text:
            return False, 'kernel.cu(3): error: identifier "Bold" is undefined'
        return True, ""

    def scan_forbidden(obj):
        # A call, as the real scan sees it in the object; a mention in a comment (the reference's) is not one.
        return [Forbidden("cuBLAS", "cublasDtrmm")] if "cublasDtrmm(" in (obj.parent / "kernel.cu").read_text() else []

    def link_runner(task, work, arch, timeout):
        if (work / "scenario").read_text() == "exit0":
            (work / "runner").write_text("#!/bin/sh\nexit 0\n")
            (work / "runner").chmod(0o755)
        else:
            _wrapper(work / "runner", "runner", work / "scenario")
        return True, ""

    real_check_stages = grade.check_stages

    def check_stages(task, work, gpu, opts, result):
        calls["gpu"].append(result.submission)
        return real_check_stages(task, work, gpu, opts, result)

    info = GpuInfo(**json.loads((FIXTURES / "gpu_h200.json").read_text()))
    return {(build, "build_harness"): lambda task, arch, log: None,
            (build, "build_harnesses"): lambda tasks, arch, log: None,
            (build, "compile_submission"): compile_submission,
            (build, "scan_forbidden"): scan_forbidden,
            (build, "link_runner"): link_runner,
            (build, "checker_path"): lambda task, arch: checker,
            (grade, "check_stages"): check_stages,
            (gpu_mod, "detect"): lambda index=0: info}


# ---------------------------------------------------------------------------------------------
# A class for the batch tests.

def args(subs: Path, out: Path, *extra) -> SimpleNamespace:
    ns = SimpleNamespace(submissions=subs, out=out, jobs=2, assignments=["trmm"], regrade=None, regrade_all=False,
                         timed_runs=None, no_reference=True, no_isolation=True, memory_gib=16,
                         checks_per_gpu=1)  # one submission on the GPU at a time: each graded once
    for k, v in extra:
        setattr(ns, k, v)
    return ns


def correct_class(root: Path, students) -> Path:
    """A class folder where each of `students` (names, or a count: s0, s1, ...) hands in trmm's reference."""
    names = [f"s{i}" for i in range(students)] if isinstance(students, int) else students
    for who in names:
        (root / who / "trmm").mkdir(parents=True)
        (root / who / "trmm" / "kernel.cu").write_text(kernel("reference"))
    return root


def make_class(root: Path) -> Path:
    """Five entries in as many layouts, one of them empty."""
    subs = root / "subs"
    (subs / "alice" / "trmm").mkdir(parents=True)
    (subs / "alice" / "trmm" / "kernel.cu").write_text(kernel("reference"))
    with zipfile.ZipFile(subs / "bob.zip", "w") as z:
        z.writestr("hw/trmm_kernel.cu", kernel("no_bounds_check"))
    with tarfile.open(subs / "carol.tar.gz", "w:gz") as t:
        data = kernel("skeleton").encode()
        info = tarfile.TarInfo("carol/kernel.cu")
        info.size = len(data)
        t.addfile(info, io.BytesIO(data))
    (subs / "dave").mkdir()
    (subs / "dave" / "notes.txt").write_text("I did not finish")
    (subs / "erin").mkdir()
    (subs / "erin" / "kernel.cu").write_text("// COMPILE_ERROR\n" + ENTRY)
    return subs


def read_gradebook(out: Path) -> list:
    return list(csv.DictReader((out / "gradebook.csv").open()))


if __name__ == "__main__":
    import shutil
    import tempfile
    from grader import cli
    folder = Path(tempfile.mkdtemp(prefix="kit-fake-"))
    try:
        for (obj, name), value in patches(folder, {"gpu": [], "build": []}).items():
            setattr(obj, name, value)
        code = cli.main(sys.argv[1:])
    finally:
        shutil.rmtree(folder, ignore_errors=True)  # the fake checker's folder: one per run, never left in /tmp
    sys.exit(code)
