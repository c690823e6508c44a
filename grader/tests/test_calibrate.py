"""calibrate.py: measured and estimated threshold profiles, and how they are written into the task
files. Host only, except the last test, which measures reduce's baseline on the local GPU."""
import copy
import json
import shutil

import pytest

from grader import calibrate, cli, gpu, report, score, tasks
from grader.calibrate import Measured
from grader.results import GpuInfo, Performance, Timing

TABLE = gpu.table()
H200 = GpuInfo(name="NVIDIA H200", arch="sm_90", model="H200", count=1)


def with_profiles(name, gpus):
    """The kit's task, its profiles replaced by `gpus` (the task file is not touched)."""
    t = tasks.load(name)
    t.data = copy.deepcopy(t.data)
    t.data["performance"]["gpus"] = copy.deepcopy(gpus)
    return t


def measured(rates, source="measured"):
    return {"rates": rates, "source": source}


@pytest.fixture
def kit(tmp_path):
    """A copy of the kit's assignments folder (task files, gpus.json, registry) to write into."""
    shutil.copytree(tasks.ROOT / "assignments", tmp_path / "assignments",
                    ignore=shutil.ignore_patterns("tests", "*.cu", "*.h", "*.cuh"))
    return tmp_path


# --- estimating -----------------------------------------------------------------------------------

def test_reduces_estimate_is_the_h200_profile_scaled_by_the_dram_ratio():
    task = with_profiles("reduce", {"H200": measured([1000, 2000, 3000, 4000])})
    new, _ = calibrate.estimates(task, TABLE)
    a100 = new["A100 SXM 80GB"]
    assert a100["rates"] == [425, 850, 1274, 1699]  # x 2039 / 4800, rounded
    assert a100["estimated"] is True
    assert a100["source"].startswith("estimated from the H200 profile by the datasheet dram ratio (0.425")
    assert a100["source"].endswith("not measured")


def test_trmms_estimate_is_scaled_by_the_fp64_ratio():
    task = with_profiles("trmm", {"H200": measured([1000, 2000, 4000, 6000])})
    new, _ = calibrate.estimates(task, TABLE)
    assert new["V100"]["rates"] == [116, 233, 466, 699]  # x 7.8 / 67, rounded half up
    assert "fp64 ratio" in new["V100"]["source"]


def test_conv1d_scales_its_copy_baseline_by_dram_not_by_its_fp32_metric():
    task = with_profiles("conv1d", {"H200": measured({"n67108864_w7": [100, 200, 350, 500],
                                                      "n67108864_w63": [1000, 2000, 3500, 5000]})})
    assert task.peak_kind == "fp32" and calibrate.bound_kind(task) == "dram"
    new, _ = calibrate.estimates(task, TABLE)
    assert new["L4"]["rates"] == {"n67108864_w7": [6, 13, 22, 31], "n67108864_w63": [63, 125, 219, 313]}


def test_estimates_come_from_a_measured_h100_sxm_profile_where_there_is_one():
    task = with_profiles("reduce", {"H200": measured([1000, 2000, 3000, 4000]),
                                    "H100 SXM": measured([700, 1400, 2100, 2800])})
    new, _ = calibrate.estimates(task, TABLE)
    assert new["H100 PCIe"]["source"].startswith("estimated from the H100 SXM profile")
    assert new["H100 PCIe"]["rates"] == [418, 836, 1254, 1672]  # x 2000 / 3350


def test_an_estimate_never_replaces_a_measured_profile():
    l4 = measured([1, 2, 3, 4], "measured on an L4")
    task = with_profiles("reduce", {"H200": measured([1000, 2000, 3000, 4000]), "L4": l4})
    new, notes = calibrate.estimates(task, TABLE)
    assert new["L4"] == l4 and new["H200"]["source"] == "measured"
    kept, note = calibrate.merge({"L4": l4}, "L4", {"rates": [9, 9, 9, 9], "source": "e", "estimated": True})
    assert kept["L4"] == l4 and "kept the measured profile" in note


def test_a_measured_profile_replaces_an_estimated_one():
    old = {"H100 SXM": {"rates": [1, 2, 3, 4], "source": "estimated", "estimated": True}}
    new, note = calibrate.merge(old, "H100 SXM", measured([5, 6, 7, 8]))
    assert new["H100 SXM"] == measured([5, 6, 7, 8]) and "replaced the estimated" in note
    assert old["H100 SXM"]["rates"] == [1, 2, 3, 4]  # the input is left as it was


def test_a_task_with_no_measured_profile_gets_no_estimate_and_says_why():
    task = with_profiles("jacobi", {})
    new, notes = calibrate.estimates(task, TABLE)
    assert new == {}
    assert "no measured profile" in notes[0] and "calibrate jacobi --write" in notes[0]


def test_an_estimated_profile_is_never_the_source_of_another_estimate():
    task = with_profiles("reduce", {"H100 SXM": {"rates": [1, 2, 3, 4], "source": "e", "estimated": True}})
    assert calibrate.estimate_source(task.data["performance"]["gpus"]) is None


