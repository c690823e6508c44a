"""profile/: an Nsight Compute raw CSV read into kernels, the hint rules (each on a kernel that
triggers it and one that does not) and the roofline picture. No GPU and no ncu needed: the CSVs
are written here in ncu's layout (a header row, a units row, one row per kernel)."""
import csv
import io
from pathlib import Path

import pytest

from grader.profile import Peaks, hints, merge, parse_raw_csv, table
from grader.profile import rules
from grader.profile.ncu import Kernel
from grader.profile.roofline import svg
from fake_kit import args, make_class
from fake_kit import kernel as submission
from grader import batch

H100 = Peaks(flops=67e12, bandwidth=3.35e12, sms=132, precision="fp64")
STALL = "smsp__average_warps_issue_stalled_{}_per_issue_active.ratio"


def raw_csv(*kernels: dict) -> str:
    """ncu --csv --page raw --print-units base, for kernels given as {metric: value}."""
    fixed = ["ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream",
             "Block Size", "Grid Size", "Device", "CC"]
    metrics = sorted({m for k in kernels for m in k if m not in fixed})
    out = io.StringIO()
    w = csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n")
    w.writerow(fixed + metrics)
    w.writerow([""] * len(fixed) + ["byte" if "bytes" in m else "" for m in metrics])
    for i, k in enumerate(kernels):
        w.writerow([str(i), "4242", "runner", "gpu", k.get("Kernel Name", f"kernel_{i}"), "1", "7", "(256, 1, 1)",
                    "(1, 1, 1)", "0", "9.0"] + [k.get(m, "") for m in metrics])
    return "==PROF== Connected to process 4242\n" + out.getvalue() + "==PROF== Disconnected\n"


def kernel(**values) -> Kernel:
    k = Kernel("void trmm_kernel<64>(int, const double*, double*)")
    k.values.update(values)
    return k


# ---------------------------------------------------------------------------------------------
# The CSV.

def test_the_raw_csv_is_read_into_kernels_with_their_metrics_stalls_and_thousands_separators():
    text = raw_csv({"Kernel Name": "copy_kernel(const double*, double*, long)", "gpu__time_duration.sum": "1,234,567",
                    "dram__bytes_read.sum": "2,000,000,000", "dram__bytes_write.sum": "1,000,000,000",
                    "launch__grid_size": "4,096", STALL.format("long_scoreboard"): "3.5"},
                   {"Kernel Name": "tail_kernel", "gpu__time_duration.sum": "1000"})
    ks = parse_raw_csv(text)
    assert [k.name for k in ks] == ["copy_kernel(const double*, double*, long)", "tail_kernel"]
    assert ks[0].get("duration_ns") == 1234567 and ks[0].bytes == 3e9 and ks[0].get("grid_size") == 4096
    assert ks[0].stalls == {"long_scoreboard": 3.5}
    assert ks[1].bytes is None and ks[1].stalls == {}


def test_an_output_without_a_table_gives_no_kernels():
    assert parse_raw_csv("==PROF== No kernels were profiled.\n") == []


def test_fp64_operations_count_an_fma_twice():
    k = kernel(dfma=10.0, dadd=3.0, dmul=2.0)
    assert k.flops64 == 25 and k.flops32 is None


def test_the_table_gives_each_kernel_its_share_rate_and_intensity():
    a = kernel(duration_ns=3e6, dram_bytes=6e9, dfma=1e9)
    b = kernel(duration_ns=1e6)
    rows = table([b, a], H100)
    assert rows[0]["share_pct"] == pytest.approx(75) and rows[1]["share_pct"] == pytest.approx(25)
    assert rows[0]["dram_gbs"] == pytest.approx(2000) and rows[0]["intensity"] == pytest.approx(2e9 / 6e9)
    assert rows[0]["gflops"] == pytest.approx(2e9 / 3e-3 / 1e9) and rows[1]["gflops"] is None


# ---------------------------------------------------------------------------------------------
# The rules, both ways.

