"""score.py: which thresholds apply on which GPU, and how rates and passing cases become points."""
import copy
import json
import math

import pytest

from grader import score, tasks
from grader.results import GpuInfo, Thresholds

H200 = GpuInfo(name="NVIDIA H200", arch="sm_90", model="H200")
UNKNOWN = GpuInfo(name="NVIDIA Future GPU 9000", arch="sm_120", model=None)


@pytest.fixture
def task():
    """trmm as in the kit, with its H200 profile replaced by a fixed one so the test does not
    depend on the numbers measured for the kit."""
    t = tasks.load("trmm")
    t.data = copy.deepcopy(t.data)
    t.data["performance"]["tiers"] = [{"fraction": 0.1, "points": 10}, {"fraction": 0.2, "points": 25},
                                      {"fraction": 0.4, "points": 40}, {"fraction": 0.6, "points": 50}]
    t.data["performance"]["baseline"] = "cublasDtrmm"
    t.data["performance"]["gpus"] = {"H200": {"rates": [1000, 2000, 4000, 6000], "source": "measured on an H200"}}
    return t


def test_a_gpu_with_a_profile_in_the_task_uses_its_rates_and_source(task):
    th = score.thresholds(task, H200, baseline_rate=30000.0)
    assert th.rates == [1000.0, 2000.0, 4000.0, 6000.0]
    assert th.points == [10.0, 25.0, 40.0, 50.0]
    assert th.source == "measured on an H200"
    assert th.estimated is False


def test_the_profile_wins_over_a_baseline_measured_now(task):
    th = score.thresholds(task, H200, baseline_rate=1.0)
    assert th.rates == [1000.0, 2000.0, 4000.0, 6000.0]


@pytest.mark.parametrize("name", tasks.registry())
def test_the_kits_own_profiles_are_used_for_their_gpus_with_rates_increasing_by_tier(name):
    task = tasks.load(name)
    for model, prof in task.data["performance"].get("gpus", {}).items():
        for g in task.graded:
            rates = prof["rates"][g.case.id] if isinstance(prof["rates"], dict) else prof["rates"]
            th = score.thresholds(task, GpuInfo(name=model, arch="sm_90", model=model), None, g.case.id)
            assert th.rates == [float(r) for r in rates]
            assert th.rates == sorted(th.rates), f"{model}: rates must increase with the tiers"


def test_a_gpu_missing_from_the_table_gets_thresholds_from_the_baseline_measured_now(task):
    th = score.thresholds(task, UNKNOWN, baseline_rate=20000.0)
    assert th.rates == pytest.approx([2000.0, 4000.0, 8000.0, 12000.0])
    assert th.points == [10.0, 25.0, 40.0, 50.0]
    assert th.estimated is True
    assert UNKNOWN.name in th.source
    assert "derived from cublasDtrmm" in th.source  # the baseline's name, from the task
    assert "20,000" in th.source


def test_a_known_gpu_model_without_a_profile_also_gets_thresholds_from_the_baseline(task):
    h100 = GpuInfo(name="NVIDIA H100 80GB HBM3", arch="sm_90", model="H100 SXM")
    th = score.thresholds(task, h100, baseline_rate=10000.0)
    assert th.rates == pytest.approx([1000.0, 2000.0, 4000.0, 6000.0])
    assert th.estimated is True
    assert "NVIDIA H100 80GB HBM3" in th.source


@pytest.mark.parametrize("baseline", [None, 0.0])
def test_no_profile_and_no_baseline_gives_no_thresholds(task, baseline):
    assert score.thresholds(task, UNKNOWN, baseline_rate=baseline) is None


TH = Thresholds(source="test", rates=[1000.0, 2000.0, 4000.0, 6000.0], points=[10.0, 25.0, 40.0, 50.0])


@pytest.mark.parametrize("edge,below,at", [(1000.0, 0.0, 10.0), (2000.0, 10.0, 25.0), (4000.0, 25.0, 40.0),
                                           (6000.0, 40.0, 50.0)])
def test_a_rate_earns_a_tier_exactly_at_its_edge_and_not_just_below(edge, below, at):
    assert score.performance_points(math.nextafter(edge, 0.0), TH) == below
    assert score.performance_points(edge, TH) == at
    assert score.performance_points(edge * 1.01, TH) == at


def test_no_rate_earns_performance_points_below_the_first_tier():
    assert score.performance_points(0.0, TH) == 0.0


def test_a_rate_far_above_the_last_tier_earns_only_the_performance_points():
    assert score.performance_points(1e12, TH) == 50.0


def eight_case_task():
    data = copy.deepcopy(tasks.load("trmm").data)
    data["cases"] = [{"id": f"c{i}", "n": i + 1, "seed": i} for i in range(8)]
    data["graded"] = {"id": "c7", "runs": 10}
    data["points"] = {"correctness": 50, "performance": data["points"]["performance"]}
    return tasks.parse("x", tasks.ROOT, data, "x/task.json")


def test_each_passing_case_earns_an_equal_share_of_the_correctness_points():
    task = eight_case_task()
    ids = [c.id for c in task.cases]
    assert score.correctness_points(task, set(ids[:3])) == pytest.approx(18.75)  # 3 of 8 cases of 50 points
    assert score.correctness_points(task, set()) == 0.0
    assert score.correctness_points(task, set(ids)) == 50.0


def test_a_case_with_nothing_to_compute_must_pass_but_earns_no_share():
    task = tasks.load("syr2k")
    unscored = [c.id for c in task.cases if not c.scored]
    assert unscored == ["n1"]
    assert score.correctness_points(task, set(unscored)) == 0.0
    assert score.correctness_points(task, {c.id for c in task.cases}) == task.points["correctness"]


def test_every_case_correct_and_the_last_tier_reached_give_the_maximum_score():
    task = tasks.load("trmm")
    top = score.thresholds(task, UNKNOWN, baseline_rate=1000.0)
    passed = {c.id for c in task.cases}
    assert score.correctness_points(task, passed) + score.performance_points(1e12, top) == task.max_score


def test_each_graded_case_is_scored_against_its_own_rates():
    data = json.loads((tasks.ROOT / "assignments" / "trmm" / "task.json").read_text())
    data["graded"] = [{"id": "n1024"}, {"id": "n4096"}]
    data["performance"]["gpus"] = {"H200": {"rates": {"n1024": [1, 2, 3, 4], "n4096": [10, 20, 30, 40]},
                                            "source": "test"}}
    task = tasks.parse("x", tasks.ROOT, data, "x/task.json")
    h200 = GpuInfo(name="NVIDIA H200", arch="sm_90", model="H200")
    assert score.thresholds(task, h200, None, "n1024").rates == [1, 2, 3, 4]
    assert score.thresholds(task, h200, None, "n4096").rates == [10, 20, 30, 40]
