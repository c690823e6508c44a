"""bench.py: the table of reference rates, library baselines and physical limits, written per GPU.
The gradings are canned GradeResults (grade.grade replaced), except the last test, which grades
reduce's reference on the local GPU."""
import json

import pytest

from grader import bench, cli, grade, tasks
from grader.results import Baseline, GpuInfo, GradeResult, Performance, Timing, Verdict

H200 = GpuInfo(name="NVIDIA H200", arch="sm_90", sm_count=132, l2_bytes=62914560, driver="13.0", count=1,
               model="H200")
STAGES = {"harness": 0.4, "build": 6.0, "correctness": 9.5, "sanitize": 4.0, "performance": 3.1}


def canned(task, rate, verdict=Verdict.CORRECT):
    """A grading of reduce's reference at `rate` GB/s, next to CUB at 4,000 GB/s."""
    r = GradeResult(task.name, "reference/reduce/kernel.cu", verdict, "", 100.0, 100.0, correctness_points=50.0,
                    gpu=H200, stage_seconds=dict(STAGES))
    if verdict != Verdict.CORRECT:
        r.message, r.score = "case n31 (n=31): relative error 1.0e-03 exceeds the tolerance", 0.0
        return r
    ms = 8 * 2**28 / rate / 1e6
    r.performance.append(Performance(
        "n268435456", {"n": 2**28}, "GB/s", Timing([ms] * 20, 2), rate, gbs=rate,
        baseline_name="cub::DeviceReduce::Sum", baseline_rate=4000.0,
        baselines=[Baseline("cub::DeviceReduce::Sum", 4000.0, Timing([0.537] * 20, 2))], peak=4800.0))
    return r


@pytest.fixture
def graded(monkeypatch):
    """Replaces grade.grade: reduce's reference comes out at the listed rates, one per grading;
    anything else is graded for real (jacobi_2gpu on one GPU is skipped before anything runs)."""
    real = grade.grade
    calls = []

    def fake(task, src, gpu, opts=grade.Options()):
        if task.name != "reduce":
            calls.append(task.name)
            return real(task, src, gpu, opts)
        if opts.all_routes:  # the bench's one grading of every route: its reference rate is not counted
            fake.every_route += 1
            r = canned(task, 1000.0)
            r.performance[0].baselines.append(Baseline("a second route", 2000.0, Timing([1.07] * 20, 2)))
            return r
        calls.append(task.name)
        rate = fake.rates[min(len([c for c in calls if c == "reduce"]), len(fake.rates)) - 1]
        return canned(task, rate, fake.verdict)

    fake.rates, fake.verdict, fake.calls, fake.every_route = [3900.0], Verdict.CORRECT, calls, 0
    monkeypatch.setattr(grade, "grade", fake)
    monkeypatch.setattr(bench, "driver_version", lambda info: "580.159.04")
    return fake


def test_a_gpus_folder_name_is_its_lowercase_name_with_dashes():
    assert bench.slug("NVIDIA H100 80GB HBM3") == "nvidia-h100-80gb-hbm3"
    assert bench.slug("Tesla V100S-PCIE-32GB") == "tesla-v100s-pcie-32gb"
    assert bench.slug("NVIDIA GeForce RTX 4090") == "nvidia-geforce-rtx-4090"


def test_the_spread_is_max_minus_min_over_the_median_and_needs_two_values():
    assert bench.spread([99.0, 100.0, 101.0]) == pytest.approx(0.02)
    assert bench.spread([100.0, 100.0, 100.0, 100.0, 100.0]) == 0.0
    assert bench.spread([100.0]) is None
    assert bench.spread([]) is None


