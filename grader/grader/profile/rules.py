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


ROOF_PCT = 70
"""At or above this share of a roof (DRAM bandwidth, tensor pipe, FLOP rate), a kernel is at
that roof. The libraries' own best routes stop at 75-92% of the datasheet peaks on an H100, and one
kernel measures a point or two apart from run to run (the syr2k reference: 74.5% and 75%), so the
line sits below where they stop. Advice on occupancy or stalls would not make such a kernel faster,
so it gets one sentence saying where it stands."""

def tensor_flops(k: Kernel, p: Peaks) -> Optional[float]:
    """FP64 tensor-core operations, from the share of time the DMMA pipe was busy at the GPU's FP64
    tensor peak. Counters give no FLOP count for DMMA: one instruction is 512 to 4096 FLOP by its
    shape. Busy cycles measure it (an H100's pipe does 64 FLOP per busy cycle per sub-partition for
    m16n8k4, m16n8k8 and m16n8k16), except m8n8k4, which keeps the pipe as busy for half the work:
    a kernel made of it reads twice its rate."""
    pct, t = k.get("dmma_pct"), k.seconds
    if p.precision != "fp64" or not pct or not t:
        return None
    return pct / 100 * p.flops * t


UNCOUNTED_MMA_PCT = 5
"""The tensor pipe at least this busy with MMAs other than FP64 (TF32, FP16, BF16, FP8, integer): a
kernel's arithmetic is then largely out of reach of a FLOP count. Counters count no FLOPs for them,
and their rates differ by type and shape, so their busy time gives none either. conv1d's reference at
w = 63 (TF32 and BF16 MMAs, 36% busy on an H200) counted by its FFMAs alone read 3% of the FP32 peak
and "memory-bound", at 0.67x a copy of its bytes."""


def uncounted_mma(k: Kernel) -> float:
    """The tensor pipe's busy share (%) with MMAs no FLOP count includes."""
    return k.get("mma_pct") or 0.0


def flops(k: Kernel, p: Peaks) -> Optional[float]:
    """FLOPs of the assignment's precision: the CUDA cores' counted ones, plus tensor-core FP64; None
    where most of the arithmetic may be MMAs of another type (UNCOUNTED_MMA_PCT)."""
    if uncounted_mma(k) >= UNCOUNTED_MMA_PCT:
        return None
    counted = k.flops64 if p.precision == "fp64" else k.flops32
    tensor = tensor_flops(k, p)
    if counted is None and tensor is None:
        return None
    return (counted or 0.0) + (tensor or 0.0)


def flop_rate(k: Kernel, p: Peaks) -> Optional[float]:
    """FLOP/s over the kernel's duration."""
    f, t = flops(k, p), k.seconds
    return f / t if f is not None and t else None


def intensity(k: Kernel, p: Peaks) -> Optional[float]:
    """FLOP per DRAM byte."""
    f, b = flops(k, p), k.bytes
    if f is None or not b:
        return None
    return f / b


# ---------------------------------------------------------------------------------------------
# The rules, most telling first.

def at_roof(k: Kernel, p: Peaks) -> Optional[str]:
    dram, fp64, other = k.get("dram_pct") or 0, k.get("dmma_pct") or 0, uncounted_mma(k)
    rate = flop_rate(k, p)
    fpct = 100 * rate / p.flops if rate else 0
    if dram >= ROOF_PCT and dram >= fpct:
        return (f"{_short(k.name)} moves its bytes at {dram:.0f}% of DRAM's peak bandwidth: it is at the memory "
                f"roof, so only moving fewer bytes (fewer passes, no re-reads) can make it faster")
    if max(fp64, other) >= ROOF_PCT:
        which = "FP64 tensor cores" if fp64 >= other else "tensor cores"
        return (f"{_short(k.name)} keeps the {which} busy {max(fp64, other):.0f}% of the time: it is at the compute "
                f"roof, so only doing less arithmetic can make it faster")
    if fpct >= ROOF_PCT:
        return (f"{_short(k.name)} runs at {fpct:.0f}% of this GPU's {p.precision.upper()} peak: it is at the "
                f"compute roof, so only doing less arithmetic can make it faster")
    return None


def grid_too_small(k: Kernel, p: Peaks) -> Optional[str]:
    grid = k.get("grid_size")
    block = k.get("block_size")
    if grid is None or grid >= p.sms:
        return None
    return (f"{_short(k.name)} runs {grid:.0f} block{'s' if grid != 1 else ''} of {block:.0f} threads on "
            f"{p.sms} multiprocessors: most of the GPU has nothing to do; launch at least one block per "
            f"multiprocessor, and many threads each")


def uncoalesced(k: Kernel, p: Peaks) -> Optional[str]:
    used = k.ld_bytes_used_pct
    if used is None or used >= 50:
        return None
    per_request = k.sectors_per_request
    how = f" ({per_request:.1f} sectors per request)" if per_request is not None else ""
    return (f"{_short(k.name)}: only {used:.0f}% of each 32-byte sector its global loads fetch is used{how}: "
            f"neighbouring threads read addresses far apart; let consecutive threads read consecutive elements")


L1_BUSY_PCT = 60
"""The load path inside the SM (L1's data pipe) this busy, with DRAM far from busy: the kernel's
own re-loads, not memory, set its pace."""


