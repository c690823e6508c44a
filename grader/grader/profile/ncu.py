"""Nsight Compute's side: the command that profiles one call, and its raw CSV read into kernels.

The profile is taken with sections, not with a list of metric names: a section collects what its
Nsight Compute version calls its metrics, and a quantity this kit reads is looked up under each of
the names it has had (`_NAMES`), so a metric a version lacks leaves that quantity unknown (and
the hints that need it silent) instead of failing the profile.
"""
from __future__ import annotations

import csv
import io
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

LAUNCHES = 10
"""The most kernel launches profiled in the call: each is replayed some 40 times to collect its
counters (~1 s for jacobi's sweep), and a solver that launches a kernel per sweep would otherwise
take minutes. Launches of one kernel are alike; the first ten say how it behaves."""

PROFILED_MS = 500.0
"""A call slower than this has fewer of its launches profiled (at least one), in proportion: the
replays multiply the kernels' own time. A jacobi sweep with one atomic per point took 4.9 s a call;
ten of its launches took 92 s to profile."""


def launch_limit(call_ms: Optional[float]) -> int:
    """How many launches of a call taking `call_ms` (its graded median) to profile."""
    if not call_ms or call_ms <= PROFILED_MS:
        return LAUNCHES
    return max(1, int(LAUNCHES * PROFILED_MS / call_ms))


SECTIONS = ("SpeedOfLight", "SpeedOfLight_RooflineChart", "LaunchStats", "Occupancy",
            "MemoryWorkloadAnalysis_Tables", "WarpStateStats")
"""What one profile collects: throughput against the GPU's peaks, the FLOP and byte counts of the
roofline, the launch and what limits occupancy, the global loads' sectors, and the warp stalls."""

SYSTEM_NSIGHT = Path("/opt/nvidia")
"""Where Nsight Compute installs itself outside a Toolkit (nsight-compute/<version>/ncu): the
Toolkit's launcher looks there when its own folder has none."""
NO_PERMISSION = "ERR_NVGPUCTRPERM"
"""What ncu prints where the driver lets only administrators read the GPU's counters."""
PERMISSION_HOWTO = ("the GPU's performance counters are open to administrators only here "
                    "(ERR_NVGPUCTRPERM): an administrator can open them with the NVIDIA driver option "
                    "NVreg_RestrictProfilingToAdminUsers=0 (https://developer.nvidia.com/ERR_NVGPUCTRPERM)")


def find_ncu() -> Optional[str]:
    """ncu: $NCU, else on PATH, else in the CUDA Toolkit beside nvcc; None where there is none. The
    Toolkit's bin/ncu is a launcher that looks for Nsight Compute's folder beside bin/ (or under
    /opt/nvidia); the ncu in that folder is returned instead, so that a jail binding the folder of
    the ncu it runs has the whole tool (its libraries and sections) and nothing else of the Toolkit."""
    env = os.environ.get("NCU")
    found = shutil.which(env) if env else shutil.which("ncu")
    if not found and not env:
        from ..jail import toolkit_root  # nvcc's toolkit, through a wrapper script on PATH too
        top = toolkit_root()
        beside = top / "bin" / "ncu" if top else None
        found = str(beside) if beside and beside.is_file() else None
    return _through_launcher(found) if found else None


def _through_launcher(exe: str) -> str:
    """The ncu inside the newest Nsight Compute folder the launcher `exe` would start (the
    Toolkit's `nsight-compute-<version>` beside its bin/, else /opt/nvidia/nsight-compute/<version>);
    `exe` itself where it is not the Toolkit's launcher."""
    bin_dir = Path(exe).resolve().parent
    if bin_dir.name != "bin":
        return exe
    tools = list(bin_dir.parent.glob("nsight-compute*/ncu")) or list(SYSTEM_NSIGHT.glob("nsight-compute/*/ncu"))
    tools = [t for t in tools if t.is_file()]
    if not tools:
        return exe

    def version(tool: Path) -> tuple:
        digits = "".join(c if c.isdigit() else " " for c in tool.parent.name).split()
        return tuple(int(d) for d in digits)
    return str(max(tools, key=version))


def command(ncu: str, report: Path, launches: int = LAUNCHES) -> list:
    """ncu, profiling the kernels the runner launches inside its NVTX range "submission" (the
    entry point's call: not the kit's kernels that fill the inputs) into `report`. The clocks are
    left as the judge timed them (--clock-control none), so rates compare with the GPU's datasheet
    roofs and with the graded time; ncu's default would lock them at base clock, ~20% lower."""
    args = [ncu, "--target-processes", "all", "--export", str(report), "--force-overwrite",
            "--cache-control", "all", "--clock-control", "none", "--nvtx", "--nvtx-include", "submission/",
            "--launch-count", str(launches)]
    for s in SECTIONS:
        args += ["--section", s]
    return args


