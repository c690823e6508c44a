"""`make test`'s own set-up (tools/test.sh) on a machine without network: where the system Python
has no pytest and no venv module, the wheels folder the README says how to make is used as it is.
The script runs in a copy of the kit with stand-ins for nvcc, make, apt-get and pytest."""
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from grader import tasks


def _kit(tmp_path: Path, with_wheels: bool) -> tuple:
    kit = tmp_path / "kit"
    (kit / "tools").mkdir(parents=True)
    shutil.copy(tasks.ROOT / "tools" / "test.sh", kit / "tools" / "test.sh")
    if with_wheels:
        (kit / "wheels").mkdir()
        with zipfile.ZipFile(kit / "wheels" / "pytest-99.0-py3-none-any.whl", "w") as w:  # a stand-in pytest
            w.writestr("pytest/__init__.py", "")
            w.writestr("pytest/__main__.py", "import sys\nprint('stand-in pytest ran:', ' '.join(sys.argv[1:3]))\n")
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    stubs = {
        "nvcc": "exit 0",
        "make": "exit 0",
        "apt-get": "exit 1",  # no network
        # The system Python, without pytest and without the venv module (no python3-venv).
        "python3": (f'case "$*" in *"import ensurepip"*|*"-m venv"*) exit 1;; esac\n'
                    f'exec {sys.executable} -S "$@"'),
    }
    for name, body in stubs.items():
        (bin_ / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_ / name).chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "PYTHONPATH", "KIT_WHEELS", "VIRTUAL_ENV")}
    env["PATH"] = f"{bin_}:/usr/bin:/bin"
    return kit, env


def _test_sh(kit: Path, env: dict, timeout: float = 120) -> subprocess.CompletedProcess:
    """tools/test.sh in the kit's copy, as `make test` runs it."""
    return subprocess.run(["sh", "tools/test.sh"], cwd=kit, env=env, capture_output=True, text=True, timeout=timeout)


def _with_make(tmp_path: Path, script: str) -> subprocess.CompletedProcess:
    """tools/test.sh with the wheels folder and a stand-in make (the C++ tests) that runs `script`."""
    kit, env = _kit(tmp_path, with_wheels=True)
    (tmp_path / "bin" / "make").write_text(f"#!/bin/sh\n{script}\n")
    return _test_sh(kit, env)


