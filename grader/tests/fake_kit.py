"""The fake kit for batch tests: builds that read a scenario from kernel.cu, and a judge and a runner
(fake_harness.py) that replay that scenario's records, taken on an NVIDIA H200. No nvcc, no GPU.

  patches(folder, calls) -> {(object, name): value}    what a test sets (with monkeypatch)
  python3 fake_kit.py ARGS...                          the grader's CLI with the patches in force (for
                                                       jobs a test starts as other processes: Slurm's)
"""
import json
import stat
import sys
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parent))  # the grader package, when run as a script

from grader import build, grade, gpu as gpu_mod  # noqa: E402
from grader.build import Forbidden  # noqa: E402
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
    # The checker finds the scenario in the folder it runs in (the submission's work folder).
    checker.write_text("#!/bin/sh\n"
                       f"KIT_FAKE_FIXTURE={SCENARIOS}/$(cat \"$PWD/scenario\")\n"
                       "export KIT_FAKE_FIXTURE\n"
                       f"exec {sys.executable} {FAKE} checker \"$@\"\n")
    checker.chmod(0o755)

    def compile_submission(src, work, arch, timeout):
        text = Path(src).read_text()
        calls["build"].append(str(src))
        if "CRASH_THE_GRADER" in text:
            raise RuntimeError("something in the kit broke")
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

    real_gpu_stages = grade.gpu_stages

    def gpu_stages(task, work, gpu, opts, result):
        calls["gpu"].append(result.submission)
        return real_gpu_stages(task, work, gpu, opts, result)

    info = GpuInfo(**json.loads((FIXTURES / "gpu_h200.json").read_text()))
    return {(build, "build_harness"): lambda task, arch, log: None,
            (build, "compile_submission"): compile_submission,
            (build, "scan_forbidden"): scan_forbidden,
            (build, "link_runner"): link_runner,
            (build, "checker_path"): lambda task, arch: checker,
            (grade, "gpu_stages"): gpu_stages,
            (gpu_mod, "detect"): lambda index=0: info}


if __name__ == "__main__":
    import tempfile
    from grader import cli
    folder = Path(tempfile.mkdtemp(prefix="kit-fake-"))
    for (obj, name), value in patches(folder, {"gpu": [], "build": []}).items():
        setattr(obj, name, value)
    sys.exit(cli.main(sys.argv[1:]))