def import_command(ncu: str, report: Path) -> list:
    """ncu reading a report back as CSV: one row per kernel, every metric raw, units in base form."""
    return [ncu, "--import", str(report), "--csv", "--page", "raw", "--print-units", "base"]


# ---------------------------------------------------------------------------------------------
# The CSV.

_OPS = ("dfma", "dadd", "dmul", "ffma", "fadd", "fmul")
"""The floating-point instructions a FLOP count is made of."""

_NAMES = {
    "duration_ns": ("gpu__time_duration.sum",),
    "dram_bytes": ("dram__bytes.sum",),
    "dram_read": ("dram__bytes_read.sum",),
    "dram_write": ("dram__bytes_write.sum",),
    "dram_pct": ("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
                 "dram__throughput.avg.pct_of_peak_sustained_elapsed"),
    "sm_pct": ("sm__throughput.avg.pct_of_peak_sustained_elapsed",),
    "l1_pct": ("l1tex__data_pipe_lsu_wavefronts.avg.pct_of_peak_sustained_elapsed",),
    "dmma_pct": ("sm__pipe_tensor_op_dmma_cycles_active.avg.pct_of_peak_sustained_elapsed",),
    # The tensor pipe busy with every other MMA (TF32, FP16, BF16, FP8, integer; mma.sync and wgmma).
    "mma_pct": ("sm__pipe_tensor_type_hmma_hgmma_qgmma_imma_igmma_bmma_bgmma_cycles_active.avg.pct_of_peak_sustained_elapsed",
                "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed"),
    # Instruction counts where a version reports them, and their rates per elapsed cycle, which
    # the roofline section reports instead and Kernel.count turns back into counts.
    **{op: (f"smsp__sass_thread_inst_executed_op_{op}_pred_on.sum",) for op in _OPS},
    **{f"{op}_per_cycle": (f"smsp__sass_thread_inst_executed_op_{op}_pred_on.sum.per_cycle_elapsed",) for op in _OPS},
    "cycles_per_second": ("smsp__cycles_elapsed.avg.per_second",),
    "achieved_occupancy_pct": ("sm__warps_active.avg.pct_of_peak_sustained_active",),
    "theoretical_occupancy_pct": ("sm__maximum_warps_per_active_cycle_pct",),
    "limit_registers": ("launch__occupancy_limit_registers",),
    "limit_shared_mem": ("launch__occupancy_limit_shared_mem",),
    "limit_warps": ("launch__occupancy_limit_warps",),
    "limit_blocks": ("launch__occupancy_limit_blocks",),
    "registers": ("launch__registers_per_thread",),
    "block_size": ("launch__block_size",),
    "grid_size": ("launch__grid_size",),
    "smem_static": ("launch__shared_mem_per_block_static",),
    "smem_dynamic": ("launch__shared_mem_per_block_dynamic",),
    "sms": ("device__attribute_multiprocessor_count",),
    "l2_hit_pct": ("lts__t_sector_hit_rate.pct", "lts__t_sector_op_read_hit_rate.pct"),
    "ld_instructions": ("smsp__sass_inst_executed_op_global_ld.sum",),
    "ld_sectors": ("l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",),
    "ld_requests": ("l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",),
    "ld_bytes_per_sector": ("smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.ratio",),
    "l2_red_sectors": ("lts__t_sectors_srcunit_tex_op_red.sum",),
    "l2_atom_sectors": ("lts__t_sectors_srcunit_tex_op_atom.sum",),
    "l2_atomic_max_pct": ("lts__d_atomic_input_cycles_active.max.pct_of_peak_sustained_elapsed",),
    "l2_atomic_avg_pct": ("lts__d_atomic_input_cycles_active.avg.pct_of_peak_sustained_elapsed",),
}
_STALL = "smsp__average_warps_issue_stalled_"
_STALL_END = "_per_issue_active.ratio"


