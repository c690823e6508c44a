"""Timings on a machine whose CPUs other processes take: the judge reports, for each timed run, how long
its thread and the one serving it waited for a CPU (wait_ms); the grader leaves the library's disturbed
runs out, takes a disturbed student timing again, and calls a machine that stays busy too busy to
time, never turning its times into a score. No GPU: the judge's records are made up here."""
import json
from pathlib import Path

import pytest

from grader import build, grade, judged, performance, sandbox, tasks
from grader.results import GpuInfo, Verdict

FIXTURES = Path(__file__).parent / "fixtures"
GPU = GpuInfo(**json.loads((FIXTURES / "gpu_h200.json").read_text()))
QUIET = [0.0] * 10


@pytest.fixture(autouse=True)
def no_pauses(monkeypatch):
    monkeypatch.setattr(performance.time, "sleep", lambda s: None)


def test_a_run_is_disturbed_when_its_cpu_wait_could_change_its_time_and_not_by_a_wait_it_cannot_feel():
    times = [0.3, 0.3, 100.0, 100.0, 0.3]
    waits = [0.0, 0.5, 0.5, 2.0, -1]  # -1: the system does not say
    assert performance.disturbed(times, waits) == [False, True, False, True, False]
    assert performance.disturbed(times, []) == [False] * 5  # a judge that does not report waits


def library_session(overhead_times, overhead_waits, route_times, route_waits):
    case = tasks.load("conv1d").graded[0].case.id
    return case, judged.Session(records=[
        {"event": "ready"},
        {"event": "overhead", "case": case, "library": "empty call", "times_ms": overhead_times,
         "wait_ms": overhead_waits},
        {"event": "baseline", "case": case, "library": "copy of the same bytes", "times_ms": route_times,
         "wait_ms": route_waits}], runner=sandbox.Run(0, False, 1.0, ""), judge=sandbox.Run(0, False, 1.0, ""))


def test_the_library_s_disturbed_runs_are_left_out_and_the_empty_call_is_its_least_undisturbed_run(monkeypatch):
    # Seen on an H200 with twice as many busy processes as cores: the empty call's runs read 7.6 ms.
    case, s = library_session([7.6, 0.31, 7.9, 0.30, 8.0], [7.3, 0.0, 7.6, 0.0, 7.7],
                              [1.3] * 6 + [9.0] * 4, [0.0] * 6 + [7.0] * 4)
    monkeypatch.setattr(judged, "run", lambda *a, **k: s)
    task = tasks.load("conv1d")
    routes, overhead = performance.library_times(task, Path("work"), "sm_90", "plan\n", case, 2)
    assert overhead == pytest.approx(0.30)
    (name, timing), = routes
    assert name == "copy of the same bytes"
    assert timing.times_ms == pytest.approx([1.0] * 6) and timing.waits_ms == [0.0] * 6


def test_a_library_timed_while_the_machine_stays_busy_is_a_kit_error_that_says_so_never_a_bar(monkeypatch):
    case, s = library_session([7.6] * 5, [7.3] * 5, [9.0] * 10, [7.0] * 10)
    sessions = []
    monkeypatch.setattr(judged, "run", lambda *a, **k: sessions.append(1) or s)
    with pytest.raises(build.KitError, match="too busy to time the conv1d library"):
        performance.library_times(tasks.load("conv1d"), Path("work"), "sm_90", "plan\n", case, 2)
    assert len(sessions) == performance.LIBRARY_TRIES


def student_session(task, waits, wrong=False, others=QUIET, times=None, cpu_s=None):
    records = [{"event": "ready"}]
    for g in task.graded:
        c = g.case.id
        records += [{"event": "start", "case": c}, {"event": "timed", "case": c, "times_ms": times or [1.0] * 10,
                                                     "wait_ms": waits, "others_cpu_ms": others},
                    {"event": "check", "case": c, "run": 0, "array": "P", "pass": not wrong, "compared": 10,
                     "rel_error": 0.5 if wrong else 0.0, "worst_index": 3, "worst_got": 1.0, "worst_want": 2.0},
                    {"event": "checked", "case": c}]
    return judged.Session(records=records, runner=sandbox.Run(0, False, 1.0, "", cpu_s=cpu_s),
                          judge=sandbox.Run(0, False, 1.0, ""))