def test_a_grid_smaller_than_the_gpu_is_named_with_its_block_count():
    said = rules.grid_too_small(kernel(grid_size=1, block_size=1), H100)
    assert said.startswith("trmm_kernel runs 1 block of 1 threads on 132 multiprocessors")
    assert rules.grid_too_small(kernel(grid_size=4096, block_size=256), H100) is None


def test_loads_that_use_a_small_part_of_each_sector_are_called_uncoalesced():
    said = rules.uncoalesced(kernel(ld_bytes_per_sector=4.0, ld_instructions=1e6, ld_sectors=3.2e7,
                                    ld_requests=1e6), H100)
    assert "only 12% of each 32-byte sector" in said and "32.0 sectors per request" in said
    assert rules.uncoalesced(kernel(ld_bytes_per_sector=32.0, ld_instructions=1e6, ld_sectors=8e6,
                                    ld_requests=1e6), H100) is None


def test_sixteen_byte_loads_and_cp_async_copies_are_not_called_uncoalesced_for_their_sectors_per_request():
    # A warp's 16-byte loads take 16 sectors per request, all of each sector used.
    wide = kernel(ld_bytes_per_sector=32.0, ld_instructions=1e6, ld_sectors=1.6e7, ld_requests=1e6)
    assert rules.uncoalesced(wide, H100) is None
    # cp.async only: no plain global loads, so ncu reports 0 bytes per sector; nothing to judge.
    assert rules.uncoalesced(kernel(ld_bytes_per_sector=0.0, ld_instructions=0.0, ld_sectors=1.6e7,
                                    ld_requests=1e6), H100) is None
    assert rules.uncoalesced(kernel(), H100) is None


def test_a_busy_l1_with_an_idle_dram_is_called_re_loading_and_told_to_tile():
    said = rules.l1_busy(kernel(l1_pct=84.2, dram_pct=5.3), H100)
    assert said.startswith("trmm_kernel: the SM's load path (L1) is 84% busy while DRAM runs at 5%")
    assert "(tiling)" in said
    assert rules.l1_busy(kernel(l1_pct=84.2, dram_pct=80.0), H100) is None  # DRAM busy too: a streaming kernel
    assert rules.l1_busy(kernel(l1_pct=33.0, dram_pct=5.0), H100) is None


def test_a_kernel_at_a_roof_is_told_so_and_gets_no_other_advice():
    at_dram = kernel(duration_ns=7e5, dram_pct=91.9, achieved_occupancy_pct=12, theoretical_occupancy_pct=12,
                     limit_registers=1, registers=222)
    said = hints([at_dram], H100)
    assert said == ["trmm_kernel moves its bytes at 92% of DRAM's peak bandwidth: it is at the memory roof, so only "
                    "moving fewer bytes (fewer passes, no re-reads) can make it faster."]
    tensor = kernel(duration_ns=3e6, dmma_pct=85.4, dram_pct=10.0)
    assert "keeps the FP64 tensor cores busy 85% of the time" in rules.at_roof(tensor, H100)
    assert rules.at_roof(kernel(duration_ns=3e6, dmma_pct=40.0, dram_pct=50.0), H100) is None


def test_tensor_core_fp64_work_is_estimated_from_the_busy_time_of_the_dmma_pipe():
    k = kernel(duration_ns=2e6, dmma_pct=50.0)
    assert rules.tensor_flops(k, H100) == pytest.approx(0.5 * 67e12 * 2e-3)
    assert rules.flop_rate(k, H100) == pytest.approx(33.5e12)
    fp32 = Peaks(flops=60e12, bandwidth=3.35e12, sms=132, precision="fp32")
    assert rules.tensor_flops(k, fp32) is None


def test_an_instruction_count_is_rebuilt_from_its_rate_per_elapsed_cycle():
    k = kernel(duration_ns=24117024, dfma_per_cycle=888.04, cycles_per_second=1.6047e9)
    assert k.flops64 == pytest.approx(2 * 888.04 * 1.6047e9 * 0.024117024)


