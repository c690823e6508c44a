import pytest

import fake_kit as fake_kit_mod
import gpu_corpus
from grader import gpu


@pytest.fixture(scope="session")
def local_gpu():
    """The local GPU; GPU tests are skipped, with the reason, where there is none."""
    try:
        return gpu.detect()
    except gpu.NoGpu as e:
        pytest.skip(f"needs a CUDA GPU ({e})")


@pytest.fixture(scope="session")
def corpus(local_gpu, tmp_path_factory):
    """Every known submission of assignments/*/tests/ graded once, as one class in a batch (gpu_corpus.py)."""
    return gpu_corpus.grade_class(local_gpu, tmp_path_factory.mktemp("corpus"))


@pytest.fixture
def fake_kit(monkeypatch, tmp_path):
    """Replaces the nvcc builds and the harness with the replaying fake (fake_kit.py); returns the calls made."""
    calls = {"gpu": [], "build": []}
    for (obj, name), value in fake_kit_mod.patches(tmp_path, calls).items():
        monkeypatch.setattr(obj, name, value)
    return calls
