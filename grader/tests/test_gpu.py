"""gpu.py: device names to models, peaks, and the driver query, all without a GPU (the driver is
faked where a test needs one)."""
import ctypes

import pytest

from grader import gpu
from grader.results import GpuInfo

# What an H100 SXM reports: the attributes an estimate for an unknown GPU is computed from.
H100_ATTRS = dict(sm_count=132, clock_khz=1_980_000, mem_clock_khz=2_619_000, bus_width_bits=5120,
                  l2_bytes=50 << 20)


@pytest.mark.parametrize("name,model", [("NVIDIA H100 80GB HBM3", "H100 SXM"), ("NVIDIA H200", "H200"),
                                        ("NVIDIA H200 NVL", "H200"), ("Tesla T4", "T4")])
def test_a_device_name_maps_to_its_model_in_the_gpu_table(name, model):
    assert gpu.model_of(name) == model


@pytest.mark.parametrize("name", ["NVIDIA Future GPU 9000", "", "NVIDIA H200 "])
def test_an_unknown_device_name_has_no_model(name):
    assert gpu.model_of(name) is None


def test_every_name_in_the_gpu_table_belongs_to_exactly_one_model():
    names = [n for entry in gpu.table().values() for n in entry["names"]]
    assert len(names) == len(set(names))


def test_the_peaks_of_a_known_gpu_come_from_the_table_in_gflops_and_gbs():
    h200 = GpuInfo(name="NVIDIA H200", arch="sm_90", model="H200")
    assert gpu.peak(h200, "fp64") == (67000.0, "H200 datasheet")
    assert gpu.peak(h200, "dram") == (4800.0, "H200 datasheet")


@pytest.mark.parametrize("kind", ["fp64", "fp32", "dram"])
def test_the_peak_of_an_unknown_gpu_is_estimated_from_its_attributes(kind):
    unknown = GpuInfo(name="NVIDIA Future GPU 9000", arch="sm_90", model=None, **H100_ATTRS)
    value, source = gpu.peak(unknown, kind)
    assert value > 0
    assert "estimated" in source


@pytest.mark.parametrize("kind", ["fp64", "fp32", "dram"])
def test_an_estimated_peak_is_not_below_the_datasheet_so_no_real_rate_is_called_impossible(kind):
    """An H100 the table did not know: the estimate from its attributes must not undercut the
    datasheet, or a correct fast kernel would be an invalid measurement."""
    estimated, _ = gpu.peak(GpuInfo(name="?", arch="sm_90", model=None, **H100_ATTRS), kind)
    datasheet, _ = gpu.peak(GpuInfo(name="NVIDIA H100 80GB HBM3", arch="sm_90", model="H100 SXM"), kind)
    assert estimated >= datasheet * 0.99


@pytest.mark.parametrize("arch", ["sm_100", "sm_120", "sm_75"])
def test_the_peak_of_an_unknown_architecture_is_still_estimated(arch):
    value, source = gpu.peak(GpuInfo(name="?", arch=arch, model=None, **H100_ATTRS), "fp64")
    assert value > 0 and "estimated" in source


def test_detect_raises_no_gpu_with_one_line_when_libcuda_cannot_be_loaded(monkeypatch):
    def no_driver(*args, **kwargs):
        raise OSError("libcuda.so.1: cannot open shared object file: No such file or directory")
    monkeypatch.setattr(ctypes, "CDLL", no_driver)
    with pytest.raises(gpu.NoGpu) as e:
        gpu.detect()
    assert "\n" not in str(e.value)
    assert "libcuda.so.1" in str(e.value)


def test_detect_on_this_machine_raises_no_gpu_or_returns_a_gpu_but_never_crashes():
    try:
        info = gpu.detect()
    except gpu.NoGpu as e:
        assert str(e) and "\n" not in str(e)
    else:
        assert info.name and info.arch.startswith("sm_") and info.sm_count > 0


class FakeDriver:
    """Enough of libcuda for detect(): one device with these properties, or an init failure."""

    def __init__(self, init_rc=0, count=1, name=b"NVIDIA H100 80GB HBM3", attrs=None, version=12080):
        self.init_rc, self.count, self.name, self.version = init_rc, count, name, version
        self.attrs = attrs or {}

    def cuInit(self, flags):
        return self.init_rc

    def cuDeviceGetCount(self, ref):
        ref._obj.value = self.count
        return 0

    def cuDeviceGet(self, ref, ordinal):
        ref._obj.value = ordinal
        return 0

    def cuDeviceGetName(self, buf, size, dev):
        buf.value = self.name
        return 0

    def cuDeviceGetAttribute(self, ref, attr, dev):
        ref._obj.value = self.attrs.get(attr, 0)
        return 0

    def cuDriverGetVersion(self, ref):
        ref._obj.value = self.version
        return 0


def fake_libcuda(monkeypatch, driver):
    def cdll(name, *args, **kwargs):
        assert name == "libcuda.so.1"
        return driver
    monkeypatch.setattr(ctypes, "CDLL", cdll)


def test_detect_raises_no_gpu_when_the_driver_cannot_initialise(monkeypatch):
    fake_libcuda(monkeypatch, FakeDriver(init_rc=100))  # CUDA_ERROR_NO_DEVICE
    with pytest.raises(gpu.NoGpu, match="cuInit returned 100"):
        gpu.detect()


def test_detect_raises_no_gpu_when_the_driver_sees_no_device(monkeypatch):
    fake_libcuda(monkeypatch, FakeDriver(count=0))
    with pytest.raises(gpu.NoGpu, match="no usable device"):
        gpu.detect()


def test_detect_reads_the_name_architecture_attributes_and_model_from_the_driver(monkeypatch):
    a = gpu._ATTR
    fake_libcuda(monkeypatch, FakeDriver(attrs={a["cc_major"]: 9, a["cc_minor"]: 0, a["sm_count"]: 132,
                                                a["clock_khz"]: 1_980_000, a["l2_bytes"]: 50 << 20}))
    info = gpu.detect()
    assert info.name == "NVIDIA H100 80GB HBM3"
    assert info.arch == "sm_90"
    assert info.model == "H100 SXM"
    assert (info.sm_count, info.clock_khz, info.l2_bytes) == (132, 1_980_000, 50 << 20)
    assert info.driver == "12.8"


def test_arch_or_default_is_sm_90_without_a_gpu(monkeypatch):
    def no_driver(*args, **kwargs):
        raise OSError("no libcuda")
    monkeypatch.setattr(ctypes, "CDLL", no_driver)
    assert gpu.arch_or_default() == "sm_90"


def test_arch_or_default_is_the_local_gpus_architecture_when_there_is_one(monkeypatch):
    a = gpu._ATTR
    fake_libcuda(monkeypatch, FakeDriver(name=b"NVIDIA A100-SXM4-80GB", attrs={a["cc_major"]: 8, a["cc_minor"]: 0}))
    assert gpu.arch_or_default() == "sm_80"