def test_low_occupancy_names_the_resource_that_limits_it():
    said = rules.occupancy(kernel(achieved_occupancy_pct=24.6, theoretical_occupancy_pct=25.0, registers=168,
                                  limit_registers=1, limit_shared_mem=8, limit_warps=8, limit_blocks=32), H100)
    assert said == "trmm_kernel: occupancy 25% (at most 25% with this launch), limited by 168 registers per thread"
    said = rules.occupancy(kernel(achieved_occupancy_pct=12, theoretical_occupancy_pct=12.5, smem_static=98304,
                                  limit_registers=4, limit_shared_mem=1, limit_warps=8, limit_blocks=32), H100)
    assert said.endswith("limited by 96 KiB of shared memory per block")


def test_occupancy_is_not_blamed_when_it_is_high_or_only_achieved_is_low():
    limits = dict(limit_registers=1, limit_shared_mem=8, limit_warps=8, limit_blocks=32, registers=168)
    assert rules.occupancy(kernel(achieved_occupancy_pct=85, theoretical_occupancy_pct=100, **limits), H100) is None
    assert rules.occupancy(kernel(achieved_occupancy_pct=30, theoretical_occupancy_pct=100, **limits), H100) is None


def test_a_kernel_under_the_ridge_point_is_memory_bound_and_told_whether_dram_is_busy():
    slow = rules.bound(kernel(dram_bytes=1e9, dadd=1e8, dram_pct=12.0, duration_ns=2.5e6), H100)
    assert "is memory-bound (0.1 FLOP per DRAM byte, under this GPU's ridge point of 20)" in slow
    assert "DRAM runs at 12% of its bandwidth, far below" in slow
    busy = rules.bound(kernel(dram_bytes=1e9, dadd=1e8, dram_pct=88.0, duration_ns=3.4e5), H100)
    assert "88% of its bandwidth, so the bytes, not the arithmetic, set its time" in busy


def test_a_kernel_over_the_ridge_point_is_compute_bound_with_its_share_of_the_peak():
    said = rules.bound(kernel(dram_bytes=1e8, dfma=1.675e10, dram_pct=5.0, duration_ns=1e6), H100)
    assert "is compute-bound (3.4e+02 FLOP per DRAM byte" in said and "FP64 rate is 50% of this GPU's peak" in said
    assert rules.bound(kernel(dram_pct=5.0), H100) is None  # no FLOP count: nothing said


def test_a_stall_reason_is_named_only_when_it_dominates():
    said = rules.stalls(Kernel("k", stalls={"long_scoreboard": 7.0, "barrier": 1.0, "wait": 1.0, "selected": 1.0}), H100)
    assert said == "k: its warps wait mostly for global memory (loads not yet arrived) (78% of stalls)"
    even = Kernel("k", stalls={"long_scoreboard": 1.0, "barrier": 1.0, "wait": 1.0, "short_scoreboard": 1.0})
    assert rules.stalls(even, H100) is None


def test_hints_come_from_the_kernels_that_take_the_time_and_are_at_most_three():
    tiny = Kernel("setup", {"duration_ns": 1e3, "grid_size": 1, "block_size": 1})
    main = kernel(duration_ns=1e6, grid_size=1, block_size=32, ld_bytes_per_sector=3.2, ld_instructions=1e4,
                  achieved_occupancy_pct=3,
                  theoretical_occupancy_pct=3, limit_warps=1, limit_registers=8, dram_bytes=1e6, dadd=1e5,
                  dram_pct=1.0)
    said = hints([tiny, main], H100)
    assert len(said) == 3 and all(s.startswith("trmm_kernel") and s.endswith(".") for s in said)
    assert "setup" not in " ".join(said)
    assert hints([kernel(duration_ns=1e6, grid_size=4096, block_size=256)], H100) == []


# ---------------------------------------------------------------------------------------------
# The rules on profiles recorded on an H100 (tools/gpu_profile_check.sh keeps them): what each
# report says of a naive kernel, of the same kernel uncoalesced, and of the references.

