"""The bound of a possible rate: a rate above what the GPU's peak allows is an invalid measurement,
never a score. For a bandwidth-bound task the bound counts the bytes no call can avoid moving:
jacobi's sweeps can share a pass over memory, so an honest jacobi can beat 24 bytes per update at the
DRAM's bandwidth, but not reading u_old and writing u once. No GPU: the judge's records are made up."""
import json
from pathlib import Path

import pytest

from grader import grade, judged, performance, sandbox, tasks
from grader.results import GpuInfo, Verdict

GPU = GpuInfo(**json.loads((Path(__file__).parent / "fixtures" / "gpu_h200.json").read_text()))  # 4,800 GB/s


def score_jacobi_fixed(median_ms: float):
    """score_one on jacobi's fixed-sweep case (n = 512, 100 sweeps) timed at `median_ms` every run."""
    task = tasks.load("jacobi")
    graded = next(g for g in task.graded if g.case.params["tol"] == 0)
    c = graded.case.id
    s = judged.Session(records=[
        {"event": "ready"}, {"event": "start", "case": c},
        {"event": "timed", "case": c, "times_ms": [median_ms] * 10, "wait_ms": [0.0] * 10},
        {"event": "check", "case": c, "run": 0, "array": "sweeps", "pass": True, "compared": 1, "rel_error": 0.0,
         "value": 100.0, "expected": 100.0},
        {"event": "check", "case": c, "run": 0, "array": "u", "pass": True, "compared": 10, "rel_error": 0.0},
        {"event": "checked", "case": c}], runner=sandbox.Run(0, False, 1.0, ""), judge=sandbox.Run(0, False, 1.0, ""))
    result = grade.new_result(task, Path("kernel.cu"), GPU, grade.Options())
    result.correctness_points = 50.0
    perf = performance.score_one(task, GPU, graded, s, result, lambda g: ([], 0.0))
    return result, perf


def test_jacobi_two_sweeps_per_pass_above_a_sweep_at_a_time_at_the_dram_bandwidth_is_scored_not_called_impossible():
    # The reference's two sweeps per pass on an H200: 57.6 ms for 100 sweeps at n = 512, 230,000 MLUPS,
    # which counted at 24 bytes per update is 5,530 GB/s, above the H200's 4,800.
    result, perf = score_jacobi_fixed(57.6)
    assert result.verdict != Verdict.INVALID_MEASUREMENT, result.message
    assert perf is not None and perf.points == 50
    assert perf.rate == pytest.approx(510 ** 3 * 100 / 57.6e-3 / 1e6)
    assert perf.gbs > 4800  # the metric's GB/s, shown as counted
    assert perf.peak == pytest.approx(4800e9 * 510 ** 3 * 100 / (16 * 510 ** 3) / 1e6)


def test_a_jacobi_rate_above_what_reading_u_old_and_writing_u_once_allow_is_still_an_invalid_measurement():
    # 16 * 510^3 bytes (2.1 GB) take 0.44 ms at 4,800 GB/s: 100 sweeps in 0.3 ms cannot be right.
    result, perf = score_jacobi_fixed(0.3)
    assert perf is None
    assert result.verdict == Verdict.INVALID_MEASUREMENT
    assert "above this GPU's peak" in result.message
    assert result.score == result.correctness_points == 50