# --- measured profiles ----------------------------------------------------------------------------

def test_a_measured_profile_is_the_tiers_fractions_of_the_baseline_and_says_where_it_came_from():
    task = with_profiles("reduce", {})
    m = Measured("n268435456", {"n": 268435456}, 4000.0, 0.537)
    prof = calibrate.measured_profile(task, H200, "580.1", "2026-01-01", [m])
    assert prof["rates"] == [1000, 2000, 3000, 3600]
    assert prof["source"] == ("cub::DeviceReduce::Sum measured at n = 268435456 on an NVIDIA H200 (driver 580.1) "
                              "on 2026-01-01: 4,000 GB/s; tiers at 25/50/75/90% of it")
    assert "estimated" not in prof


def test_a_task_with_several_graded_cases_gets_rates_per_case_and_every_other_route_in_the_source():
    task = with_profiles("conv1d", {})
    ms = [Measured("n67108864_w7", {"n": 67108864, "w": 7}, 7000.0, 0.13),
          Measured("n67108864_w63", {"n": 67108864, "w": 63}, 63000.0, 0.13, {"other route": 12.0})]
    prof = calibrate.measured_profile(task, H200, "580.1", "2026-01-01", ms)
    assert prof["rates"] == {"n67108864_w7": [700, 1400, 2450, 3500], "n67108864_w63": [6300, 12600, 22050, 31500]}
    assert "7,000 GFLOPS at n = 67108864, w = 7 and 63,000 GFLOPS (other route: 12)" in prof["source"]
    tasks.parse("conv1d", task.folder, {**task.data, "performance": {**task.data["performance"],
                                                                     "gpus": {"H200": prof}}}, "t")


def test_calibrate_on_one_gpu_skips_an_assignment_that_needs_two_and_says_why(monkeypatch):
    monkeypatch.setattr(calibrate, "measure", lambda *a, **k: pytest.fail("nothing may be measured"))
    monkeypatch.setattr("grader.bench.driver_version", lambda info: "580.1")
    said = []
    rc = calibrate.run_measure([tasks.load("jacobi_2gpu")], H200, write=False, say=said.append)
    assert rc == 0
    assert any("skipped: jacobi_2gpu needs 2 GPUs and this machine has 1" in s for s in said)


def test_a_measurement_written_to_a_task_file_replaces_its_estimate(kit, monkeypatch):
    calibrate.run_estimate([tasks.load("reduce", kit)], write=True, root=kit, say=lambda s: None)
    h100 = GpuInfo(name="NVIDIA H100 80GB HBM3", arch="sm_90", model="H100 SXM")
    monkeypatch.setattr(calibrate, "measure", lambda task, info, say: [Measured("n268435456", {"n": 268435456},
                                                                                3000.0, 0.7)])
    monkeypatch.setattr("grader.bench.driver_version", lambda info: "580.1")
    assert calibrate.run_measure([tasks.load("reduce", kit)], h100, write=True, say=lambda s: None) == 0
    prof = tasks.load("reduce", kit).data["performance"]["gpus"]["H100 SXM"]
    assert prof["rates"] == [750, 1500, 2250, 2700] and "estimated" not in prof
    assert "on an NVIDIA H100 80GB HBM3 (driver 580.1)" in prof["source"]


# --- writing the task files -----------------------------------------------------------------------

@pytest.mark.parametrize("name", tasks.registry())
def test_writing_unchanged_profiles_leaves_the_task_file_byte_for_byte_as_it_was(name):
    text = (tasks.ROOT / "assignments" / name / "task.json").read_text()
    assert calibrate.with_gpus(text, json.loads(text)["performance"]["gpus"]) == text


@pytest.mark.parametrize("name", tasks.registry())
def test_writing_estimates_changes_nothing_in_the_task_file_but_its_gpus_object(kit, name):
    path = kit / "assignments" / name / "task.json"
    before = path.read_text()
    gpus_before = json.loads(before)["performance"]["gpus"]
    task = tasks.load(name, kit)
    gpus_before = {m: p for m, p in gpus_before.items() if calibrate.is_measured(p)}  # the estimates go
    if not gpus_before:  # one to estimate from
        gpus_before = {"H200": measured([1, 2, 3, 4] if len(task.graded) == 1 else
                                        {g.case.id: [1, 2, 3, 4] for g in task.graded})}
    calibrate.write_profiles(task, gpus_before)
    before = path.read_text()
    assert len(json.loads(before)["performance"]["gpus"]) < len(TABLE)
    calibrate.run_estimate([tasks.load(name, kit)], write=True, root=kit, say=lambda s: None)
    after = path.read_text()
    old, new = json.loads(before), json.loads(after)
    new_gpus = new["performance"]["gpus"]
    assert set(new_gpus) == set(TABLE)  # every GPU of gpus.json has a profile now
    old["performance"].pop("gpus"), new["performance"].pop("gpus")
    assert old == new
    s0, e0 = tasks.find_value(before, ("performance", "gpus"))
    s1, e1 = tasks.find_value(after, ("performance", "gpus"))
    assert before[:s0] == after[:s1] and before[e0:] == after[e1:]
    for model, prof in gpus_before.items():  # what was measured before is still there, unchanged
        if calibrate.is_measured(prof):
            assert new_gpus[model] == prof