RECORDED = Path(__file__).parent / "fixtures" / "profiles"


def recorded(name: str) -> list:
    return merge(parse_raw_csv((RECORDED / f"{name}.csv").read_text()))


def test_the_recorded_naive_kernels_are_told_they_re_load_through_l1_and_not_that_they_are_uncoalesced():
    for name, kernel_name, l1 in (("trmm-naive", "trmm_kernel", 73), ("matmul-naive", "matmul_kernel", 93),
                                  ("syr2k-tiled", "syr2k_kernel", 90)):
        said = hints(recorded(name), H100)
        assert said[0].startswith(f"{kernel_name}: the SM's load path (L1) is {l1}% busy while DRAM runs at"), said
        assert not any("sector" in s or "occupancy" in s or "memory-bound" in s for s in said), said
    [k] = recorded("trmm-naive")
    assert k.flops64 == pytest.approx(4096 * 4096 * 4097, rel=0.01)  # n^2 (n+1) FLOP, from ncu's rates


def test_the_recorded_uncoalesced_trmm_is_told_its_loads_use_a_quarter_of_each_sector():
    said = hints(recorded("trmm-uncoalesced"), H100)
    assert said[0].startswith("trmm_kernel: only 25% of each 32-byte sector its global loads fetch is used")
    assert "consecutive threads read consecutive elements" in said[0]


def test_the_recorded_references_are_told_they_are_at_their_roof_and_nothing_else():
    for name, roof in (("trmm-reference", "FP64 tensor cores busy 76%"), ("matmul-reference", "FP64 tensor cores busy 85%"),
                       ("syr2k-reference", "FP64 tensor cores busy 75%"), ("reduce-reference", "at 92% of DRAM's peak"),
                       ("conv1d-reference", "at 81% of DRAM's peak")):
        said = hints(recorded(name), H100)
        assert len(said) == 1 and roof in said[0], (name, said)


H200_FP32 = Peaks(flops=67e12, bandwidth=4.8e12, sms=132, precision="fp32")


def test_a_recorded_tensor_core_kernel_of_an_fp32_assignment_is_not_placed_by_its_cuda_core_flops():
    # conv1d's reference at w = 63 on an H200: its arithmetic is TF32 and BF16 MMAs, which no FLOP count
    # includes; counted by its FFMAs alone it read 3% of the FP32 peak and "memory-bound: more bytes in
    # flight would help", while DRAM ran at 54% and the tensor pipe at 36%.
    [k] = recorded("conv1d-tensor-cores")
    said = hints([k], H200_FP32)
    assert "conv63 does its arithmetic on the tensor cores (busy 36% of the time), which the FP32 FLOP count " \
           "leaves out; DRAM runs at 54%: neither is at its roof." in said, said
    assert not any("memory-bound" in s or "compute-bound" in s or "bytes in flight" in s for s in said), said
    assert rules.flop_rate(k, H200_FP32) is None and rules.intensity(k, H200_FP32) is None
    [row] = table([k], H200_FP32)
    assert row["gflops"] is None and row["intensity"] is None and row["mma_pct"] == pytest.approx(35.9, abs=0.1)
    assert "conv63" not in svg("conv1d", H200_FP32, [("conv63", "submission", row["intensity"], None)])
    from grader.report import profile_lines
    line = profile_lines({"case": "n67108864_w63", "kernels": [row], "hints": said})[2]
    assert "- GFLOP/s" in line and "tensor cores busy 36% with MMAs no FLOP count includes" in line, line


def test_a_kernel_whose_tensor_pipe_is_busy_with_other_mmas_than_fp64_is_at_the_compute_roof_from_70_percent():
    busy = kernel(duration_ns=2e6, mma_pct=82.0, dram_pct=20.0, ffma=1e6)
    assert "keeps the tensor cores busy 82% of the time" in rules.at_roof(busy, H200_FP32)
    assert rules.at_roof(kernel(duration_ns=2e6, mma_pct=60.0, dram_pct=20.0, ffma=1e6), H200_FP32) is None
    # A few MMAs beside plain arithmetic leave its FLOP count standing.
    few = kernel(duration_ns=2e6, mma_pct=2.0, dram_pct=20.0, ffma=1e9)
    assert rules.flop_rate(few, H200_FP32) == pytest.approx(2e9 / 2e-3) and rules.tensor_cores(few, H200_FP32) is None


