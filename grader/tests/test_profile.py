"""profile/: an Nsight Compute raw CSV read into kernels, the hint rules (each on a kernel that
triggers it and one that does not) and the roofline picture. No GPU and no ncu needed: the CSVs
are written here in ncu's layout (a header row, a units row, one row per kernel). --profile in a
grading and a batch: test_profile_grading.py."""
from pathlib import Path

import pytest

from grader.profile import Peaks, hints, merge, parse_raw_csv, table
from grader.profile import rules
from grader.profile.ncu import Kernel
from grader.profile.roofline import svg
from ncu_csv import H100, kernel, raw_csv

STALL = "smsp__average_warps_issue_stalled_{}_per_issue_active.ratio"


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