@dataclass
class Kernel:
    """One kernel launch of a profile, in the units ncu's base form gives (bytes, ns, counts, %)."""
    name: str
    """The kernel's (demangled) name."""
    launches: int = 1
    """How many profiled launches of it these numbers sum up (merge)."""
    values: dict = field(default_factory=dict)
    """Quantity (a key of _NAMES) -> number, for those this profile has."""
    stalls: dict = field(default_factory=dict)
    """Warp stall reason (long_scoreboard, barrier, ...) -> warps stalled per issued instruction."""

    def get(self, key: str) -> Optional[float]:
        return self.values.get(key)

    def count(self, key: str) -> Optional[float]:
        """An instruction count: reported as such, else its rate per elapsed cycle x cycles."""
        if self.get(key) is not None:
            return self.get(key)
        rate, hz, t = self.get(key + "_per_cycle"), self.get("cycles_per_second"), self.seconds
        return rate * hz * t if rate is not None and hz and t else None

    @property
    def flops64(self) -> Optional[float]:
        """FP64 operations on the CUDA cores: an FMA counts two. (Tensor-core FP64 is not counted
        by instruction: see rules.tensor_flops.)"""
        return _flops(self, "dfma", "dadd", "dmul")

    @property
    def flops32(self) -> Optional[float]:
        return _flops(self, "ffma", "fadd", "fmul")

    @property
    def seconds(self) -> Optional[float]:
        t = self.get("duration_ns")
        return t * 1e-9 if t else None

    @property
    def sectors_per_request(self) -> Optional[float]:
        """32-byte sectors fetched per global load request (a warp's 8-byte loads need 8, its
        16-byte loads 16)."""
        sectors, requests = self.get("ld_sectors"), self.get("ld_requests")
        return sectors / requests if sectors is not None and requests else None

    @property
    def ld_bytes_used_pct(self) -> Optional[float]:
        """How much of each 32-byte sector the global loads fetch the threads asked for (100% is
        perfect coalescing); None where the kernel issued no plain global loads (cp.async only)."""
        ratio = self.get("ld_bytes_per_sector")
        if ratio is None or not self.get("ld_instructions"):
            return None
        return 100 * ratio / 32

    @property
    def bytes(self) -> Optional[float]:
        """Bytes that crossed DRAM."""
        if self.get("dram_bytes") is not None:
            return self.get("dram_bytes")
        if self.get("dram_read") is None and self.get("dram_write") is None:
            return None
        return (self.get("dram_read") or 0.0) + (self.get("dram_write") or 0.0)


def _flops(k: Kernel, fma: str, add: str, mul: str) -> Optional[float]:
    counts = [k.count(x) for x in (fma, add, mul)]
    if all(c is None for c in counts):
        return None
    return 2 * (counts[0] or 0.0) + (counts[1] or 0.0) + (counts[2] or 0.0)


def _number(text: str) -> Optional[float]:
    text = text.strip().replace(",", "")
    if not text or text in ("n/a", "N/A"):
        return None
    try:
        return float(text)
    except ValueError:
        return None


def parse_raw_csv(text: str) -> list:
    """The kernels of `ncu --csv --page raw` output, in launch order. Lines ncu writes around the
    table (==PROF== notes) are skipped; the row after the header holds the units."""
    lines = [line for line in text.splitlines() if line.startswith('"')]
    rows = list(csv.reader(io.StringIO("\n".join(lines))))
    if len(rows) < 2:
        return []
    header = rows[0]
    col = {name: i for i, name in enumerate(header)}
    kernels = []
    for row in rows[1:]:
        if len(row) != len(header) or _number(row[col.get("ID", 0)]) is None:
            continue  # the units row, whose ID is empty
        k = Kernel(row[col["Kernel Name"]] if "Kernel Name" in col else "kernel")
        for key, names in _NAMES.items():
            for name in names:
                if name in col:
                    v = _number(row[col[name]])
                    if v is not None:
                        k.values[key] = v
                        break
        for name, i in col.items():
            if name.startswith(_STALL) and name.endswith(_STALL_END):
                v = _number(row[i])
                if v is not None:
                    k.stalls[name[len(_STALL):-len(_STALL_END)]] = v
        kernels.append(k)
    return kernels


_SUMMED = ("duration_ns", "dram_bytes", "dram_read", "dram_write", *_OPS,
           "ld_instructions", "ld_sectors", "ld_requests", "l2_red_sectors", "l2_atom_sectors")
"""Quantities that add up over launches; the others (percentages, rates, launch settings) are
averaged, weighted by each launch's time."""


def merge(kernels: list) -> list:
    """One Kernel per kernel name, in order of first launch: a solver's hundred launches of one
    sweep kernel are one line of the report."""
    groups: dict = {}
    for k in kernels:
        groups.setdefault(k.name, []).append(k)
    out = []
    for name, ks in groups.items():
        if len(ks) == 1:
            out.append(ks[0])
            continue
        times = [k.get("duration_ns") or 0.0 for k in ks]
        total = sum(times)
        weight = [t / total for t in times] if total else [1.0 / len(ks)] * len(ks)
        m = Kernel(name, launches=sum(k.launches for k in ks))
        for key in {key for k in ks for key in k.values}:
            have = [(w, k.get(key)) for w, k in zip(weight, ks) if k.get(key) is not None]
            if key in _SUMMED:
                m.values[key] = sum(v for _, v in have)
            elif have:
                m.values[key] = sum(w * v for w, v in have) / (sum(w for w, _ in have) or 1.0)
        for reason in {r for k in ks for r in k.stalls}:
            m.stalls[reason] = sum(w * k.stalls.get(reason, 0.0) for w, k in zip(weight, ks))
        out.append(m)
    return out
