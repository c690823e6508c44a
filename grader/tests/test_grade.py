"""The grade verb's verdicts, replayed from runner and checker records taken on an NVIDIA H200.

The real harness is replaced by tests/fake_harness.py, which replays what it recorded; everything
else (the plans, the retry after a fault, the per-case time limit, the checks, the scoring) is the
grader's own code. No GPU is needed.
"""
import json
import os
import stat
import sys
import time
from pathlib import Path

import pytest

from grader import build, checks, grade, performance, report, tasks
from grader.results import CaseResult, GpuInfo, Verdict

FIXTURES = Path(__file__).parent / "fixtures"
FAKE = Path(__file__).parent / "fake_harness.py"


def wrapper(path: Path, role: str) -> Path:
    path.write_text(f"#!/bin/sh\nexec {sys.executable} {FAKE} {role} \"$@\"\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


@pytest.fixture
def replay(monkeypatch, tmp_path):
    """grade(scenario) grades trmm against the recorded scenario; returns (result, expected)."""
    checker = wrapper(tmp_path / "checker", "checker")
    monkeypatch.setattr(build, "build_harness", lambda task, arch, log: None)
    monkeypatch.setattr(build, "compile_submission", lambda src, work, arch, timeout: (True, ""))
    monkeypatch.setattr(build, "scan_forbidden", lambda obj: [])
    monkeypatch.setattr(build, "link_runner",
                        lambda task, work, arch, timeout: (wrapper(work / "runner", "runner"), (True, ""))[1])
    monkeypatch.setattr(build, "checker_path", lambda task, arch: checker)
    gpu = GpuInfo(**json.loads((FIXTURES / "gpu_h200.json").read_text()))

    def run(scenario, case_timeout=None, opts=grade.Options()):
        monkeypatch.setenv("KIT_FAKE_FIXTURE", str(FIXTURES / "trmm" / scenario))
        task = tasks.load("trmm")
        if case_timeout:
            task.data["timeouts_s"]["case"] = case_timeout
        expected = json.loads((FIXTURES / "trmm" / scenario / "expected.json").read_text())
        return grade.grade(task, Path("kernel.cu"), gpu, opts), expected

    return run


def check_against_recording(result, expected):
    assert result.verdict == Verdict(expected["verdict"])
    assert {c.id: c.verdict.value for c in result.cases} == expected["cases"]
    assert result.score == pytest.approx(expected["score"])


def test_the_reference_replay_is_correct_with_full_marks_and_its_rate_next_to_cublas(replay):
    r, expected = replay("reference")
    check_against_recording(r, expected)
    assert r.performance[0].rate == pytest.approx(expected["rate"])
    assert r.performance[0].baseline_rate == pytest.approx(expected["baseline_rate"])
    assert r.performance[0].thresholds.source.startswith("cublasDtrmm via transposes measured")
    assert not r.performance[0].thresholds.estimated
    assert len(r.performance[0].timing.times_ms) == 10


def test_a_grading_times_the_baseline_route_alone_and_every_route_only_when_asked(replay):
    r, _ = replay("reference")
    assert [b.name for b in r.performance[0].baselines] == ["cublasDtrmm via transposes"]
    r, _ = replay("reference", opts=grade.Options(all_routes=True))
    assert [b.name for b in r.performance[0].baselines] == [
        "cublasDtrmm via transposes", "cublasDtrmm out of place + copy", "cublasDtrmm in place"]
    assert r.performance[0].baseline_rate == pytest.approx(r.performance[0].baselines[0].rate)


def test_an_unfilled_skeleton_is_incorrect_and_told_that_nothing_was_computed(replay):
    r, expected = replay("skeleton")
    check_against_recording(r, expected)
    assert "output not computed" in r.message
    assert r.cases[0].rel_error is None  # no error norm shown for an output that was never written
    assert r.performance == []


def test_a_refused_launch_is_a_launch_error_in_every_case_each_run_in_a_fresh_process(replay):
    r, expected = replay("block_64x64")
    check_against_recording(r, expected)
    assert all(c.verdict == Verdict.LAUNCH_ERROR for c in r.cases)
    assert "nothing ran" in r.message


def test_an_illegal_address_is_a_runtime_error_that_names_the_cuda_error(replay):
    r, expected = replay("illegal_address")
    check_against_recording(r, expected)
    assert "cudaErrorIllegalAddress" in r.message


def test_missing_bounds_checks_fail_the_odd_sizes_and_earn_the_share_of_the_passing_ones(replay):
    r, expected = replay("no_bounds_check")
    check_against_recording(r, expected)
    passed = [c.id for c in r.cases if c.verdict == Verdict.CORRECT]
    assert passed == ["n1024", "n4096"]
    assert r.score == pytest.approx(50 * 2 / 8)


def test_a_hung_kernel_times_out_in_its_case_and_the_later_cases_are_not_run(replay):
    r, expected = replay("endless_loop", case_timeout=1)
    assert r.verdict == Verdict.TIMEOUT
    assert r.cases[0].verdict == Verdict.TIMEOUT
    assert all(c.verdict == Verdict.NOT_RUN for c in r.cases[1:])
    assert r.score == 0


def test_a_rate_above_the_gpus_peak_is_an_invalid_measurement_and_not_scored(replay, monkeypatch):
    monkeypatch.setattr(performance, "peak", lambda gpu, kind: (1000.0, "test"))  # 1 TFLOP/s "peak"
    r, _ = replay("reference")
    assert r.verdict == Verdict.INVALID_MEASUREMENT
    assert "above this GPU's peak" in r.message
    assert r.score == r.correctness_points == 50


def test_the_terminal_report_shows_cases_rates_thresholds_and_score(replay):
    r, _ = replay("reference")
    text = report.terminal(r)
    assert "NVIDIA H200" in text
    assert "n1023" in text and "pass" in text
    assert "cublasDtrmm via transposes" in text and "you: 0.48x" in text
    assert "Score: 100 / 100" in text


def test_the_terminal_report_keeps_its_columns_in_line_when_a_case_id_or_size_is_long(replay):
    r, _ = replay("reference")
    r.cases = [CaseResult("n1", {"n": 1}, Verdict.CORRECT, rel_error=0.0),
               CaseResult("n12345_w255", {"n": 12345, "w": 255}, Verdict.INCORRECT, "no element of P was written"),
               CaseResult("n1000003_w63", {"n": 1000003, "w": 63, "k": 7}, Verdict.CORRECT, rel_error=1e-7)]
    r.performance[0].baselines[0].name = "copy of the same bytes"
    lines = report.terminal(r).splitlines()
    header = next(i for i, line in enumerate(lines) if line.lstrip().startswith("case "))
    table = lines[header:header + 4]
    for word in ("result", "rel. error"):
        col = table[0].index(word)
        assert all(line[col - 1] == " " and line[col] != " " for line in table[1:]), (word, table)
    perf = [line for line in lines if line.startswith("     ") and " GFLOPS " in line
            and "measured at" not in line]  # the thresholds' source names the baseline's own rate
    assert len({line.index(" GFLOPS ") for line in perf}) == 1, perf


def test_the_json_record_round_trips_with_verdicts_as_words(replay, tmp_path):
    r, _ = replay("no_bounds_check")
    out = tmp_path / "trmm.json"
    report.write_json(r, out)
    data = json.loads(out.read_text())
    assert data["verdict"] == "incorrect"
    assert data["cases"][0]["verdict"] == "incorrect"
    assert data["score"] == pytest.approx(12.5)


def test_a_wrong_one_element_output_names_both_values_and_the_tolerance():
    rec = {"array": "sweeps", "pass": False, "compared": 1, "rel_error": 1 / 21, "value": 22.0, "expected": 21.0}
    msg = checks.explain(rec, 1e-10)
    assert msg == "relative error 4.8e-02 exceeds the tolerance 1e-10 (sweeps is 22, expected 21)"


def test_a_wrong_array_names_its_worst_element():
    rec = {"array": "C", "pass": False, "compared": 9, "rel_error": 0.5, "worst_index": 4, "worst_got": 1.0,
           "worst_want": 2.0}
    assert checks.explain(rec, 1e-10) == ("relative error 5.0e-01 exceeds the tolerance 1e-10 "
                                         "(worst: C[4] = 1, expected 2)")


def test_a_runner_stopped_at_the_jails_memory_limit_leaves_the_later_cases_not_run(monkeypatch):
    """A hog in its first call would take every fresh runner to the limit again (30 s of a
    batch's GPU time for an 11-case assignment): the first kill ends the stage."""
    from grader import judged, sandbox
    task = tasks.load("conv1d")
    first = task.cases[0].id
    sessions = []

    def session(task, work, arch, plan, label, *args, **kwargs):
        runner = sandbox.Run(-9, False, 1.0, "", "used more than 4 GiB of host memory")
        sessions.append(label)
        return judged.Session(records=[{"event": "ready"}, {"event": "start", "case": first}], runner=runner)

    monkeypatch.setattr(judged, "session", session)
    cases = grade.correctness(task, Path("work"), "sm_90", None)
    assert sessions == ["correctness1"]
    assert cases[0].verdict == Verdict.RUNTIME_ERROR and "4 GiB of host memory" in cases[0].message
    assert all(c.verdict == Verdict.NOT_RUN and "limits" in c.message for c in cases[1:])


def test_a_runner_found_over_the_jails_limits_only_once_it_ended_loses_every_case_it_ran(monkeypatch):
    """hostile/nested_folders.cu on an H200: every case done between two looks at its work folder, the
    folders found when the run ended, and full correctness points all the same."""
    from grader import judged, sandbox
    task = tasks.load("conv1d")
    records = [{"event": "ready"}]
    for c in task.cases:
        records += [{"event": "start", "case": c.id}, {"event": "done", "case": c.id, "ms": 1.0}]

    def session(task, work, arch, plan, label, *args, **kwargs):
        runner = sandbox.Run(0, False, 0.2, "", "made folders nested past 1,024 bytes of path in its work folder")
        return judged.Session(records=records, runner=runner, judge=sandbox.Run(0, False, 0.2, ""))

    monkeypatch.setattr(judged, "session", session)
    cases = grade.correctness(task, Path("work"), "sm_90", None)
    assert all(c.verdict == Verdict.RUNTIME_ERROR and "nested past" in c.message for c in cases), cases


def test_a_runner_stopped_at_the_jails_limits_mid_run_loses_the_cases_it_finished_before_the_look(monkeypatch):
    """hostile/wide_char_nesting.cu on an H200: six cases done before the first look at its work folder
    found the folders, and 33 points kept for them. The look tells only that the run is over, not since
    when: every case it started is charged, and the rest are not run."""
    from grader import judged, sandbox
    task = tasks.load("conv1d")
    records = [{"event": "ready"}]
    for c in task.cases[:6]:
        records += [{"event": "start", "case": c.id}, {"event": "done", "case": c.id, "ms": 1.0}]
    records.append({"event": "start", "case": task.cases[6].id})

    def session(task, work, arch, plan, label, *args, **kwargs):
        runner = sandbox.Run(-9, False, 0.3, "", "made folders nested past 1,024 bytes of path in its work folder")
        return judged.Session(records=records, runner=runner, judge=sandbox.Run(0, False, 0.3, ""))

    monkeypatch.setattr(judged, "session", session)
    cases = grade.correctness(task, Path("work"), "sm_90", None)
    assert all(c.verdict == Verdict.RUNTIME_ERROR and "nested past" in c.message for c in cases[:7]), cases[:7]
    assert all(c.verdict == Verdict.NOT_RUN and "limits" in c.message for c in cases[7:]), cases[7:]


@pytest.mark.parametrize("stopped", ["correctness", "hidden"])
def test_a_program_stopped_at_the_jails_limits_in_one_run_keeps_no_case_of_the_other(monkeypatch, tmp_path, stopped):
    """hostile/descriptor_flood.cu on an H200: its run of the public cases was stopped in the first case,
    while the hidden case, run at the same time by a runner of its own that ended before any look, kept
    its 5.6 points. A program stopped for going over the jail's limits keeps no case's points, in
    whichever of its runs the look found it."""
    from grader import judged, sandbox
    task = tasks.load("conv1d", include_hidden=True)
    (tmp_path / "runner").write_bytes(b"")

    def session(task, work, arch, plan, label, *args, **kwargs):
        ids = [line.split()[1].removeprefix("id=") for line in plan.splitlines()]
        records = [{"event": "ready"}]
        for i in ids if not label.startswith(stopped) else ids[:1]:
            records += [{"event": "start", "case": i}, {"event": "done", "case": i, "ms": 1.0},
                        {"event": "check", "case": i, "array": "P", "pass": True, "compared": 10, "rel_error": 0.0}]
        why = "held more than 65,536 open files across its threads" if label.startswith(stopped) else ""
        runner = sandbox.Run(-9 if why else 0, False, 0.3, "", why)
        return judged.Session(records=records, runner=runner, judge=sandbox.Run(0, False, 0.3, ""))

    monkeypatch.setattr(judged, "session", session)
    cases = grade.correctness(task, tmp_path, "sm_90", None)
    assert len(cases) == len(task.cases) and any(c.hidden for c in task.cases)
    ran = [c for c in cases if c.verdict != Verdict.NOT_RUN]
    assert ran and all(c.verdict == Verdict.RUNTIME_ERROR and "open files" in c.message for c in ran), cases


def test_the_judge_out_of_gpu_memory_charges_its_case_as_a_runtime_error_and_leaves_the_later_cases_not_run(
        monkeypatch):
    """gpu_memory_hog.cu keeps the GPU's memory from its first call: the judge, checking that call's
    outputs, finds none for the truth. That case gets the runtime error (not the next one), and no
    fresh runner takes the GPU's memory again for each later case."""
    from grader import judged, sandbox
    task = tasks.load("conv1d")
    first = task.cases[0].id
    sessions = []

    def session(task, work, arch, plan, label, *args, **kwargs):
        sessions.append(label)
        return judged.Session(records=[
            {"event": "ready"}, {"event": "start", "case": first}, {"event": "done", "case": first, "ms": 1.0},
            {"event": "out_of_memory", "case": first, "what": "cudaMalloc(&p, alloc_bytes(a)): out of memory",
             "free_bytes": 2 << 20, "total_bytes": 80 << 30, "free_at_start_bytes": 79 << 30}],
            runner=sandbox.Run(-9, False, 1.0, ""), judge=sandbox.Run(0, False, 1.0, ""))

    monkeypatch.setattr(judged, "session", session)
    cases = grade.correctness(task, Path("work"), "sm_90", None)
    assert sessions == ["correctness1"]
    assert cases[0].verdict == Verdict.RUNTIME_ERROR
    assert "memory ran out while your program held it" in cases[0].message
    assert "0.0 of 80.0 GiB were free then, 79.0 before your program's first call" in cases[0].message
    assert all(c.verdict == Verdict.NOT_RUN and "ran the GPU out of memory" in c.message for c in cases[1:])


def test_the_library_is_timed_while_kernel_cu_compiles_and_the_student_s_code_gets_the_gpu_only_after(
        replay, monkeypatch):
    from grader import judged
    monkeypatch.setattr(performance.EarlyBaselines, "MIN_CPUS", 1)
    events = []
    real_run = judged.run

    def run(checker, plan, runner_cmd, work, label, *a, **k):
        events.append(("start", label))
        try:
            return real_run(checker, plan, runner_cmd, work, label, *a, **k)
        finally:
            events.append(("end", label))

    def compile_submission(src, work, arch, timeout):
        events.append(("start", "compile"))
        deadline = time.monotonic() + 5
        while ("end", "baseline") not in events and time.monotonic() < deadline:
            time.sleep(0.01)  # a compile slower than the library's session
        events.append(("end", "compile"))
        return True, ""

    monkeypatch.setattr(judged, "run", run)
    monkeypatch.setattr(build, "compile_submission", compile_submission)
    r, expected = replay("reference")
    check_against_recording(r, expected)
    assert r.performance[0].baseline_rate == pytest.approx(expected["baseline_rate"])
    assert events.index(("start", "baseline")) < events.index(("end", "compile"))
    assert events.index(("end", "baseline")) < events.index(("start", "correctness1"))
    assert [e for e in events if e[0] == "start"] == [("start", "baseline"), ("start", "compile"),
                                                      ("start", "correctness1"), ("start", "timed")]


def test_the_library_timed_while_kernel_cu_compiles_runs_on_the_cpus_the_grading_was_given(replay, monkeypatch):
    # A batch grades its references on the CPUs it keeps for timings (sandbox.on_cpus, which holds for
    # the thread that set it). The library's session runs on a thread of its own: it ran on whatever
    # CPUs the grader's process had, those of the builds and checks where a batch keeps its own threads.
    from grader import judged, sandbox
    monkeypatch.setattr(performance.EarlyBaselines, "MIN_CPUS", 1)
    seen = {}
    real_run = judged.run

    def run(checker, plan, runner_cmd, work, label, *a, **k):
        seen[label] = sandbox.pinned()
        return real_run(checker, plan, runner_cmd, work, label, *a, **k)

    monkeypatch.setattr(judged, "run", run)
    cpus = tuple(sorted(os.sched_getaffinity(0)))[:1]
    with sandbox.on_cpus(cpus):
        r, expected = replay("reference")
    check_against_recording(r, expected)
    assert seen == {"baseline": cpus, "correctness1": cpus, "timed": cpus}


def test_the_judge_gets_one_hardware_queue_while_the_student_s_runner_and_the_library_keep_the_driver_s_default(
        replay, monkeypatch, tmp_path):
    monkeypatch.setattr(performance.EarlyBaselines, "MIN_CPUS", 1)
    monkeypatch.delenv("CUDA_DEVICE_MAX_CONNECTIONS", raising=False)
    log = tmp_path / "env.log"
    monkeypatch.setenv("KIT_FAKE_ENV_LOG", str(log))
    r, expected = replay("reference")
    check_against_recording(r, expected)
    seen = [json.loads(line) for line in log.read_text().splitlines()]
    given = {p: {s["connections"] for s in seen if s["program"] == p} for p in ("judge", "runner", "serve")}
    assert given == {"judge": {"1"}, "runner": {None}, "serve": {None}}


def test_a_build_error_ends_the_library_s_session_at_once(replay, monkeypatch, tmp_path):
    monkeypatch.setattr(performance.EarlyBaselines, "MIN_CPUS", 1)
    monkeypatch.setenv("KIT_FAKE_GPU_LOG", str(tmp_path / "gpu.log"))
    monkeypatch.setenv("KIT_FAKE_SECONDS", "60")  # a judge that would take a minute to be ready
    monkeypatch.setattr(build, "compile_submission", lambda src, work, arch, timeout: (False, "kernel.cu(3): error"))
    t0 = time.monotonic()
    r, _ = replay("reference")
    assert r.verdict == Verdict.BUILD_ERROR
    assert time.monotonic() - t0 < 10


def test_a_fault_in_the_second_graded_case_keeps_the_first_case_s_rate_on_the_record(monkeypatch):
    from grader import judged, sandbox
    task = tasks.load("conv1d")
    first, second = (g.case.id for g in task.graded)
    gpu = GpuInfo(**json.loads((FIXTURES / "gpu_h200.json").read_text()))
    check = {"event": "check", "array": "y", "pass": True, "compared": 10, "rel_error": 0.0}

    def session(task, work, arch, plan, label, *args, **kwargs):
        assert label == "timed" and plan.count("\n") == 2  # both graded cases, one runner
        return judged.Session(records=[
            {"event": "ready"}, {"event": "start", "case": first},
            {"event": "timed", "case": first, "times_ms": [1.0] * 10}, dict(check, case=first, run=0),
            {"event": "checked", "case": first}, {"event": "start", "case": second},
            {"event": "runtime_error", "case": second, "cuda_error": "cudaErrorIllegalAddress", "message": "x"}],
            runner=sandbox.Run(1, False, 1.0, ""), judge=sandbox.Run(0, False, 1.0, ""))

    monkeypatch.setattr(judged, "session", session)
    result = grade.new_result(task, Path("kernel.cu"), gpu, grade.Options())
    result.correctness_points = 50.0
    performance.performance(task, Path("work"), gpu, None, result,
                            baselines=lambda *a: ([("copy of the same bytes", performance.Timing([1.0] * 10, 2))], 0.0))
    assert [p.case_id for p in result.performance] == [first]
    assert result.verdict == Verdict.RUNTIME_ERROR and "in the timed runs: the kernel faulted" in result.message
    assert result.score == 50.0


def timed_runs_stopped_for(monkeypatch, stopped_for: str):
    """conv1d's performance stage, its correctness worth 50 points, where the runner of its timed runs
    checked right but was then found stopped_for."""
    from grader import judged, sandbox
    task = tasks.load("conv1d")
    gpu = GpuInfo(**json.loads((FIXTURES / "gpu_h200.json").read_text()))
    check = {"event": "check", "array": "y", "pass": True, "compared": 10, "rel_error": 0.0}
    records = [{"event": "ready"}]
    for g in task.graded:
        records += [{"event": "start", "case": g.case.id}, {"event": "timed", "case": g.case.id, "times_ms": [1.0] * 10},
                    dict(check, case=g.case.id, run=0), {"event": "checked", "case": g.case.id}]

    def session(task, work, arch, plan, label, *args, **kwargs):
        return judged.Session(records=records, judge=sandbox.Run(0, False, 1.0, ""),
                              runner=sandbox.Run(0, False, 1.0, "", stopped_for))

    monkeypatch.setattr(judged, "session", session)
    result = grade.new_result(task, Path("kernel.cu"), gpu, grade.Options())
    result.correctness_points = 50.0
    performance.performance(task, Path("work"), gpu, None, result,
                            baselines=lambda *a: ([("copy of the same bytes", performance.Timing([1.0] * 10, 2))], 0.0))
    return result


def test_timed_runs_found_over_the_jails_limits_keep_no_points_as_a_look_could_have_missed_the_checked_runs(monkeypatch):
    # hostile/descriptor_flood.cu in a busy class on an H200: its checked runs ended between two looks,
    # its timed runs were stopped, and it kept its 50 correctness points.
    result = timed_runs_stopped_for(monkeypatch, "held more than 65,536 open files across its threads")
    assert result.verdict == Verdict.RUNTIME_ERROR
    assert "in the timed runs: stopped by the grader: the program held more than 65,536 open files" in result.message
    assert result.score == 0.0 and result.performance == []
    result = timed_runs_stopped_for(monkeypatch, "wrote more than 8 GiB to disk")
    assert "in the timed runs: stopped by the grader: the program wrote more" in result.message
    assert result.score == 0.0


def test_timed_runs_ended_by_the_machine_running_short_of_memory_keep_the_correctness_points(monkeypatch):
    from grader import sandbox
    result = timed_runs_stopped_for(monkeypatch, sandbox.memory_stop(8 * 2**30, own=False))
    assert result.verdict == Verdict.RUNTIME_ERROR and sandbox.MACHINE_SHORT in result.message
    assert result.score == 50.0


def test_a_fault_after_a_wrong_timed_run_is_still_a_wrong_output_that_loses_the_correctness_points(monkeypatch):
    """The judge checks runs between bursts; a program that then faults on purpose (a runtime error
    keeps the correctness points) is judged on the wrong output it already gave."""
    from grader import judged, sandbox
    task = tasks.load("trmm")
    case = task.graded[0].case.id
    gpu = GpuInfo(**json.loads((FIXTURES / "gpu_h200.json").read_text()))
    wrong = {"event": "check", "case": case, "run": 1, "array": "B", "pass": False, "compared": 16,
             "rel_error": 0.5, "worst_index": 3, "worst_got": 1.0, "worst_want": 2.0}

    def session(task, work, arch, plan, label, *args, **kwargs):
        return judged.Session(records=[
            {"event": "ready"}, {"event": "start", "case": case}, dict(wrong, run=0, **{"pass": True}), wrong,
            {"event": "runtime_error", "case": case, "cuda_error": "cudaErrorIllegalAddress", "message": "x"}],
            runner=sandbox.Run(1, False, 1.0, ""), judge=sandbox.Run(0, False, 1.0, ""))

    monkeypatch.setattr(judged, "session", session)
    result = grade.new_result(task, Path("kernel.cu"), gpu, grade.Options())
    result.correctness_points = 50.0
    performance.performance(task, Path("work"), gpu, None, result, baselines=lambda *a: ([], 0.0))
    assert result.verdict == Verdict.INCORRECT and "timed run 1 is wrong" in result.message
    assert result.score == 0.0
