"""Gradescope: results.json in Gradescope's format, built from grading records, and the `gradescope`
verb run on a fake /autograder layout with the replaying fake harness (no GPU needed)."""
import json
import zipfile
from types import SimpleNamespace

import pytest

from grader import gradescope, tasks
from grader import gpu as gpu_mod
from fake_kit import ENTRY, kernel

STATUSES = {"passed", "failed"}
VISIBILITIES = {"hidden", "after_due_date", "after_published", "visible"}


def check_schema(data: dict) -> None:
    """What Gradescope reads: a numeric score and execution_time, output, and well-formed tests."""
    assert isinstance(data["score"], (int, float))
    assert isinstance(data["execution_time"], int)
    assert isinstance(data["output"], str)
    for t in data["tests"]:
        assert set(t) >= {"name", "score", "max_score", "status", "output", "visibility"}
        assert isinstance(t["score"], (int, float)) and isinstance(t["max_score"], (int, float))
        assert t["status"] in STATUSES and t["visibility"] in VISIBILITIES
        assert 0 <= t["score"] <= t["max_score"] + 1e-9
    assert sum(t["score"] for t in data["tests"]) == pytest.approx(data["score"], abs=1e-3)


def record(verdict="correct", score=100.0, passed=9, perf_points=50.0):
    task = tasks.load("trmm", include_hidden=True)
    cases = [{"id": c.id, "params": c.params, "verdict": "correct" if i < passed else "incorrect",
              "message": "relative error 1.0e-16" if i < passed else "relative error 1e-3 exceeds the tolerance"}
             for i, c in enumerate(task.cases)]
    perf = [{"case_id": "n4096", "params": {"n": 4096}, "metric": "GFLOPS", "rate": 18808.0,
             "baseline_rate": 28491.0, "baseline_name": "cublasDtrmm", "points": perf_points,
             "thresholds": {"rates": [2831, 5663, 11325, 16988], "points": [10, 25, 40, 50]}}]
    return {"assignment": "trmm", "verdict": verdict, "message": "", "score": score,
            "correctness_points": 50.0 * passed / len(task.cases),
            "cases": cases, "performance": perf if verdict in ("correct", "invalid_measurement") else []}


def test_a_full_marks_record_gives_passing_tests_that_add_up_to_its_score():
    task_of = {"trmm": tasks.load("trmm", include_hidden=True)}
    data = gradescope.results_json([record()], task_of, hidden={"trmm": ["hidden-1"]})
    check_schema(data)
    assert data["score"] == pytest.approx(100)
    assert all(t["status"] == "passed" for t in data["tests"])
    hidden = [t for t in data["tests"] if "hidden-1" in t["name"]]
    assert len(hidden) == 1 and "(n=" not in hidden[0]["name"]
    # Every test visible: one that is not would keep the total from the student until publication.
    assert {t["visibility"] for t in data["tests"]} == {"visible"}
    perf = next(t for t in data["tests"] if "performance" in t["name"])
    assert perf["max_score"] == 50 and "0.66x cublasDtrmm" in perf["output"]


def test_a_failing_case_fails_its_test_and_earns_no_performance_points():
    task_of = {"trmm": tasks.load("trmm", include_hidden=True)}
    data = gradescope.results_json([record("incorrect", 50 * 7 / 9, passed=7)], task_of)
    check_schema(data)
    assert [t["status"] for t in data["tests"]].count("failed") == 3  # two cases, and the performance
    assert data["score"] == pytest.approx(50 * 7 / 9)


def test_a_wrong_timed_output_withdraws_the_case_points_and_says_why():
    task_of = {"trmm": tasks.load("trmm", include_hidden=True)}
    rec = record("incorrect", 0.0)
    rec["message"] = "the output of timed run 3 is wrong"
    data = gradescope.results_json([rec], task_of)
    check_schema(data)
    assert data["score"] == 0 and all(t["status"] == "failed" for t in data["tests"])
    assert "withdrawn" in data["tests"][0]["output"]


def test_a_build_error_is_one_failed_test_with_the_compilers_message_and_a_missing_assignment_another():
    task_of = {n: tasks.load(n) for n in ("trmm", "syr2k")}
    rec = {"assignment": "trmm", "verdict": "build_error", "message": "kernel.cu does not compile", "score": 0.0,
           "cases": [], "build_log": 'kernel.cu(3): error: identifier "Bold" is undefined'}
    data = gradescope.results_json([rec], task_of, missing=["syr2k"])
    check_schema(data)
    assert [(t["name"], t["max_score"]) for t in data["tests"]] == [("trmm: build", 100), ("syr2k: submission", 100)]
    assert "Bold" in data["tests"][0]["output"]