def test_a_recorded_kernel_below_the_memory_roof_is_told_how_busy_dram_is():
    said = hints(recorded("conv1d-basic"), H100)
    assert said[0].startswith("convolution_1D_basic_kernel is memory-bound (almost no FP64 arithmetic per DRAM byte")
    assert "DRAM runs at 47% of its bandwidth, far below what it can do" in said[0]
    said = hints(recorded("reduce-unrolled"), H100)
    assert "DRAM runs at 62% of its bandwidth, so the bytes" in said[0]
    assert said[1] == "block_sums: its warps wait mostly at __syncthreads() for the rest of their block (53% of stalls)."


def test_a_recorded_norm_summed_with_one_atomic_per_point_is_told_to_sum_per_block_not_to_move_more_bytes():
    said = hints(recorded("jacobi-atomic-norm-converge"), H100)
    assert said[0].startswith("sweep_kernel: its 133 million atomic updates pile onto one address (one L2 slice's "
                              "atomic unit is 33% busy, the average 0.4%)"), said
    assert "then make one atomic update per block" in said[0]
    assert not any("memory-bound" in s or "bytes in flight" in s for s in said), said


def test_one_atomic_per_block_is_not_taken_for_atomics_piling_onto_one_address():
    [k] = recorded("reduce-unrolled")  # one atomicAdd per block of 256: its slice is as hot (29%)
    k.values["dram_pct"] = 5.0         # even with DRAM idle
    assert rules.atomics_on_one_address(k, H100) is None


def test_the_launches_of_one_kernel_are_one_line_with_their_times_summed():
    launched = parse_raw_csv((RECORDED / "jacobi-atomic-norm.csv").read_text())
    [k] = merge(launched)
    assert len(launched) == 10 and k.launches == 10
    assert k.get("duration_ns") == pytest.approx(sum(x.get("duration_ns") for x in launched))
    assert min(x.get("dram_pct") for x in launched) <= k.get("dram_pct") <= max(x.get("dram_pct") for x in launched)
    assert hints([k], H100)[0].startswith("sweep_kernel moves its bytes at 8")  # "void <unnamed>::sweep_kernel<0>(...)"


def test_the_recorded_tensor_core_matmul_sits_near_the_fp64_roof_on_the_roofline():
    [k] = recorded("matmul-reference")
    [row] = table([k], H100)
    assert row["tensor_pct"] == pytest.approx(85.19) and row["flops_pct"] == pytest.approx(85.19)
    assert row["intensity"] > H100.ridge and row["ld_bytes_used_pct"] is None  # cp.async: no plain loads


# ---------------------------------------------------------------------------------------------
# The roofline.

def test_the_roofline_draws_both_roofs_and_a_point_per_kernel_with_its_label():
    picture = svg("trmm on NVIDIA H100", H100, [("trmm_kernel", "submission", 0.5, 1.2e12),
                                                 ("cublasDtrmm", "library", 40.0, 28e12)])
    assert picture.startswith("<svg") and picture.rstrip().endswith("</svg>")
    assert "FP64 peak 67 TFLOP/s" in picture and "DRAM 3,350 GB/s" in picture
    assert picture.count("<circle") == 4  # two points, and two in the key
    assert ">trmm_kernel (submission)<" in picture and ">cublasDtrmm (library)<" in picture