def time_student(monkeypatch, sessions, overhead_ms=0.0, asked=None):
    """performance() on conv1d with `sessions` handed out in turn, the empty call's round trip
    `overhead_ms`; returns (result, sessions taken). `asked` gets the case of each question to the library."""
    task = tasks.load("conv1d")
    taken = []

    def session(*args, **kwargs):
        taken.append(1)
        return sessions[len(taken) - 1](task)

    monkeypatch.setattr(judged, "session", session)
    result = grade.new_result(task, Path("kernel.cu"), GPU, grade.Options())
    result.correctness_points = 50.0

    def baselines(task, work, arch, plan, case_id, *rest):
        if asked is not None:
            asked.append(case_id)
        return [("copy of the same bytes", performance.Timing([1.0] * 10, 2))], overhead_ms

    performance.performance(task, Path("work"), GPU, None, result, baselines=baselines)
    return result, len(taken)


def test_a_student_timing_whose_disturbed_runs_could_have_moved_its_median_is_taken_again_and_the_quiet_one_counts(
        monkeypatch):
    busy = lambda task: student_session(task, [3.0] * 5 + [0.0] * 5)  # noqa: E731
    quiet = lambda task: student_session(task, QUIET)  # noqa: E731
    result, taken = time_student(monkeypatch, [busy, quiet])
    assert taken == 2
    assert result.verdict == Verdict.CORRECT and "timed 2 times" in result.message
    assert all(p.timing.waits_ms == QUIET for p in result.performance)


def test_one_run_of_ten_woken_late_on_an_idle_machine_cannot_move_the_median_and_the_timing_counts_as_it_came(
        monkeypatch):
    """jacobi's reference on an idle H200: its last run at n = 512 waited 1.4 ms of its 84.5 for a CPU, and
    the whole timing was taken again, 5 s more for the same median. Each wait taken off its run, the
    median stays where it was: the timing counts, its waits on the record."""
    times, waits = [83.55 + 0.015 * i for i in range(9)] + [84.534], [0.0] * 9 + [1.36]
    once = lambda task: student_session(task, waits, times=times)  # noqa: E731
    result, taken = time_student(monkeypatch, [once, once])
    assert taken == 1
    assert result.verdict == Verdict.CORRECT and "timed 2 times" not in result.message
    assert all(p.timing.waits_ms == waits for p in result.performance)


def test_how_far_the_median_could_move_is_weighed_against_the_time_scored_with_the_round_trip_taken_off(monkeypatch):
    """conv1d's calls take 0.14 ms and the round trip around them 0.3: a wait that could move the median
    by 0.1% of the 0.44 ms a run reads moves 0.35% of the time scored, and the timing is taken again."""
    times = [0.440 + 0.0005 * i for i in range(10)]
    waits = [0.0] * 5 + [0.03] + [0.0] * 4  # the run just above the median: without its wait, below it
    disturbed = lambda task: student_session(task, waits, times=times)  # noqa: E731
    quiet = lambda task: student_session(task, QUIET, times=times)  # noqa: E731
    assert time_student(monkeypatch, [disturbed, quiet], overhead_ms=0.30)[1] == 2
    assert time_student(monkeypatch, [disturbed, quiet], overhead_ms=0.0)[1] == 1


def test_the_library_is_asked_once_a_case_though_the_retiming_asked_it_for_the_round_trip_first(monkeypatch):
    """Without a batch's or an early grading's measurement, each question is a session of library timings."""
    busy = lambda task: student_session(task, [3.0] * 5 + [0.0] * 5)  # noqa: E731
    quiet = lambda task: student_session(task, QUIET)  # noqa: E731
    asked = []
    result, taken = time_student(monkeypatch, [busy, quiet], asked=asked)
    assert taken == 2
    assert sorted(asked) == sorted(g.case.id for g in tasks.load("conv1d").graded)


