"""The profile of a graded submission: one call of the graded case it trails its library by most
(where there is most to learn), the runner alone under Nsight Compute (in the jail, as every run of
student code in a batch), after the grading. The report is read back by ncu in the jail too, and
only its CSV text reaches the grader, which parses it. Nothing here takes part in the grade."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

from .. import protocol, sandbox
from ..gpu import peak
from ..results import GpuInfo, Performance
from ..tasks import Task
from . import ncu as ncu_mod
from .roofline import svg
from .rules import Peaks, hints
from . import table

CSV_LIMIT = 8 << 20
"""The most CSV text read back: a profile of a few kernels is kilobytes."""
TIMEOUT_S = 300


def peaks(task: Task, gpu: GpuInfo) -> Peaks:
    """The GPU's roofs for this assignment: FP32 for an FP32 metric, else FP64."""
    precision = "fp32" if task.peak_kind == "fp32" else "fp64"
    flops, _ = peak(gpu, precision)
    bandwidth, _ = peak(gpu, "dram")
    return Peaks(flops=flops * 1e9, bandwidth=bandwidth * 1e9, sms=gpu.sm_count, precision=precision)


def furthest_behind(task: Task, performance: list) -> tuple:
    """The graded case whose rate is the smallest fraction of its library route's, and its
    Performance: a kernel fast at a fixed sweep count but slow where it must converge is profiled
    where it is slow. The first graded case where no ratio is known."""
    timed = [(p.rate / p.baseline_rate, i) for i, p in enumerate(performance[:len(task.graded)])
             if p.baseline_rate]
    i = min(timed)[1] if timed else 0
    return task.graded[i].case, (performance[i] if i < len(performance) else None)


def profile(task: Task, work: Path, gpu: GpuInfo, gpus: Optional[tuple] = None,
            performance: Optional[list] = None) -> dict:
    """The record's "profile": {"case", "kernels", "hints", "roofline_svg"}, or {"note"} saying in one
    line why there is none (no ncu, counters closed to this user, a failed run). `performance`, the
    graded cases' timings, picks the case and puts the library route on the roofline."""
    exe = ncu_mod.find_ncu()
    if exe is None:
        return {"note": "not profiled: Nsight Compute (ncu) is not installed; it comes with the CUDA Toolkit"}
    exe = str(Path(exe).resolve())
    g, perf = furthest_behind(task, performance or [])
    limit = ncu_mod.launch_limit(perf.timing.median_ms if perf and perf.timing else None)
    plan = protocol.write_alone_plan(work / "profile.plan", g, salt=3, reference=g.reference)
    report = work / "profile.ncu-rep"
    runner = work / "runner"
    run = sandbox.run(ncu_mod.command(exe, report, limit) + [str(runner), "--alone", str(plan)], work,
                      work / "profile.log", timeout=TIMEOUT_S, view="profile", read_only=(runner,), gpus=gpus)
    log = sandbox.tail(work / "profile.log", 20000)
    if ncu_mod.NO_PERMISSION in log:
        return {"note": "not profiled: " + ncu_mod.PERMISSION_HOWTO}
    if run.timed_out:
        return {"note": f"not profiled: the profiled call did not finish within {TIMEOUT_S} s"}
    if run.returncode != 0 or not report.is_file():
        last = sandbox.last_line(log)
        return {"note": f"not profiled: ncu ended with exit {run.returncode}" + (f": {last}" if last else "")}
    read = sandbox.run(ncu_mod.import_command(exe, report), work, work / "profile.csv", timeout=120, view="profile",
                       read_only=(runner,))
    text = sandbox.tail(work / "profile.csv", CSV_LIMIT)
    launched = ncu_mod.parse_raw_csv(text) if read.returncode == 0 else []
    kernels = ncu_mod.merge(launched)
    if not kernels:
        return {"note": "not profiled: the profile holds no kernel of the submission (it launched none?)"}
    p = peaks(task, gpu)
    rows = table(kernels, p)
    points = [(r["kernel"][:40], "submission", r["intensity"], r["gflops"] * 1e9 if r["gflops"] else None)
              for r in rows]
    points += library_point(task, perf)
    title = f"{task.name}, {g.describe()}, on {gpu.name}"
    return {"case": g.id, "launches": len(launched), "launch_limit": limit, "kernels": rows,
            "hints": hints(kernels, p), "roofline_svg": svg(title, p, points)}


def library_point(task: Task, perf: Optional[Performance]) -> list:
    """The library route on the roofline, for a FLOP-rated task that counts its bytes: its measured
    rate at the task's intensity (FLOP per byte that must move), as it is not profiled itself."""
    if perf is None or not perf.baseline_rate or task.peak_kind not in ("fp64", "fp32"):
        return []
    need = task.least_bytes(perf.params)
    if not need:
        return []
    per = float(task.data["metric"].get("per", 1.0))
    flops = task.work(perf.params) * per
    return [(f"{perf.baseline_name} (at the bytes that must move)", "library", flops / need, perf.baseline_rate * per)]
