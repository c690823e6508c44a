"""From a profile's numbers to a few sentences a student can act on.

Each rule looks at one kernel and says something only when its numbers leave no doubt; a rule whose
numbers the profile lacks says nothing. Advice that is wrong or vague is worse than none, so every
rule has a test on a kernel that triggers it and one that does not (tests/test_profile.py).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from .ncu import Kernel

MAX_HINTS = 3


@dataclass
class Peaks:
    """The GPU's roofs, in the units of the profile."""
    flops: float
    """FLOP/s of the assignment's precision (the larger of the vector and tensor-core rates)."""
    bandwidth: float
    """DRAM bytes per second."""
    sms: int
    """Multiprocessors."""
    precision: str = "fp64"
    """fp64 or fp32: which FLOPs count."""

    @property
    def ridge(self) -> float:
        """FLOP per byte where the two roofs meet."""
        return self.flops / self.bandwidth


def flops(k: Kernel, precision: str) -> Optional[float]:
    return k.flops64 if precision == "fp64" else k.flops32


def flop_rate(k: Kernel, precision: str) -> Optional[float]:
    """FLOP/s over the kernel's duration."""
    f, t = flops(k, precision), k.seconds
    return f / t if f is not None and t else None


def intensity(k: Kernel, precision: str) -> Optional[float]:
    """FLOP per DRAM byte."""
    f, b = flops(k, precision), k.bytes
    if f is None or not b:
        return None
    return f / b


# ---------------------------------------------------------------------------------------------
# The rules, most telling first.

def grid_too_small(k: Kernel, p: Peaks) -> Optional[str]:
    grid = k.get("grid_size")
    block = k.get("block_size")
    if grid is None or grid >= p.sms:
        return None
    return (f"{_short(k.name)} runs {grid:.0f} block{'s' if grid != 1 else ''} of {block:.0f} threads on "
            f"{p.sms} multiprocessors: most of the GPU has nothing to do; launch at least one block per "
            f"multiprocessor, and many threads each")


def uncoalesced(k: Kernel, p: Peaks) -> Optional[str]:
    used = k.get("ld_bytes_used_pct")
    per_request = k.sectors_per_request
    if used is not None:
        if used >= 50:
            return None
    elif per_request is None or per_request < 16:  # 8-byte loads by a whole warp take 8 sectors
        return None
    what = f"only {used:.0f}% of each 32-byte sector its global loads fetch is used" if used is not None \
        else f"its global loads fetch {per_request:.1f} sectors of 32 bytes per request (a warp's 8-byte loads need 8)"
    how = f" ({per_request:.1f} sectors per request)" if used is not None and per_request is not None else ""
    return (f"{_short(k.name)}: {what}{how}: neighbouring threads read addresses far apart; let "
            f"consecutive threads read consecutive elements")


_LIMITS = {"limit_registers": "registers", "limit_shared_mem": "shared memory",
           "limit_warps": "block size", "limit_blocks": "blocks per multiprocessor"}


def occupancy(k: Kernel, p: Peaks) -> Optional[str]:
    achieved, theoretical = k.get("achieved_occupancy_pct"), k.get("theoretical_occupancy_pct")
    if achieved is None or theoretical is None or achieved >= 40 or theoretical >= 60:
        return None
    limits = {key: k.get(key) for key in _LIMITS if k.get(key) is not None}
    if not limits:
        return None
    worst = min(limits, key=limits.get)
    if worst == "limit_registers" and k.get("registers"):
        why = f"{k.get('registers'):.0f} registers per thread"
    elif worst == "limit_shared_mem":
        smem = (k.get("smem_static") or 0) + (k.get("smem_dynamic") or 0)
        why = f"{smem / 1024:.0f} KiB of shared memory per block" if smem else "shared memory per block"
    elif worst == "limit_warps" and k.get("block_size"):
        why = f"blocks of {k.get('block_size'):.0f} threads"
    else:
        why = _LIMITS[worst]
    return (f"{_short(k.name)}: occupancy {achieved:.0f}% (at most {theoretical:.0f}% with this launch), "
            f"limited by {why}")


def bound(k: Kernel, p: Peaks) -> Optional[str]:
    ai = intensity(k, p.precision)
    dram = k.get("dram_pct")
    if ai is None or dram is None:
        return None
    if ai < p.ridge:
        return (f"{_short(k.name)} is memory-bound ({ai:.2g} FLOP per DRAM byte, under this GPU's ridge "
                f"point of {p.ridge:.2g}): DRAM runs at {dram:.0f}% of its bandwidth"
                + (", so the bytes, not the arithmetic, set its time" if dram >= 60 else
                   ", far below what it can do: more bytes in flight (more threads, wider loads) would help"))
    rate = flop_rate(k, p.precision)
    if rate is None:
        return None
    pct = 100 * rate / p.flops
    return (f"{_short(k.name)} is compute-bound ({ai:.2g} FLOP per DRAM byte, over the ridge point of "
            f"{p.ridge:.2g}): its {p.precision.upper()} rate is {pct:.0f}% of this GPU's peak")


_STALLS = {
    "long_scoreboard": "for global memory (loads not yet arrived)",
    "barrier": "at __syncthreads() for the rest of their block",
    "short_scoreboard": "for shared memory or special functions",
    "mio_throttle": "for the memory instruction queue (too many shared-memory instructions)",
    "lg_throttle": "for the global memory queue (many small loads: wider ones would help)",
    "math_pipe_throttle": "for a busy arithmetic pipe",
    "wait": "on fixed instruction latencies (dependent arithmetic)",
    "membar": "at memory fences",
    "branch_resolving": "on branches",
    "tex_throttle": "for the texture unit",
}


def stalls(k: Kernel, p: Peaks) -> Optional[str]:
    known = {r: v for r, v in k.stalls.items() if r in _STALLS}
    total = sum(v for r, v in k.stalls.items() if r not in ("selected", "not_selected"))
    if not known or total <= 0:
        return None
    top = max(known, key=known.get)
    if known[top] < 0.4 * total:
        return None
    return f"{_short(k.name)}: its warps wait mostly {_STALLS[top]} ({100 * known[top] / total:.0f}% of stalls)"


RULES = (grid_too_small, uncoalesced, occupancy, bound, stalls)


def hints(kernels: list, p: Peaks) -> list:
    """At most MAX_HINTS sentences, from the kernels that take at least a fifth of the time (the
    longest first), most telling rule first."""
    total = sum(k.get("duration_ns") or 0 for k in kernels)
    main = sorted((k for k in kernels if total and (k.get("duration_ns") or 0) >= 0.2 * total),
                  key=lambda k: -(k.get("duration_ns") or 0)) or kernels[:1]
    out = []
    for rule in RULES:
        for k in main:
            s = rule(k, p)
            if s and len(out) < MAX_HINTS:
                out.append(s + ".")
    return out


def _short(name: str) -> str:
    """A kernel's name without its template arguments and parameters."""
    cut = min((i for i in (name.find("("), name.find("<")) if i > 0), default=len(name))
    base = name[:cut].strip()
    return base.split()[-1] if base else name
