"""Which GPU is here, and what its physical peaks are.

The device is queried through the CUDA driver library (libcuda) with ctypes: nothing to build, and
on a machine without an NVIDIA driver or GPU the answer is a clear NoGpu instead of a crash.
"""
from __future__ import annotations

import ctypes
import json
import os
from pathlib import Path

from .results import GpuInfo
from .tasks import ROOT


class NoGpu(Exception):
    """No CUDA GPU can be used here; the message says why in one line."""


# CUdevice_attribute values from cuda.h.
_ATTR = {"clock_khz": 13, "sm_count": 16, "mem_clock_khz": 36, "bus_width_bits": 37, "l2_bytes": 38,
         "cc_major": 75, "cc_minor": 76}


def detect(index: int = 0) -> GpuInfo:
    """GPU `index` (in PCI order, as nvidia-smi numbers them) as the driver sees it; raises NoGpu."""
    os.environ.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")  # read by libcuda when it starts
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        raise NoGpu("no CUDA GPU: the NVIDIA driver (libcuda.so.1) is not installed on this machine") from None
    rc = cuda.cuInit(0)
    count = ctypes.c_int(0)
    if rc != 0 or cuda.cuDeviceGetCount(ctypes.byref(count)) != 0 or count.value == 0:
        raise NoGpu(f"no CUDA GPU: the driver found no usable device (cuInit returned {rc})")
    if not 0 <= index < count.value:
        raise NoGpu(f"no GPU {index}: this machine has {count.value} (0 to {count.value - 1})")
    dev = ctypes.c_int()
    cuda.cuDeviceGet(ctypes.byref(dev), index)
    name = ctypes.create_string_buffer(256)
    cuda.cuDeviceGetName(name, 256, dev)
    vals = {}
    for key, attr in _ATTR.items():
        v = ctypes.c_int(0)
        cuda.cuDeviceGetAttribute(ctypes.byref(v), attr, dev)
        vals[key] = v.value
    drv = ctypes.c_int(0)
    cuda.cuDriverGetVersion(ctypes.byref(drv))
    total = ctypes.c_size_t(0)
    total_mem = getattr(cuda, "cuDeviceTotalMem_v2", None)
    if total_mem is None or total_mem(ctypes.byref(total), dev) != 0:
        total.value = 0
    info = GpuInfo(
        name=name.value.decode(errors="replace"),
        arch=f"sm_{vals['cc_major']}{vals['cc_minor']}",
        sm_count=vals["sm_count"], l2_bytes=vals["l2_bytes"], clock_khz=vals["clock_khz"],
        mem_clock_khz=vals["mem_clock_khz"], bus_width_bits=vals["bus_width_bits"],
        driver=f"{drv.value // 1000}.{drv.value % 1000 // 10}",
        count=count.value, memory_bytes=total.value,
    )
    info.model = model_of(info.name)
    return info


def arch_or_default() -> str:
    """The local GPU's architecture, or sm_90 where there is none (what CI compiles for)."""
    try:
        return detect().arch
    except NoGpu:
        return "sm_90"


def table(root: Path = ROOT) -> dict:
    return json.loads((root / "assignments" / "gpus.json").read_text())["gpus"]


def model_of(name: str, root: Path = ROOT):
    """The model key in assignments/gpus.json for a device name, or None."""
    for model, entry in table(root).items():
        if name in entry["names"]:
            return model
    return None


# FP64 and FP32 FLOPs per clock per multiprocessor, counting tensor cores, by compute capability:
# an upper bound for GPUs missing from the table, so that no real rate is called impossible.
_FLOP_PER_CLOCK_PER_SM = {(9, 0): (512, 512), (8, 0): (256, 256), (7, 0): (128, 256)}


def peak(info: GpuInfo, kind: str, root: Path = ROOT) -> tuple:
    """(peak, where it came from) for kind fp64 / fp32 (GFLOP/s) or dram (GB/s)."""
    if info.model:
        entry = table(root)[info.model]
        value = entry[kind] * (1000.0 if kind != "dram" else 1.0)
        return value, f"{info.model} datasheet"
    if kind == "dram":
        # Double data rate: two transfers per memory clock on the full bus width.
        gbs = 2.0 * info.mem_clock_khz * 1e3 * info.bus_width_bits / 8 / 1e9
        return gbs, "estimated from the memory clock and bus width"
    major, minor = int(info.arch[3:-1]), int(info.arch[-1])
    fp64, fp32 = _FLOP_PER_CLOCK_PER_SM.get((major, minor), (256, 512))
    per_clock = fp64 if kind == "fp64" else fp32
    return per_clock * info.sm_count * info.clock_khz * 1e3 / 1e9, "estimated from the clock and multiprocessors"