def test_the_library_route_is_put_on_the_roofline_at_the_bytes_that_must_move():
    from grader import tasks
    from grader.profile.run import library_point
    from grader.results import Performance
    task = tasks.load("trmm")
    perf = Performance("n4096", {"n": 4096}, "GFLOPS", None, 45000.0, None, baseline_name="cublasDtrmm via transposes",
                       baseline_rate=41000.0)
    [(label, who, ai, rate)] = library_point(task, perf)
    assert who == "library" and label.startswith("cublasDtrmm via transposes")
    assert ai == pytest.approx(4096 * 4096 * 4097 / (24 * 4096 * 4096)) and rate == pytest.approx(41e12)
    assert library_point(tasks.load("jacobi"), perf) == []  # updates per second: not on a FLOP roofline


def test_a_point_without_a_flop_count_is_left_out_of_the_roofline():
    picture = svg("reduce", H100, [("copy", "submission", None, None)])
    assert "<circle" not in picture


# ---------------------------------------------------------------------------------------------
# --profile in a grading, with a stand-in for ncu (the real one is tried by the GPU tests).

FAKE_NCU = '''#!{python}
import os, sys
args = sys.argv[1:]
if "--import" in args:
    sys.stdout.write(open(args[args.index("--import") + 1]).read())
    sys.exit(0)
if os.environ.get("FAKE_NCU") == "noperm":
    print("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance Counters")
    sys.exit(1)
program = next(i for i, a in enumerate(args) if a.endswith("/runner"))
assert args[program + 1] == "--alone" and os.path.isfile(args[program + 2]), args
assert "--nvtx-include" in args[:program] and "--launch-count" in args[:program]
open(args[args.index("--export") + 1], "w").write(open(os.environ["FAKE_NCU_CSV"]).read())
'''


@pytest.fixture
def fake_ncu(tmp_path, monkeypatch):
    import sys
    exe = tmp_path / "ncu"
    exe.write_text(FAKE_NCU.format(python=sys.executable))
    exe.chmod(0o755)
    profile_csv = tmp_path / "profile.csv"
    profile_csv.write_text(raw_csv({"Kernel Name": "trmm_naive(int, const double*, double*)",
                                    "gpu__time_duration.sum": "2,000,000", "launch__grid_size": "1",
                                    "launch__block_size": "256", "dram__bytes.sum": "1,000,000,000",
                                    "smsp__sass_thread_inst_executed_op_dfma_pred_on.sum": "100,000,000",
                                    "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed": "15"}))
    monkeypatch.setenv("NCU", str(exe))
    monkeypatch.setenv("FAKE_NCU_CSV", str(profile_csv))
    return exe


def grade_alice(tmp_path, *extra):
    subs, out = tmp_path / "subs", tmp_path / "out"
    (subs / "alice" / "trmm").mkdir(parents=True)
    (subs / "alice" / "trmm" / "kernel.cu").write_text(submission("reference"))
    assert batch.main(args(subs, out, *extra)) == 0
    import json
    return json.loads((out / "records" / "alice" / "trmm.json").read_text()), out


def test_a_profiled_batch_record_holds_the_kernels_the_hints_and_a_roofline_beside_it(fake_kit, fake_ncu, tmp_path):
    rec, out = grade_alice(tmp_path, ("profile", True))
    prof = rec["profile"]
    assert prof["case"] == "n4096" and prof["kernels"][0]["kernel"].startswith("trmm_naive")
    assert any("runs 1 block of 256 threads" in h for h in prof["hints"])
    assert prof["roofline"] == "trmm-roofline.svg" and "roofline_svg" not in prof
    assert (out / "records" / "alice" / "trmm-roofline.svg").read_text().startswith("<svg")
    assert rec["score"] == 100  # the profile is never part of the score
    report = (out / "reports" / "alice.md").read_text()
    assert "runs 1 block of 256 threads" in report and "](../records/alice/trmm-roofline.svg)" in report