def autograder(tmp_path, files: dict) -> SimpleNamespace:
    root = tmp_path / "autograder"
    for d in ("source", "submission", "results"):
        (root / d).mkdir(parents=True)
    for name, text in files.items():
        (root / "submission" / name).parent.mkdir(parents=True, exist_ok=True)
        (root / "submission" / name).write_text(text)
    (root / "submission_metadata.json").write_text(json.dumps({"users": [{"name": "Ada Lovelace", "id": 1}]}))
    # The fake harness's runner is a script: these tests grade unjailed (test_jail.py has the jail's).
    return SimpleNamespace(root=root, assignments=["trmm"], no_isolation=True)


def test_the_gradescope_entry_point_grades_the_submission_and_writes_results_json(fake_kit, tmp_path):
    a = autograder(tmp_path, {"kernel.cu": kernel("reference")})
    assert gradescope.main(a) == 0
    data = json.loads((a.root / "results" / "results.json").read_text())
    check_schema(data)
    assert data["score"] == pytest.approx(100)
    assert "Ada Lovelace" in data["output"]
    hidden = [t for t in data["tests"] if "hidden-1" in t["name"]]  # trmm's hidden case, graded and shown
    assert len(hidden) == 1 and hidden[0]["visibility"] == "visible" and hidden[0]["status"] == "passed"
    assert "e-" not in hidden[0].get("output", "") + hidden[0]["name"]  # no relative error: the program chose it


def test_the_gradescope_entry_point_unpacks_a_zip_and_reports_a_wrong_result(fake_kit, tmp_path):
    a = autograder(tmp_path, {})
    with zipfile.ZipFile(a.root / "submission" / "upload.zip", "w") as z:
        z.writestr("trmm/kernel.cu", kernel("no_bounds_check"))
    assert gradescope.main(a) == 0
    data = json.loads((a.root / "results" / "results.json").read_text())
    check_schema(data)
    assert data["score"] == pytest.approx(50 * 2 / 9)
    assert data["extra_data"]["verdicts"] == {"trmm": "incorrect"}


def test_a_submission_with_nothing_gradeable_gets_results_json_saying_so(fake_kit, tmp_path):
    a = autograder(tmp_path, {"README.txt": "see attached"})
    assert gradescope.main(a) == 0
    data = json.loads((a.root / "results" / "results.json").read_text())
    check_schema(data)
    assert data["score"] == 0 and "nothing gradeable" in data["output"]


def test_without_a_gpu_results_json_says_the_submission_was_not_graded(fake_kit, tmp_path, monkeypatch):
    def no_gpu():
        raise gpu_mod.NoGpu("no CUDA GPU: test")
    monkeypatch.setattr(gpu_mod, "detect", no_gpu)
    a = autograder(tmp_path, {"kernel.cu": ENTRY})
    assert gradescope.main(a) == 2
    data = json.loads((a.root / "results" / "results.json").read_text())
    check_schema(data)
    assert data["score"] == 0 and "no usable CUDA GPU" in data["output"]


def test_a_disk_below_the_jails_reserve_gives_results_json_saying_not_graded_and_why(fake_kit, tmp_path):
    a = autograder(tmp_path, {"kernel.cu": "// DISK_LOW\n" + ENTRY})
    gradescope.main(a)
    data = json.loads((a.root / "results" / "results.json").read_text())
    check_schema(data)
    assert data["score"] == 0 and "less than 1 GiB free" in data["output"], data["output"]


def test_a_submission_with_1200_nested_folders_beside_kernel_cu_is_graded_and_its_results_name_the_folders_not_read(fake_kit, tmp_path):
    # 1,200 nested folders beside kernel.cu (a path of 2,400 characters, under PATH_MAX): the walk
    # raised RecursionError out of the autograder (pathlib's walk recursed before Python 3.12), and
    # Gradescope said only that it had failed.
    import os
    a = autograder(tmp_path, {"kernel.cu": kernel("reference")})
    here = os.getcwd()
    os.chdir(a.root / "submission")
    try:
        for _ in range(1200):
            os.mkdir("d")
            os.chdir("d")
    finally:
        os.chdir(here)
    try:
        assert gradescope.main(a) == 0
        data = json.loads((a.root / "results" / "results.json").read_text())
        assert data["tests"][0]["status"] == "passed", data
        assert "d/d/d" in data["output"] and "more than 32 folders deep, not read" in data["output"], data["output"]
    finally:  # removed from the bottom up: a recursive removal (pytest's) is as deep as the walk
        os.chdir(a.root / "submission")
        try:
            while os.path.isdir("d"):
                os.chdir("d")
            while os.getcwd() != str(a.root / "submission"):
                os.chdir("..")
                os.rmdir("d")
        finally:
            os.chdir(here)