def test_the_table_shows_the_reference_each_baseline_with_its_ratio_the_limit_and_the_spread(graded, tmp_path):
    graded.rates = [3900.0, 3861.0, 3939.0, 3900.0, 3900.0]
    out = tmp_path / "bench"
    said = []
    rc = bench.run(["reduce"], H200, out, 5, "python3 -m grader bench reduce --repeat 5", say=said.append)
    assert rc == 0 and graded.calls == ["reduce"] * 5
    md = (out / "README.md").read_text()
    assert md.startswith("# Benchmarks on NVIDIA H200\n")
    assert "- driver: 580.159.04 (CUDA 13.0)" in md
    assert "- command: `python3 -m grader bench reduce --repeat 5`" in md
    row = next(line for line in md.splitlines() if line.startswith("| reduce | n268435456"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[2] == "3,900 GB/s"
    assert cells[3] == "cub::DeviceReduce::Sum (baseline): 4,000 (0.97x); a second route: 2,000 (1.95x)"
    assert graded.every_route == 1  # the routes besides the baseline: one more grading
    assert cells[4] == "4,800 GB/s (dram, H200 datasheet)"
    assert cells[5] == "81.2%"
    assert cells[7] == "2.0%"  # (3,939 - 3,861) / 3,900
    assert cells[8] == "100 (all 5)"
    assert md.count("| reduce | ") == 1 + 5  # the rates row and one stage row per grading
    assert "| reduce | 1 | 0.4 | 6.0 | - | 9.5 | 4.0 | 3.1 |" in md
    assert md.split("## Rates", 1)[1] in "\n".join(said)  # the same tables on the terminal


def test_results_json_holds_every_grading_and_the_gpu_with_its_driver_and_date(graded, tmp_path):
    graded.rates = [3900.0, 3800.0]
    bench.run(["reduce"], H200, tmp_path, 2, "cmd", say=lambda s: None)
    rec = json.loads((tmp_path / "results.json").read_text())
    assert rec["gpu"]["name"] == "NVIDIA H200" and rec["driver"] == "580.159.04" and rec["date"][:2] == "20"
    [a] = rec["assignments"]
    assert a["status"] == "correct" and len(a["gradings"]) == 2
    assert a["gradings"][0]["stage_seconds"] == STAGES
    [c] = a["cases"]
    assert c["reference_rates"] == [3900.0, 3800.0] and c["reference"] == pytest.approx(3850.0)
    assert c["spread"] == pytest.approx(100 / 3850)
    assert c["baselines"][0]["ratio"] == pytest.approx(3850 / 4000)


def test_an_assignment_that_needs_two_gpus_is_skipped_on_one_with_its_reason(graded, tmp_path):
    rc = bench.run(["jacobi_2gpu", "reduce"], H200, tmp_path, 1, "cmd", say=lambda s: None)
    assert rc == 0  # skipped is not a failure
    rec = json.loads((tmp_path / "results.json").read_text())
    skipped = rec["assignments"][0]
    assert skipped["status"] == "skipped"
    assert skipped["message"] == "jacobi_2gpu needs 2 GPUs and this machine has 1: not graded here"
    assert "- jacobi_2gpu: skipped: jacobi_2gpu needs 2 GPUs" in (tmp_path / "README.md").read_text()


def test_a_reference_that_is_not_correct_makes_the_exit_code_1_and_is_listed_with_why(graded, tmp_path):
    graded.verdict = Verdict.INCORRECT
    assert bench.run(["reduce"], H200, tmp_path, 1, "cmd", say=lambda s: None) == 1
    md = (tmp_path / "README.md").read_text()
    assert "- reduce: failed: incorrect: case n31" in md


def test_benching_one_assignment_again_keeps_the_other_rows_of_the_same_gpus_table_with_their_date_and_command(
        graded, tmp_path):
    bench.run(["jacobi_2gpu", "reduce"], H200, tmp_path, 1, "bench both", say=lambda s: None)
    first = json.loads((tmp_path / "results.json").read_text())
    graded.rates = [3000.0]
    said = []
    assert bench.run(["reduce"], H200, tmp_path, 1, "bench reduce", say=said.append) == 0
    rec = json.loads((tmp_path / "results.json").read_text())
    assert [a["assignment"] for a in rec["assignments"]] == ["jacobi_2gpu", "reduce"]
    skipped, reduce = rec["assignments"]
    assert skipped["command"] == "bench both" and skipped["date"] == first["date"]
    assert reduce["command"] == "bench reduce" and reduce["cases"][0]["reference"] == 3000.0
    md = (tmp_path / "README.md").read_text()
    assert f"- jacobi_2gpu: {first['date']}, `bench both`" in md
    assert f"- reduce: {rec['date']}, `bench reduce`" in md and "- command:" not in md
    assert "| reduce | n268435456" in md and "- jacobi_2gpu: skipped:" in md
    assert any("the rows of jacobi_2gpu are kept" in line for line in said)


@pytest.mark.parametrize("other", [{"repeat": 2}, {"gpu": "NVIDIA H100 80GB HBM3"}])
def test_a_table_of_another_gpu_or_repeat_count_is_replaced_whole_and_the_run_says_so(graded, tmp_path, other):
    bench.run(["jacobi_2gpu", "reduce"], H200, tmp_path, 1, "bench both", say=lambda s: None)
    info = GpuInfo(**dict(H200.__dict__, name=other.get("gpu", H200.name)))
    said = []
    bench.run(["reduce"], info, tmp_path, other.get("repeat", 1), "bench reduce", say=said.append)
    rec = json.loads((tmp_path / "results.json").read_text())
    assert [a["assignment"] for a in rec["assignments"]] == ["reduce"]
    assert "- command: `bench reduce`" in (tmp_path / "README.md").read_text()
    assert any("this run's table replaces it" in line for line in said)


def test_an_unreadable_table_in_the_folder_is_replaced_and_the_run_says_why(graded, tmp_path):
    (tmp_path / "results.json").write_text("{not json")
    said = []
    assert bench.run(["reduce"], H200, tmp_path, 1, "bench reduce", say=said.append) == 0
    assert [a["assignment"] for a in json.loads((tmp_path / "results.json").read_text())["assignments"]] == ["reduce"]
    assert any("could not be read" in line for line in said)


def test_bench_writes_to_bench_slash_the_gpus_name_by_default(graded, monkeypatch, tmp_path):
    monkeypatch.setattr(tasks, "ROOT", tmp_path)
    monkeypatch.setattr("grader.gpu.detect", lambda: H200)
    (tmp_path / "reference" / "reduce").mkdir(parents=True)
    (tmp_path / "reference" / "reduce" / "kernel.cu").write_text("// the reference\n")
    assert cli.main(["bench", "reduce"]) == 0
    rec = json.loads((tmp_path / "bench" / "nvidia-h200" / "results.json").read_text())
    assert rec["command"] == "python3 -m grader bench reduce"


def test_without_the_hidden_references_bench_refuses_and_says_why(graded, monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(tasks, "ROOT", tmp_path)  # as in the student kit: no reference/
    monkeypatch.setattr("grader.gpu.detect", lambda: H200)
    assert cli.main(["bench", "reduce"]) == 2
    assert "reference/reduce/kernel.cu is missing" in capsys.readouterr().err
    assert graded.calls == []


def test_a_repeat_below_one_is_refused(graded, monkeypatch):
    monkeypatch.setattr("grader.gpu.detect", lambda: H200)
    assert cli.main(["bench", "reduce", "--repeat", "0"]) == 2


# --- on a GPU -------------------------------------------------------------------------------------

def test_bench_grades_reduces_reference_on_this_gpu_next_to_cub_and_the_bandwidth(local_gpu, tmp_path, capsys):
    assert bench.run(["reduce"], local_gpu, tmp_path, 1, "test") == 0
    rec = json.loads((tmp_path / "results.json").read_text())
    [c] = rec["assignments"][0]["cases"]
    assert c["reference"] > 0 and c["baselines"] and all(b["rate"] > 0 for b in c["baselines"])
    assert c["limit"] is None or c["reference"] <= c["limit"]
    st = rec["assignments"][0]["gradings"][0]["stage_seconds"]
    assert {"harness", "build", "correctness", "performance"} <= set(st)
    print(capsys.readouterr().out)
