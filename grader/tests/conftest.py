import pytest

from grader import gpu


@pytest.fixture(scope="session")
def local_gpu():
    """The local GPU; GPU tests are skipped, with the reason, where there is none."""
    try:
        return gpu.detect()
    except gpu.NoGpu as e:
        pytest.skip(f"needs a CUDA GPU ({e})")