def test_without_network_or_a_venv_module_make_test_runs_pytest_from_the_unpacked_wheels(tmp_path):
    kit, env = _kit(tmp_path, with_wheels=True)
    r = _test_sh(kit, env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "python3 -m venv is not available here (apt-get install python3-venv)" in r.stdout
    assert "stand-in pytest ran: grader/tests slides_examples/tests" in r.stdout
    assert "pytest-xdist is not installed: the CPU tests run in one process" in r.stdout
    assert (kit / ".venv" / "wheels" / "pytest" / "__main__.py").is_file()


def test_without_network_venv_module_or_wheels_make_test_stops_with_one_line_saying_what_to_do(tmp_path):
    kit, env = _kit(tmp_path, with_wheels=False)
    r = _test_sh(kit, env)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines()[-1] == "test: python3 -m venv failed: install python3-venv"


def _wheel(folder: Path, name: str, main: str = "") -> None:
    """A stand-in package `name` 99.0 as a wheel pip installs."""
    info = f"{name}-99.0.dist-info"
    with zipfile.ZipFile(folder / f"{name}-99.0-py3-none-any.whl", "w") as w:
        w.writestr(f"{name}/__init__.py", "")
        if main:
            w.writestr(f"{name}/__main__.py", main)
        w.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: 99.0\n")
        w.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        w.writestr(f"{info}/RECORD", "")


def test_a_wheel_folder_without_one_extra_installs_the_others_and_names_only_the_missing_one(tmp_path):
    kit, env = _kit(tmp_path, with_wheels=False)
    (kit / "grader").mkdir()
    for f in ("requirements-test.txt", "requirements-handouts.txt"):
        shutil.copy(tasks.ROOT / "grader" / f, kit / "grader" / f)
    (kit / "wheels").mkdir()
    _wheel(kit / "wheels", "pytest", "import sys\nprint('stand-in pytest ran:', ' '.join(sys.argv[1:3]))\n")
    for name in ("jinja2", "markdown", "pypdf", "pygments"):  # copydetect's wheel is missing
        _wheel(kit / "wheels", name)
    # The system Python, without pytest but with the venv module.
    (tmp_path / "bin" / "python3").write_text(f'#!/bin/sh\nexec {sys.executable} -S "$@"\n')
    r = _test_sh(kit, env, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "stand-in pytest ran: grader/tests slides_examples/tests" in r.stdout
    assert ("SKIPPED: the tests that need copydetect: not installed and not installable here "
            "(no network, no wheels in wheels/)") in r.stdout


@pytest.mark.skipif(os.geteuid() != 0, reason="tools/test.sh installs packages only as root")
def test_without_network_apt_get_is_asked_once_not_once_per_missing_package(tmp_path):
    """Each apt-get that cannot reach its sources waits seconds for its answer: on a GPU machine
    without network, asking again for chromium, poppler-utils and Slurm cost 21 s of `make test`.
    Once `apt-get update` has failed, the packages after are reported as missing without a try."""
    kit, env = _kit(tmp_path, with_wheels=True)
    log = tmp_path / "apt.log"
    (tmp_path / "bin" / "apt-get").write_text(f'#!/bin/sh\necho "$*" >> {log}\nexit 1\n')
    system = tmp_path / "system"  # the few tools the script uses, without chromium, bwrap, pdftotext or Slurm
    system.mkdir()
    for tool in ("sh", "dirname", "id", "sed", "nproc", "cat", "env", "mkdir", "rm"):
        (system / tool).symlink_to(shutil.which(tool))
    env["PATH"] = f"{tmp_path / 'bin'}:{system}"
    r = _test_sh(kit, env)
    assert r.returncode == 0, r.stdout + r.stderr
    asked = log.read_text().splitlines()
    assert [a.split()[0] for a in asked] == ["install", "update"], asked
    for package in ("chromium", "bubblewrap", "poppler-utils", "slurm-wlm"):
        assert f"is not installed and could not be installed here (apt-get install {package})" in r.stdout, r.stdout


needs_catch2 = pytest.mark.skipif(not Path("/usr/include/catch2/catch.hpp").is_file(),
                                  reason="needs Catch2's header (apt-get install catch2): without it the C++ tests "
                                         "are skipped")


@needs_catch2
def test_the_cpp_tests_build_beside_the_python_set_up_and_their_output_comes_before_pytest_starts(tmp_path):
    r = _with_make(tmp_path, "sleep 1\necho 'cpp_tests: all tests passed'")
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.index("cpp_tests: all tests passed") < r.stdout.index("stand-in pytest ran:"), r.stdout


@needs_catch2
def test_a_failing_cpp_test_stops_make_test_with_its_output_and_pytest_never_starts(tmp_path):
    r = _with_make(tmp_path, "echo 'cpp_tests: 1 test case failed'\nexit 3")
    assert r.returncode == 3, r.stdout + r.stderr
    assert "cpp_tests: 1 test case failed" in r.stdout
    assert r.stderr.strip().splitlines()[-1] == "test: the harness or the C++ host tests failed (exit 3, above)"
    assert "stand-in pytest ran" not in r.stdout


def _halves(tmp_path: Path, gpu_exit: int) -> subprocess.CompletedProcess:
    """tools/test.sh with a stand-in pytest that says which half it ran and exits `gpu_exit` for the
    GPU half, and a stand-in pytest-xdist."""
    kit, env = _kit(tmp_path, with_wheels=False)
    (kit / "wheels").mkdir()
    main = ("import sys, time\nargs = sys.argv[1:]\nhalf = args[args.index('-m') + 1]\n"
            "time.sleep(1 if half == 'gpu' else 0)\n"
            "print('stand-in pytest ran the', half, 'half with', ' '.join(a for a in args if a in ('-n', '--dist')))\n"
            f"sys.exit({gpu_exit} if half == 'gpu' else 0)\n")
    with zipfile.ZipFile(kit / "wheels" / "pytest-99.0-py3-none-any.whl", "w") as w:
        w.writestr("pytest/__init__.py", "")
        w.writestr("pytest/__main__.py", main)
    with zipfile.ZipFile(kit / "wheels" / "xdist-99.0-py3-none-any.whl", "w") as w:
        w.writestr("xdist/__init__.py", "")
    return _test_sh(kit, env)


def test_the_gpu_tests_run_beside_the_cpu_tests_on_workers_and_their_output_follows(tmp_path):
    r = _halves(tmp_path, gpu_exit=0)
    assert r.returncode == 0, r.stdout + r.stderr
    cpu, gpu = r.stdout.index("stand-in pytest ran the not gpu half with -n --dist"), \
        r.stdout.index("stand-in pytest ran the gpu half with")
    assert cpu < r.stdout.index("the GPU tests' output follows") < gpu, r.stdout


def test_a_failing_gpu_test_fails_make_test_though_every_cpu_test_passed(tmp_path):
    r = _halves(tmp_path, gpu_exit=1)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "test: CPU tests exit 0, GPU tests exit 1" in r.stdout
