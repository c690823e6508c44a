"""The examples themselves: they compile for sm_90 (no GPU needed), list their versions, refuse a
version that does not exist; and, where there is a GPU, every version passes its check."""

import fcntl
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent
FAMILIES = {"matmul": 4, "dgemm": 6, "conv1d": 3, "reduction": 9, "jacobi": 5}


def makefile_families():
    text = (EXAMPLES / "Makefile").read_text()
    return re.search(r"^FAMILIES := (.*)$", text, re.M).group(1).split()


BUILD = EXAMPLES.parent / "build" / "slides_examples" / "sm_90"
"""Where the examples' Makefile builds for sm_90 by default. Shared by the two halves of `make test`:
the CPU tests build there while the class is graded, and the GPU test after it finds the programs up
to date (it built them again, 15 s on an H200 with the GPU waiting, when each half had a folder of its
own)."""


@pytest.fixture(scope="session")
def built():
    """Every family built for sm_90 by the examples' own Makefile (make rebuilds what changed), one
    process at a time: the two halves of `make test` may get here together."""
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc not found: install the CUDA Toolkit to build the examples")
    BUILD.mkdir(parents=True, exist_ok=True)
    jobs = max(1, min(len(makefile_families()), len(os.sched_getaffinity(0))))  # one family per core
    with open(BUILD / ".make.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        p = subprocess.run(["make", "-C", str(EXAMPLES), f"-j{jobs}", "all", "ARCH=sm_90", f"BUILD={BUILD}"],
                           capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    return BUILD


def local_gpu_count():
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return 0
    p = subprocess.run([smi, "-L"], capture_output=True, text=True)
    return len([l for l in p.stdout.splitlines() if l.startswith("GPU ")]) if p.returncode == 0 else 0


def test_the_makefile_builds_exactly_the_five_families():
    assert makefile_families() == list(FAMILIES)
    for fam in FAMILIES:
        assert (EXAMPLES / f"{fam}.cu").exists()


def test_every_example_compiles_for_sm_90(built):
    for fam in FAMILIES:
        assert (built / fam).is_file(), f"{fam} was not built"


@pytest.mark.parametrize("fam", list(FAMILIES))
def test_every_program_lists_its_versions_without_a_gpu_and_its_docblock_explains_each(built, fam):
    p = subprocess.run([str(built / fam), "--list"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    numbers = [int(line.split("\t")[0]) for line in p.stdout.splitlines()]
    assert numbers == list(range(1, FAMILIES[fam] + 1))
    # The file's opening comment explains every version, as "//   vK  ...".
    source = (EXAMPLES / f"{fam}.cu").read_text()
    explained = sorted({int(k) for k in re.findall(r"^//\s+v(\d+)\s", source, re.M)})
    assert explained == numbers


def test_the_historic_last_warp_is_marked_as_an_aside_outside_the_progression(built):
    p = subprocess.run([str(built / "reduction"), "--list"], capture_output=True, text=True, timeout=60)
    asides = [l for l in p.stdout.splitlines() if l.endswith("(aside)")]
    assert len(asides) == 1 and "historic" in asides[0]


def test_a_version_that_does_not_exist_is_refused_with_the_valid_range(built):
    p = subprocess.run([str(built / "matmul"), "--version", "99"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 2
    assert "no version 99 (there are 1..4" in p.stderr


@pytest.mark.gpu
def test_every_version_passes_its_check_on_the_local_gpu(built, tmp_path):
    gpus = local_gpu_count()
    if gpus == 0:
        pytest.skip("needs a CUDA GPU (nvidia-smi lists none)")
    for fam in FAMILIES:
        js = tmp_path / f"{fam}.json"
        p = subprocess.run([str(built / fam), "--check-only", "--json", str(js)], capture_output=True,
                           text=True, timeout=600)
        assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
        for v in json.loads(js.read_text())["versions"]:
            if not v["in_progression"]:
                continue  # the historic race may or may not show
            if v["status"] == "skipped":
                assert gpus < 2 or "peer access" in v["note"], v
                continue
            assert v["status"] == "passed", f"{fam} v{v['version']}: {v['note']}"