def l1_busy(k: Kernel, p: Peaks) -> Optional[str]:
    l1, dram = k.get("l1_pct"), k.get("dram_pct")
    if l1 is None or dram is None or l1 < L1_BUSY_PCT or dram >= 40:
        return None
    return (f"{_short(k.name)}: the SM's load path (L1) is {l1:.0f}% busy while DRAM runs at {dram:.0f}%: it "
            f"loads the same values again for every use; load each once into registers or shared memory and "
            f"reuse it from there (tiling)")


HOT_SLICE_PCT = 10
"""One L2 slice's atomic unit at least this busy, and ten times the slices' average, with at least
one atomic update per warp launched: the kernel's atomics pile onto one address. (A jacobi sweep
with one atomicAdd of its norm per point: 33% on one slice, 0.4% on average, DRAM idle, 150 times
slower than the plain sweep. A reduction's one atomicAdd per block of 256 threads is not flagged.)"""


def atomics_on_one_address(k: Kernel, p: Peaks) -> Optional[str]:
    updates = (k.get("l2_red_sectors") or 0) + (k.get("l2_atom_sectors") or 0)
    hot, avg, dram = k.get("l2_atomic_max_pct"), k.get("l2_atomic_avg_pct"), k.get("dram_pct")
    if not updates or hot is None or avg is None or dram is None:
        return None
    threads = (k.get("grid_size") or 0) * (k.get("block_size") or 0) * k.launches
    if hot < HOT_SLICE_PCT or hot < 10 * avg or dram >= 40 or updates < threads / 32:
        return None
    return (f"{_short(k.name)}: its {_count(updates)} atomic updates pile onto one address (one L2 slice's "
            f"atomic unit is {hot:.0f}% busy, the average {avg:.1f}%), and updates of one address are made one "
            f"after another: add up within each block first (warp shuffles, shared memory), then make one "
            f"atomic update per block")


def _count(x: float) -> str:
    return f"{x / 1e9:.1f} billion" if x >= 1e9 else f"{x / 1e6:.0f} million" if x >= 1e6 else f"{x:,.0f}"


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


def tensor_cores(k: Kernel, p: Peaks) -> Optional[str]:
    """Where a kernel's FLOP count leaves out its MMAs (and bound() cannot place it): the pipes it uses."""
    busy, dram = uncounted_mma(k), k.get("dram_pct")
    if busy < UNCOUNTED_MMA_PCT:
        return None
    return (f"{_short(k.name)} does its arithmetic on the tensor cores (busy {busy:.0f}% of the time), which the "
            f"{p.precision.upper()} FLOP count leaves out" + (f"; DRAM runs at {dram:.0f}%" if dram is not None else "")
            + ": neither is at its roof")


def bound(k: Kernel, p: Peaks) -> Optional[str]:
    ai = intensity(k, p)
    dram = k.get("dram_pct")
    if ai is None or dram is None:
        return None
    if ai < p.ridge:
        if l1_busy(k, p) or atomics_on_one_address(k, p):
            return None  # DRAM is idle for another reason, which those rules name
        per_byte = f"{ai:.2g} FLOP per DRAM byte" if ai >= 0.01 else \
            f"almost no {p.precision.upper()} arithmetic per DRAM byte"
        return (f"{_short(k.name)} is memory-bound ({per_byte}, under this GPU's ridge "
                f"point of {p.ridge:.2g}): DRAM runs at {dram:.0f}% of its bandwidth"
                + (", so the bytes, not the arithmetic, set its time" if dram >= 60 else
                   ", far below what it can do: more bytes in flight (more threads, wider loads) would help"))
    rate = flop_rate(k, p)
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
    "lg_throttle": "for the global memory queue (many small loads, stores or atomics: fewer, wider ones would help)",
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


RULES = (atomics_on_one_address, grid_too_small, uncoalesced, l1_busy, occupancy, tensor_cores, bound, stalls)


def hints(kernels: list, p: Peaks) -> list:
    """At most MAX_HINTS sentences, from the kernels that take at least a fifth of the time (the
    longest first), most telling rule first. A kernel at a roof gets that sentence alone."""
    total = sum(k.get("duration_ns") or 0 for k in kernels)
    main = sorted((k for k in kernels if total and (k.get("duration_ns") or 0) >= 0.2 * total),
                  key=lambda k: -(k.get("duration_ns") or 0)) or kernels[:1]
    roofs = {id(k): at_roof(k, p) for k in main}
    out = [s + "." for s in roofs.values() if s]
    for rule in RULES:
        for k in main:
            s = None if roofs[id(k)] else rule(k, p)
            if s:
                out.append(s + ".")
    return out[:MAX_HINTS]


def _short(name: str) -> str:
    """A kernel's name without its return type, namespaces, template arguments and parameters:
    "void <unnamed>::sweep_kernel<0>(int, ...)" is sweep_kernel."""
    head = name.split("(")[0]
    depth, plain = 0, []
    for ch in head:
        depth += ch == "<"
        if depth == 0:
            plain.append(ch)
        depth -= ch == ">" and depth > 0
    words = "".join(plain).split()
    return words[-1].split("::")[-1] if words else name
