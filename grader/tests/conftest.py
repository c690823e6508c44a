"""Shared fixtures. The GPU tests run after the others; where one of them needs the known corpus (a
class of some 70 submissions, graded for minutes on the GPU), that class is graded from the end of
collection on, on its own thread, while the CPU tests run. No GPU test starts before it is over, so
nothing else uses the GPU while it is timed."""
import os
import signal
import tempfile
import threading
from pathlib import Path

import pytest

import fake_kit as fake_kit_mod
import gpu_corpus
from grader import gpu, protocol
from grader.batch.gpus import split_cpus
from jail_box import Box, small_limits

_background = None  # gpu_corpus.Background, where the session's tests need the corpus
_ALL_CPUS = os.sched_getaffinity(0)
_gpu_cpus = _ALL_CPUS  # where the GPU tests run: the timing CPUs when the CPU tests may run beside them


def _interrupted(signum, frame):
    raise KeyboardInterrupt


def pytest_configure(config):
    # Ended by SIGTERM (make test ends the GPU half so when it is stopped): as on Ctrl-C, the session
    # finishes and stops the corpus's batch rather than leave it grading.
    if threading.current_thread() is threading.main_thread():  # not in a pytest-xdist worker's thread
        signal.signal(signal.SIGTERM, _interrupted)
    config.addinivalue_line("markers", "gpu: uses the local GPU without the local_gpu fixture (runs with the GPU "
                                       "tests, after the others)")


def _on_gpu(item) -> bool:
    return "local_gpu" in item.fixturenames or item.get_closest_marker("gpu") is not None


def pytest_itemcollected(item):
    """Every GPU test carries the `gpu` mark, so `-m gpu` and `-m "not gpu"` split the suite in two."""
    if _on_gpu(item) and item.get_closest_marker("gpu") is None:
        item.add_marker("gpu")


def _halves(config) -> bool:
    """Whether this process runs one half of the suite (`-m gpu` or `-m "not gpu"`, as tools/test.sh
    runs them, side by side) and the other half may be running beside it."""
    return config.getoption("markexpr", "").replace(" ", "") in ("gpu", "notgpu")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session, config, items):
    global _background, _gpu_cpus
    items.sort(key=_on_gpu)  # stable: each group keeps its order
    if config.option.collectonly:
        return
    needs_corpus = any("corpus" in i.fixturenames for i in items)
    cpu_half = _halves(config) and not any(_on_gpu(i) for i in items)
    if not (needs_corpus or cpu_half):
        return
    try:
        info = gpu.detect()
    except gpu.NoGpu:
        return  # the GPU tests are skipped, with the reason (local_gpu)
    # The CPU tests run on the CPUs a batch gives its builds and checks: the class's timings, and the
    # GPU tests' after it, have the others to themselves, as in a TA's batch.
    shared, timing = split_cpus(_ALL_CPUS, list(range(info.count or 1)))
    if timing and _halves(config):
        _gpu_cpus = set(timing[0])
    if needs_corpus:
        _background = gpu_corpus.Background(info, Path(tempfile.mkdtemp(prefix="corpus-")))
    if shared:  # this thread only: the class's was started already
        os.sched_setaffinity(0, shared)


def pytest_terminal_summary(terminalreporter, exitstatus):
    if _background is not None and _background.timeline():
        terminalreporter.write_line(_background.timeline())
    if _background is not None and exitstatus != 0:
        terminalreporter.write_line(f"the known corpus's class, kept: {_background.root} (batch.log, out/records, "
                                    f"out/reports)")


def pytest_sessionfinish(session, exitstatus):
    if _background is not None:
        _background.stop()
        if exitstatus == 0:  # kept after a failure, for its batch.log and records
            protocol.clear(_background.root)


@pytest.fixture(scope="session")
def local_gpu():
    """The local GPU, once the corpus (if it is being graded) is done with it; GPU tests are skipped,
    with the reason, where there is none."""
    try:
        info = gpu.detect()
    except gpu.NoGpu as e:
        pytest.skip(f"needs a CUDA GPU ({e})")
    if _background is not None:
        _background.wait()
    os.sched_setaffinity(0, _gpu_cpus)  # the GPU tests have these CPUs to themselves
    return info


@pytest.fixture(scope="session")
def corpus(local_gpu, tmp_path_factory):
    """Every known submission of assignments/*/tests/ graded once, as one class in a batch (gpu_corpus.py)."""
    if _background is not None:
        return _background.result()
    return gpu_corpus.grade_class(local_gpu, tmp_path_factory.mktemp("corpus"))


@pytest.fixture
def fake_kit(monkeypatch, tmp_path):
    """Replaces the nvcc builds and the harness with the replaying fake (fake_kit.py); returns the calls made."""
    calls = {"gpu": [], "build": []}
    for (obj, name), value in fake_kit_mod.patches(tmp_path, calls).items():
        monkeypatch.setattr(obj, name, value)
    return calls


@pytest.fixture
def box(tmp_path):
    """A jail with small limits and one submission's work folder (jail_box.py); needs bubblewrap and gcc."""
    with Box(tmp_path, small_limits()) as b:
        yield b