def test_a_disturbed_timing_with_a_wrong_output_is_not_taken_again_and_stays_wrong(monkeypatch):
    wrong = lambda task: student_session(task, [5.0] * 10, wrong=True)  # noqa: E731
    result, taken = time_student(monkeypatch, [wrong, wrong, wrong])
    assert taken == 1
    assert result.verdict == Verdict.INCORRECT and result.score == 0.0


def test_a_student_timing_disturbed_every_time_is_not_graded_and_says_the_machine_is_too_busy(monkeypatch):
    busy = lambda task: student_session(task, [5.0] * 10)  # noqa: E731
    with pytest.raises(build.KitError, match="too busy to time conv1d"):
        time_student(monkeypatch, [busy] * (performance.RETIMES + 1))


def test_a_timing_slowed_by_the_program_s_own_threads_is_not_taken_again_and_counts_as_it_came(monkeypatch):
    """A program that makes its own runs wait (a thread of its own spinning on its CPU) in a timing it
    finds slow must not get another: it would choose which of its timings is kept."""
    own = lambda task: student_session(task, [3.0] * 5 + [0.0] * 5, others=[2.5] * 5 + [0.0] * 5)  # noqa: E731
    quiet = lambda task: student_session(task, QUIET)  # noqa: E731
    result, taken = time_student(monkeypatch, [own, quiet])
    assert taken == 1
    assert result.verdict == Verdict.CORRECT and "the program's own threads" in result.message
    assert all(p.timing.others_cpu_ms == [2.5] * 5 + [0.0] * 5 for p in result.performance)


def test_a_timing_disturbed_from_outside_is_taken_again_though_the_cuda_runtime_s_threads_ran_a_little(monkeypatch):
    """On an H200 beside twice as many busy processes as cores, conv1d's reference had a run of
    milliseconds' wait counted as its own doing once its other threads (the CUDA runtime's) had run more
    than 0.02 ms meanwhile: not taken again, it scored 75 of 100. A wait is the program's own only where
    its other threads ran for half of it."""
    outside = lambda task: student_session(task, [15.0] * 5 + [0.0] * 5, others=[0.3] * 5 + [0.0] * 5)  # noqa: E731
    quiet = lambda task: student_session(task, QUIET)  # noqa: E731
    result, taken = time_student(monkeypatch, [outside, quiet])
    assert taken == 2 and "own threads" not in result.message


@pytest.mark.parametrize("cgroup", [True, False], ids=["its cgroup counted", "no cgroup"])
def test_a_jailed_timing_is_taken_again_only_where_the_judge_could_count_every_process_of_the_program(
        monkeypatch, cgroup):
    """Without a cgroup (a grader that is not root) the judge counts only the runner's threads: child
    processes spinning during its runs (fixtures/batch/hostile/child_spinners.cu) would read as other
    programs, and a program could choose which of its timings is kept. There its times count as they
    came, and the message says why."""
    monkeypatch.setattr(sandbox, "_JAIL", object())
    busy = lambda task: student_session(task, [3.0] * 5 + [0.0] * 5, cpu_s=1.0 if cgroup else None)  # noqa: E731
    quiet = lambda task: student_session(task, QUIET, cpu_s=1.0 if cgroup else None)  # noqa: E731
    result, taken = time_student(monkeypatch, [busy, quiet])
    assert result.verdict == Verdict.CORRECT
    if cgroup:
        assert taken == 2 and "timed 2 times" in result.message
    else:
        assert taken == 1 and f"10 {performance.UNACCOUNTED}" in result.message  # 5 in each graded case
        assert all(p.timing.waits_ms == [3.0] * 5 + [0.0] * 5 for p in result.performance)
