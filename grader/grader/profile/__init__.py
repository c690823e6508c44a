"""Why a kernel is as fast as it is: an Nsight Compute profile of one call, read into the numbers a
student needs (per kernel: its share of the time, DRAM bandwidth and FLOP rate against the GPU's
peaks, arithmetic intensity, occupancy and what limits it, L2 hit rate, how well the global loads
use their sectors, the top warp stalls), a few sentences derived from them, and a roofline.

  ncu.py       the ncu command lines and its raw CSV read into Kernel records
  rules.py     the rules that turn the numbers into sentences (each tested both ways)
  roofline.py  the roofline picture (SVG)

The profile never takes part in a grade: it is taken after the grading, on a call of its own.
"""
from __future__ import annotations

from .rules import Peaks, flop_rate, hints, intensity
from .ncu import LAUNCHES, Kernel, merge, parse_raw_csv

__all__ = ["LAUNCHES", "Kernel", "Peaks", "hints", "merge", "parse_raw_csv", "table"]


def table(kernels: list, p: Peaks) -> list:
    """One row per kernel, the longest first: the numbers a report shows (None where unknown)."""
    total = sum(k.get("duration_ns") or 0 for k in kernels) or None
    rows = []
    for k in sorted(kernels, key=lambda k: -(k.get("duration_ns") or 0)):
        t, b, rate = k.get("duration_ns"), k.bytes, flop_rate(k, p)
        rows.append({
            "kernel": k.name,
            "launches": k.launches,
            "share_pct": 100 * t / total if t is not None and total else None,
            "ms": t / 1e6 if t is not None else None,
            "dram_gbs": b / k.seconds / 1e9 if b is not None and k.seconds else None,
            "dram_pct": k.get("dram_pct"),
            "gflops": rate / 1e9 if rate is not None else None,
            "flops_pct": 100 * rate / p.flops if rate is not None else None,
            "intensity": intensity(k, p),
            "occupancy_pct": k.get("achieved_occupancy_pct"),
            "theoretical_occupancy_pct": k.get("theoretical_occupancy_pct"),
            "l2_hit_pct": k.get("l2_hit_pct"),
            "tensor_pct": k.get("dmma_pct"),
            "mma_pct": k.get("mma_pct"),
            "ld_bytes_used_pct": k.ld_bytes_used_pct,
            "sectors_per_request": k.sectors_per_request,
            "top_stall": max(k.stalls, key=k.stalls.get) if k.stalls else None,
        })
    return rows