def test_the_profile_is_of_the_graded_case_the_submission_trails_its_library_by_most():
    from grader import tasks
    from grader.profile.run import furthest_behind
    from grader.results import Performance, Timing
    jacobi = tasks.load("jacobi")
    fixed, converging = (g.case.id for g in jacobi.graded)

    def timed(case_id, rate, baseline):
        return Performance(case_id, {}, "MLUPS", Timing([1.0], 0), rate, None, "plain kernel", baseline)
    # the atomic-norm kernel on an H100: 0.93x at fixed sweeps, 0.01x where it must converge
    case, perf = furthest_behind(jacobi, [timed(fixed, 111416, 119785), timed(converging, 568, 87279)])
    assert case.id == converging and perf.rate == 568
    case, _ = furthest_behind(jacobi, [timed(fixed, 60000, 119785), timed(converging, 80000, 87279)])
    assert case.id == fixed
    case, perf = furthest_behind(jacobi, [])
    assert case.id == fixed and perf is None


def test_counters_closed_to_this_user_give_one_line_on_how_to_open_them_and_the_grading_goes_on(
        fake_kit, fake_ncu, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_NCU", "noperm")
    rec, _ = grade_alice(tmp_path, ("profile", True))
    assert "ERR_NVGPUCTRPERM" in rec["profile"]["note"] and "NVreg_RestrictProfilingToAdminUsers=0" in rec["profile"]["note"]
    assert rec["score"] == 100


def toolkit_with_nsight(root: Path, *versions: str) -> Path:
    """A CUDA Toolkit's layout: bin/ncu, the launcher, and Nsight Compute's folders beside bin/."""
    (root / "bin").mkdir(parents=True)
    launcher = root / "bin" / "ncu"
    launcher.write_text("#!/bin/sh\necho 'ERROR : nsight-compute directory is not found'; exit 1\n")
    launcher.chmod(0o755)
    for v in versions:
        (root / f"nsight-compute-{v}").mkdir()
        (root / f"nsight-compute-{v}" / "ncu").write_text("#!/bin/sh\n")
        (root / f"nsight-compute-{v}" / "ncu").chmod(0o755)
    return launcher


def test_the_toolkit_s_ncu_launcher_is_followed_to_the_newest_nsight_compute_folder_which_the_jail_binds(tmp_path, monkeypatch):
    from grader.jail import profiler_folder
    from grader.profile.ncu import find_ncu
    launcher = toolkit_with_nsight(tmp_path / "cuda", "2024.3.2", "2025.3.1", "2025.10.0")
    newest = tmp_path / "cuda" / "nsight-compute-2025.10.0"
    monkeypatch.delenv("NCU", raising=False)
    monkeypatch.setenv("PATH", str(launcher.parent))
    assert find_ncu() == str(newest / "ncu")
    assert profiler_folder() == newest  # not bin/, where the launcher finds nothing in a jail
    monkeypatch.setenv("NCU", str(launcher))
    assert find_ncu() == str(newest / "ncu")


def test_an_ncu_that_is_not_the_toolkit_s_launcher_is_run_as_given(tmp_path, monkeypatch):
    from grader.profile import ncu
    from grader.profile.ncu import find_ncu
    monkeypatch.setattr(ncu, "SYSTEM_NSIGHT", tmp_path / "no-opt-nvidia")  # as where /opt/nvidia has no Nsight Compute
    toolkit_with_nsight(tmp_path / "cuda")  # a launcher with no Nsight Compute folder beside it
    monkeypatch.setenv("NCU", str(tmp_path / "cuda" / "bin" / "ncu"))
    assert find_ncu() == str(tmp_path / "cuda" / "bin" / "ncu")
    tool = tmp_path / "opt" / "ncu"
    tool.parent.mkdir()
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    monkeypatch.setenv("NCU", str(tool))
    assert find_ncu() == str(tool)


def test_without_ncu_the_profile_says_so_in_one_line(fake_kit, tmp_path, monkeypatch):
    monkeypatch.setenv("NCU", str(tmp_path / "no-such-ncu"))
    rec, _ = grade_alice(tmp_path, ("profile", True))
    assert rec["profile"] == {"note": "not profiled: Nsight Compute (ncu) is not installed; it comes with the CUDA Toolkit"}


def test_without_profile_nothing_is_profiled(fake_kit, fake_ncu, tmp_path):
    rec, _ = grade_alice(tmp_path)
    assert rec["profile"] == {}


def test_the_terminal_report_shows_the_kernels_and_hints_of_a_profile():
    from grader.report import profile_lines
    lines = profile_lines({"case": "n4096", "kernels": [table([kernel(duration_ns=2e6, dram_bytes=1e9, dfma=1e8)], H100)[0]],
                           "hints": ["trmm_kernel runs 1 block."], "roofline": "trmm-roofline.svg"})
    text = "\n".join(lines)
    assert "Profile (Nsight Compute, one call of n4096; not part of the score)" in text
    assert "100% of the time, DRAM 500 GB/s" in text and "- trmm_kernel runs 1 block." in text
    assert "trmm-roofline.svg" in text


def test_a_slow_call_has_fewer_of_its_launches_profiled_and_the_report_says_how_many():
    from grader.profile.ncu import launch_limit
    from grader.report import profile_lines
    assert launch_limit(None) == launch_limit(27.0) == launch_limit(500.0) == 10  # jacobi's reference: 27 ms
    assert launch_limit(1000.0) == 5 and launch_limit(4900.0) == 1 and launch_limit(60000.0) == 1
    row = table([kernel(duration_ns=2e6, dram_bytes=1e9, dfma=1e8)], H100)[0]
    text = "\n".join(profile_lines({"case": "n512_converge", "launches": 1, "launch_limit": 1, "kernels": [row],
                                    "hints": []}))
    assert "one call of n512_converge, its first kernel launch; not part of the score" in text
    text = "\n".join(profile_lines({"case": "n512", "launches": 10, "launch_limit": 10, "kernels": [row], "hints": []}))
    assert "one call of n512, its first 10 kernel launches;" in text


# ---------------------------------------------------------------------------------------------
# The class view of a batch (batch/classview.py).

def test_a_batch_draws_the_class_per_assignment_without_naming_anyone(fake_kit, fake_ncu, tmp_path):
    subs, out = make_class(tmp_path), tmp_path / "out"
    (subs / "frank" / "trmm").mkdir(parents=True)
    (subs / "frank" / "trmm" / "kernel.cu").write_text(submission("reference"))
    assert batch.main(args(subs, out, ("profile", True), ("no_reference", False))) == 0
    readme = (out / "class" / "README.md").read_text()
    assert "## trmm" in readme and "5 graded, 2 correct" in readme  # dave had nothing gradeable
    assert "| n4096 | 2 |" in readme and "50: 2" in readme  # both correct ones in the top tier
    for name in ("alice", "bob", "carol", "erin", "frank"):
        assert name not in readme
    scores = (out / "class" / "trmm-scores.svg").read_text()
    assert scores.startswith("<svg") and ">2</text>" in scores  # the full-marks bar holds two
    rates = (out / "class" / "trmm-rates-n4096.svg").read_text()
    assert rates.count("<circle") == 2 and ">reference 20,535</text>" in rates
    roof = (out / "class" / "trmm-roofline.svg").read_text()
    assert ">submission (2)</text>" in roof and ">reference (1)</text>" in roof
    assert "alice" not in roof and "frank" not in roof


def test_without_profiles_the_class_view_has_no_roofline(fake_kit, tmp_path):
    subs, out = make_class(tmp_path), tmp_path / "out"
    assert batch.main(args(subs, out)) == 0
    assert (out / "class" / "trmm-scores.svg").is_file() and not (out / "class" / "trmm-roofline.svg").exists()
    assert "| n4096 | 1 |" in (out / "class" / "README.md").read_text()


def test_the_reference_of_a_profiled_batch_keeps_its_roofline_beside_its_record(fake_kit, fake_ncu, tmp_path):
    rec, out = grade_alice(tmp_path, ("profile", True), ("no_reference", False))
    import json
    ref = json.loads((out / "reference" / "trmm.json").read_text())
    assert ref["profile"]["roofline"] == "trmm-roofline.svg" and "roofline_svg" not in ref["profile"]
    assert (out / "reference" / "trmm-roofline.svg").is_file()