def test_a_hand_formatted_profile_keeps_its_lines_when_others_are_added(kit):
    path = kit / "assignments" / "trmm" / "task.json"
    h200_block = path.read_text().split('"gpus": {\n', 1)[1].split("\n      }", 1)[0]
    calibrate.run_estimate([tasks.load("trmm", kit)], write=True, root=kit, say=lambda s: None)
    assert h200_block in path.read_text()


def test_estimating_twice_writes_the_same_files(kit):
    names = tasks.registry(kit)
    calibrate.run_estimate([tasks.load(n, kit) for n in names], write=True, root=kit, say=lambda s: None)
    first = {n: (kit / "assignments" / n / "task.json").read_text() for n in names}
    calibrate.run_estimate([tasks.load(n, kit) for n in names], write=True, root=kit, say=lambda s: None)
    assert first == {n: (kit / "assignments" / n / "task.json").read_text() for n in names}


def test_a_task_file_without_a_gpus_object_gets_one_inside_performance(kit):
    path = kit / "assignments" / "trmm" / "task.json"
    text = path.read_text()
    s, e = tasks.find_value(text, ("performance", "gpus"))
    stripped = text[:text.rfind(",", 0, s)] + text[e:]
    assert "gpus" not in json.loads(stripped)["performance"]
    new = calibrate.with_gpus(stripped, {"H200": measured([1, 2, 3, 4])})
    assert json.loads(new)["performance"]["gpus"] == {"H200": measured([1, 2, 3, 4])}
    assert '\n    "gpus": {\n      "H200": {\n        "rates": [1, 2, 3, 4],' in new


def test_estimate_without_write_changes_no_file_and_needs_no_gpu(monkeypatch, capsys):
    monkeypatch.setattr(gpu, "detect", lambda: pytest.fail("--estimate must not look for a GPU"))
    before = (tasks.ROOT / "assignments" / "reduce" / "task.json").read_text()
    assert cli.main(["calibrate", "reduce", "--estimate"]) == 0
    assert (tasks.ROOT / "assignments" / "reduce" / "task.json").read_text() == before
    assert "nothing written" in capsys.readouterr().out


# --- the kit's own task files ---------------------------------------------------------------------

@pytest.mark.parametrize("name", tasks.registry())
def test_where_a_profile_was_measured_every_gpu_of_the_table_has_one_each_saying_where_it_came_from(name):
    gpus = tasks.load(name).data["performance"]["gpus"]
    if not any(calibrate.is_measured(p) for p in gpus.values()):
        pytest.skip(f"{name} has no measured profile yet (grader calibrate {name} --write on a GPU)")
    assert set(gpus) == set(TABLE), "run: python3 -m grader calibrate --estimate --write"
    for model, prof in gpus.items():
        assert prof["source"]
        if not calibrate.is_measured(prof):
            assert prof["source"].startswith("estimated from the ") and "not measured" in prof["source"]
        else:
            assert " measured " in f" {prof['source']}"


def test_grading_on_a_gpu_with_an_estimated_profile_uses_it_and_reports_where_it_came_from(kit):
    calibrate.run_estimate([tasks.load("reduce", kit)], write=True, root=kit, say=lambda s: None)
    task = tasks.load("reduce", kit)
    l4 = GpuInfo(name="NVIDIA L4", arch="sm_89", model="L4")
    th = score.thresholds(task, l4, baseline_rate=250.0)
    assert th.estimated is True
    assert th.rates == [float(r) for r in task.data["performance"]["gpus"]["L4"]["rates"]]
    assert th.source.startswith("estimated from the H100 SXM profile by the datasheet dram ratio")  # H100 measured, preferred
    from grader.grade import new_result, Options
    r = new_result(task, tasks.ROOT / "kernel.cu", l4, Options())
    r.performance.append(Performance("n268435456", {"n": 268435456}, "GB/s", Timing([1.0] * 10, 2), 200.0, 200.0,
                                     thresholds=th))
    assert th.source in report.terminal(r)


# --- on a GPU -------------------------------------------------------------------------------------

def test_calibrate_times_reduces_baseline_on_this_gpu_as_grading_does(local_gpu):
    task = tasks.load("reduce")
    [m] = calibrate.measure(task, local_gpu)
    bw, _ = gpu.peak(local_gpu, "dram")
    assert 0 < m.rate <= bw, f"{m.rate:,.0f} GB/s against a peak of {bw:,.0f}"
    prof = calibrate.measured_profile(task, local_gpu, "x", "today", [m])
    assert prof["rates"] == sorted(prof["rates"]) and local_gpu.name in prof["source"]
