"""The compute-sanitizer stage, with a stand-in for compute-sanitizer that writes the racecheck log
recorded on an NVIDIA H200 for assignments/reduce/tests/unrolled_last_warp_race.cu. No GPU needed."""
import stat
from pathlib import Path

import pytest

from grader import grade, tasks
from grader.results import GradeResult, Verdict

RECORDED = Path(__file__).parent / "fixtures" / "reduce" / "sanitize-racecheck.log"


def fake_sanitizer(folder: Path, log_text: str, exit_code: int) -> None:
    """A `compute-sanitizer` that writes log_text to its --log-file and exits with exit_code."""
    (folder / "log.txt").write_text(log_text)
    script = folder / "compute-sanitizer"
    script.write_text(f"""#!/bin/sh
while [ $# -gt 0 ]; do [ "$1" = --log-file ] && cp {folder / 'log.txt'} "$2"; shift; done
exit {exit_code}
""")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)


@pytest.fixture
def stage(tmp_path, monkeypatch):
    """run(log, exit_code) -> the GradeResult after the sanitizer stage of reduce."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    monkeypatch.setenv("PATH", f"{bindir}:/usr/bin:/bin")
    work = tmp_path / "work"
    (work / "dumps").mkdir(parents=True)

    def run(log_text, exit_code):
        fake_sanitizer(bindir, log_text, exit_code)
        task = tasks.load("reduce")
        result = GradeResult("reduce", "kernel.cu", Verdict.CORRECT, "", 50.0, task.max_score, correctness_points=50.0)
        grade.sanitize(task, work, result=result)
        return result

    return run


def test_a_recorded_racecheck_warning_is_a_race_verdict_even_without_the_error_exit_code(stage):
    r = stage(RECORDED.read_text(), 0)  # racecheck reported warnings only: exit code 0
    assert r.verdict == Verdict.RACE
    assert "racecheck found a data race" in r.message
    assert "Race reported between Read access at block_sums" in r.message


def test_a_clean_racecheck_and_memcheck_leave_the_submission_correct_and_say_so(stage):
    clean = "========= COMPUTE-SANITIZER\n========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)\n"
    r = stage(clean, 0)
    assert r.verdict == Verdict.CORRECT
    assert "racecheck" in r.sanitizer_note and "memcheck" in r.sanitizer_note and "clean" in r.sanitizer_note


def test_a_memcheck_error_is_a_runtime_error_naming_the_tool(stage, monkeypatch):
    monkeypatch.setattr(tasks.Task, "sanitize", property(lambda self: (tasks.Case("s", {"n": 64}, 1, "cpu"), ["memcheck"])))
    r = stage("========= Invalid __global__ read of size 8 bytes\n=========     at sum_kernel+0x40\n", 86)
    assert r.verdict == Verdict.RUNTIME_ERROR
    assert "memcheck" in r.message and "Invalid __global__ read" in r.message


def test_a_run_under_compute_sanitizer_that_does_not_end_cleanly_is_a_runtime_error_not_clean(stage):
    # A submission can kill the tool (its parent) to hide a finding: an exit that is neither clean nor
    # "found" is never read as clean.
    r = stage("========= COMPUTE-SANITIZER\n", 137)
    assert r.verdict == Verdict.RUNTIME_ERROR
    assert "did not end cleanly" in r.message and "clean" not in r.sanitizer_note


def test_without_compute_sanitizer_the_report_says_the_tools_did_not_run(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    task = tasks.load("reduce")
    r = GradeResult("reduce", "kernel.cu", Verdict.CORRECT, "", 50.0, task.max_score)
    grade.sanitize(task, tmp_path, result=r)
    assert r.verdict == Verdict.CORRECT
    assert "not run: compute-sanitizer is not on PATH" in r.sanitizer_note
