"""The batch verb, without a GPU: whole batches whose runner and checker are tests/fake_harness.py
replaying records taken on an NVIDIA H200 (fixtures/batch/trmm/, which add trmm's hidden case), so
that the records, the reports, resuming, regrading and the jail's refusals are the grader's own code
at work. The class as downloaded is in test_batch_intake.py, the gradebooks in
test_batch_gradebooks.py, the sharing of GPUs in test_batch_gpus.py, shards and a class that changes
between runs in test_batch_shards.py. The real batch on a GPU is the class of gpu_corpus.py
(test_gpu_grading.py, test_gpu_jail.py)."""
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from grader import batch, build, grade, jail, performance, tasks


ROOT = tasks.ROOT
HERE = Path(__file__).parent

from fake_kit import ENTRY, args, correct_class, kernel, make_class, read_gradebook  # noqa: E402


def test_the_plot_keeps_a_long_library_name_whole_and_draws_tier_lines_behind_every_label():
    from grader.batch.reports import rate_plot
    name = "cublasDtrmm out of place, then a copy back into B"
    svg = rate_plot("trmm, n=4096, on NVIDIA H100", "GFLOPS",
                    [("this submission", None, "#1f77b4"), ("reference solution", 45000.0, "#2ca02c"),
                     (name, 52000.0, "#ff7f0e")], [(5000.0, 10), (20000.0, 25)])
    assert f">{name}</text>" in svg
    label_right = float(re.search(r'<text x="([\d.]+)" y="\d+" text-anchor="end">', svg).group(1))
    assert label_right >= 7 * len(name)  # room for the whole name left of the bars
    lines = [m.start() for m in re.finditer("<line", svg)]
    assert max(lines[:-1]) < svg.index("not measured")  # the tier lines, then the texts over them
    mask = svg.rindex("<rect", 0, svg.index("not measured"))
    assert 'fill="white"' in svg[mask:svg.index("not measured")]


# ---------------------------------------------------------------------------------------------
# Hidden cases.

HIDDEN_SIZES = re.compile(r"(?<![0-9a-f.])(60777|777|603729|18295|538103)(?![0-9a-f])")
"""trmm's hidden case in the fixtures: n = 777 (its seed 60777), 777 x 777 elements, the element
counts and the worst index its failing records hold (fixtures/batch/trmm/README.md), as whole
numbers (not inside a time such as 0.9777 or a hash)."""


def test_no_student_visible_output_of_a_batch_gives_a_hidden_case_s_size_away(fake_kit, tmp_path):
    """Reports, results.json and records of students who pass, miss elements of, fault in and fail to
    launch the hidden case: its opaque id and verdict are there, its sizes are not."""
    subs, out = tmp_path / "subs", tmp_path / "out"
    for student, scenario in (("pass", "reference"), ("unwritten", "no_bounds_check"), ("none", "skeleton"),
                              ("fault", "illegal_address"), ("launch", "block_64x64")):
        (subs / student / "trmm").mkdir(parents=True)
        (subs / student / "trmm" / "kernel.cu").write_text(kernel(scenario))
    assert batch.main(args(subs, out)) == 0
    seen = []
    for student in ("pass", "unwritten", "none", "fault", "launch"):
        visible = [out / "reports" / f"{student}.md", out / "reports" / f"{student}.html",
                   out / "gradescope" / student / "results.json", out / "records" / student / "trmm.json"]
        for path in visible:
            text = path.read_text()
            assert not HIDDEN_SIZES.search(text), (path, HIDDEN_SIZES.search(text).group(0))
        rec = json.loads(visible[-1].read_text())
        hidden = next(c for c in rec["cases"] if c["id"] == "hidden-1")
        assert hidden["params"] == {}
        seen.append(hidden["verdict"])
        assert "hidden-1" in visible[2].read_text()
    assert set(seen) >= {"correct", "incorrect"} and len(set(seen)) >= 3, seen


def test_a_hidden_case_whose_id_tells_its_size_is_refused():
    data = json.loads((ROOT / "assignments" / "trmm" / "task.json").read_text())
    data["cases"].append({"id": "n555", "n": 555, "seed": 1, "hidden": True})
    with pytest.raises(tasks.TaskError, match="hidden-1, hidden-2"):
        tasks.parse("trmm", ROOT / "assignments" / "trmm", data, "task.json")


# ---------------------------------------------------------------------------------------------
# Whole batches on the fake harness.

def test_a_batch_gives_each_student_a_verdict_a_record_a_report_and_results_json(fake_kit, tmp_path, capsys):
    subs, out = make_class(tmp_path), tmp_path / "out"
    assert batch.main(args(subs, out)) == 0
    book = {r["student"]: r for r in read_gradebook(out)}
    assert sorted(book) == ["alice", "bob", "carol", "dave", "erin"]
    assert book["alice"]["trmm"] == "100" and book["alice"]["total"] == "100"
    assert book["bob"]["trmm"] == "11.11"  # n1024 and n4096 of 9 scored cases pass: 50 * 2 / 9, to the hundredth
    assert book["carol"]["trmm"] == "0" and "incorrect" in book["carol"]["notes"]
    assert book["dave"]["trmm"] == "" and "nothing gradeable" in book["dave"]["notes"]
    assert book["erin"]["trmm"] == "0" and "build_error" in book["erin"]["notes"]
    rec = json.loads((out / "records" / "alice" / "trmm.json").read_text())
    assert rec["verdict"] == "correct" and rec["batch"]["hidden_cases"] == ["hidden-1"]
    assert "hidden-1" in [c["id"] for c in rec["cases"]]
    assert rec["isolation"]
    for s in book:
        assert (out / "reports" / f"{s}.md").is_file() and (out / "reports" / f"{s}.html").is_file()
        assert (out / "gradescope" / s / "results.json").is_file()
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary["stages"]) >= {"build", "correctness", "performance"}
    text = capsys.readouterr().out
    assert "Batch summary" in text and "wall time" in text


def test_a_batch_times_the_library_once_per_graded_case_and_every_record_compares_with_that_measurement(
        fake_kit, tmp_path, monkeypatch):
    timed = []
    real = performance.library_times
    monkeypatch.setattr(performance, "library_times", lambda *a, **k: timed.append(a[4]) or real(*a, **k))
    subs, out = correct_class(tmp_path / "subs", ("alice", "bob", "carol")), tmp_path / "out"
    assert batch.main(args(subs, out)) == 0
    assert timed == ["n4096"]  # trmm's one graded case, for the first of three correct submissions
    recs = [json.loads((out / "records" / s / "trmm.json").read_text()) for s in ("alice", "bob", "carol")]
    assert len({r["performance"][0]["baseline_rate"] for r in recs}) == 1
    assert all("measured once for this batch on this GPU" in r["performance"][0]["baseline_note"] for r in recs)
    assert "the same for every student" in (out / "reports" / "bob.md").read_text()


def test_the_batch_s_library_times_are_measured_again_once_they_are_older_than_their_limit(monkeypatch):
    from grader.batch.baselines import SharedBaselines
    now = [0.0]
    calls = []
    monkeypatch.setattr(performance, "library_times", lambda *a: calls.append(a) or ([("lib", None)], 0.01))
    kept = SharedBaselines(max_age_s=600, clock=lambda: now[0])
    task = SimpleNamespace(name="trmm")
    for t in (0, 599, 601, 602):
        now[0] = t
        kept(task, Path("w"), "sm_90", "plan\n", "n4096", 2, (0,), "lib")
    kept(task, Path("w"), "sm_90", "plan\n", "n4096", 2, (1,), "lib")  # another GPU: its own measurement
    assert len(calls) == 3
    assert kept.note("trmm", "n4096", (0,)) and kept.note("conv1d", "n4096", (0,)) is None


def test_a_second_run_regrades_nothing_and_regrade_redoes_only_the_student_named(fake_kit, tmp_path):
    subs, out = make_class(tmp_path), tmp_path / "out"
    batch.main(args(subs, out))
    first = len(fake_kit["gpu"])
    assert first == 3  # alice, bob, carol (erin does not build, dave has nothing)
    batch.main(args(subs, out))
    assert len(fake_kit["gpu"]) == first
    batch.main(args(subs, out, ("regrade", ["bob"])))
    assert len(fake_kit["gpu"]) == first + 1 and "bob.zip" in fake_kit["gpu"][-1]
    (subs / "alice" / "trmm" / "kernel.cu").write_text(kernel("skeleton"))  # a new submission: graded again
    batch.main(args(subs, out))
    assert len(fake_kit["gpu"]) == first + 2
    assert {r["student"]: r for r in read_gradebook(out)}["alice"]["trmm"] == "0"


def test_a_timing_the_machine_was_too_busy_for_is_not_graded_in_the_kit_s_words_and_the_next_run_grades_it(
        fake_kit, tmp_path, monkeypatch):
    subs, out = make_class(tmp_path), tmp_path / "out"
    real = grade.timing_stages
    busy = "the machine is too busy to time trmm: in each of 3 timings, other processes took the CPU"

    def too_busy(task, work, gpu, opts, result):
        raise build.KitError(busy)
    monkeypatch.setattr(grade, "timing_stages", too_busy)
    assert batch.main(args(subs, out)) == 2
    errors = json.loads((out / "state.json").read_text())["errors"]
    assert errors["alice/trmm"]["message"] == busy  # no "KitError:" before it: the TA reads it as it is
    assert {r["student"]: r for r in read_gradebook(out)}["alice"]["trmm"] == ""
    monkeypatch.setattr(grade, "timing_stages", real)
    assert batch.main(args(subs, out)) == 0
    assert {r["student"]: r for r in read_gradebook(out)}["alice"]["trmm"] != ""


def test_an_interrupted_batch_keeps_what_finished_and_resumes_with_the_rest(fake_kit, tmp_path, monkeypatch):
    subs, out = make_class(tmp_path), tmp_path / "out"
    real = grade.timing_stages

    def interrupt(task, work, gpu, opts, result):
        raise KeyboardInterrupt  # Ctrl-C while alice, the one correct entry, is timed
    monkeypatch.setattr(grade, "timing_stages", interrupt)

    def hard_exit(code):
        raise SystemExit(code)
    monkeypatch.setattr(batch.os, "_exit", hard_exit)
    with pytest.raises(SystemExit) as stopped:
        batch.main(args(subs, out, ("jobs", 1)))
    assert stopped.value.code == 130
    done = set(json.loads((out / "state.json").read_text())["done"])
    assert "alice/trmm" not in done  # cut short: not recorded
    monkeypatch.setattr(grade, "timing_stages", real)
    before = len(fake_kit["gpu"])
    assert batch.main(args(subs, out)) == 0
    again = {c.split(":")[0].split(".")[0] for c in fake_kit["gpu"][before:]}
    assert again == {k.split("/")[0] for k in {"alice/trmm", "bob/trmm", "carol/trmm"} - done}  # the rest only
    assert len(json.loads((out / "state.json").read_text())["done"]) == 4


def test_a_crash_while_grading_one_entry_costs_that_entry_only(fake_kit, tmp_path):
    subs, out = make_class(tmp_path), tmp_path / "out"
    (subs / "zoe").mkdir()
    (subs / "zoe" / "kernel.cu").write_text("// CRASH_THE_GRADER\n" + ENTRY)
    assert batch.main(args(subs, out)) == 2  # graded, but one entry could not be
    book = {r["student"]: r for r in read_gradebook(out)}
    assert book["zoe"]["trmm"] == "" and "could not be graded" in book["zoe"]["notes"]
    assert book["alice"]["trmm"] == "100"
    rec = json.loads((out / "records" / "zoe" / "trmm.json").read_text())
    assert rec["verdict"] == "not_graded" and "something in the kit broke" in rec["message"]


def test_a_disk_below_the_jails_reserve_stops_the_batch_saying_to_make_room_and_the_next_run_goes_on(
        fake_kit, tmp_path):
    # Every later run would find the same disk: none is a student's verdict, and the next run goes on.
    subs, out = make_class(tmp_path), tmp_path / "out"
    (subs / "zz_last").mkdir()
    (subs / "zz_last" / "kernel.cu").write_text("// DISK_LOW\n" + ENTRY)
    with pytest.raises(tasks.TaskError, match=r"less than 1 GiB free.*run the same command again to go on"):
        batch.main(args(subs, out))
    assert not (out / "records" / "zz_last").exists()  # no verdict, not even "not graded"
    (subs / "zz_last" / "kernel.cu").write_text(ENTRY)  # the TA made room
    assert batch.main(args(subs, out)) == 0
    book = {r["student"]: r for r in read_gradebook(out)}
    assert book["zz_last"]["trmm"] == "100" and book["alice"]["trmm"] == "100"


def test_verdicts_of_faults_forbidden_calls_and_an_early_exit_inside_a_batch(fake_kit, tmp_path):
    subs, out = tmp_path / "subs", tmp_path / "out"
    for name, text in (("launch", kernel("block_64x64")), ("fault", kernel("illegal_address")),
                       ("blas", "// cublasDtrmm(handle, ...)\n" + ENTRY), ("quitter", kernel("exit0"))):
        (subs / name).mkdir(parents=True)
        (subs / name / "kernel.cu").write_text(text)
    batch.main(args(subs, out))
    got = {s: json.loads((out / "records" / s / "trmm.json").read_text()) for s in
           ("launch", "fault", "blas", "quitter")}
    assert got["launch"]["verdict"] == "launch_error"
    assert got["fault"]["verdict"] == "runtime_error" and "cudaErrorIllegalAddress" in got["fault"]["message"]
    assert got["blas"]["verdict"] == "forbidden_call"
    assert got["quitter"]["verdict"] == "runtime_error" and "exited with status 0" in got["quitter"]["message"]
    assert all(r["score"] == 0 for r in got.values())


def test_the_reports_show_a_plot_of_the_rate_against_the_reference_and_the_library_as_an_image_file(
        fake_kit, tmp_path):
    subs, out = make_class(tmp_path), tmp_path / "out"
    batch.main(args(subs, out, ("no_reference", False)))
    ref = json.loads((out / "reference" / "trmm.json").read_text())
    assert ref["verdict"] == "correct"
    md = (out / "reports" / "alice.md").read_text()
    page = (out / "reports" / "alice.html").read_text()
    image = out / "reports" / "alice-trmm-n4096.svg"
    assert "](alice-trmm-n4096.svg)" in md and 'src="alice-trmm-n4096.svg"' in page
    for text in (md, page):  # an image beside the report: Markdown viewers drop SVG written inline
        assert "<svg" not in text
    svg = image.read_text()
    assert svg.startswith("<svg") and svg.rstrip().endswith("</svg>")
    assert "reference solution" in svg and "cublasDtrmm" in svg and "this submission" in svg
    assert page.startswith("<!DOCTYPE html>")
    assert "(hidden)" in md  # the hidden case's size is not shown
    assert "nothing gradeable" in (out / "reports" / "dave.md").read_text()


def test_the_progress_line_counts_verdicts_and_estimates_the_time_left(fake_kit, tmp_path, capsys):
    subs, out = make_class(tmp_path), tmp_path / "out"
    batch.main(args(subs, out))
    err = capsys.readouterr().err
    assert "[4/4]" in err and "correct 1" in err and "elapsed" in err


# ---------------------------------------------------------------------------------------------
# The jail (its walls are tested in test_jail.py).

def test_a_batch_with_no_jail_here_refuses_before_anything_runs_and_says_why(fake_kit, tmp_path, monkeypatch):
    real = shutil.which
    monkeypatch.setattr(shutil, "which", lambda name: None if name == "bwrap" else real(name))
    subs, out = make_class(tmp_path), tmp_path / "out"
    with pytest.raises(jail.JailError, match="bubblewrap"):
        batch.main(args(subs, out, ("no_isolation", False)))
    assert fake_kit["build"] == [] and fake_kit["gpu"] == []
    assert not (out / "gradebook.csv").exists()


def test_the_command_line_turns_a_missing_jail_into_one_line_and_exit_2(tmp_path, monkeypatch, capsys):
    from grader import cli
    real = shutil.which
    monkeypatch.setattr(shutil, "which", lambda name: None if name == "bwrap" else real(name))
    (tmp_path / "subs").mkdir()
    assert cli.main(["batch", str(tmp_path / "subs"), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no jail" in err[0] and "--no-isolation" in err[0]


def test_a_failed_build_is_tried_again_alone_before_it_counts(fake_kit, tmp_path, monkeypatch):
    """A build that failed while other submissions ran (a fork bomb, a full disk) is built again with
    nothing else of the batch running; only a second failure is the student's build error."""
    flaky = {"n": 0}
    real_compile = build.compile_submission

    def compile_once_broken(src, work, arch, timeout):
        if "FLAKY" in Path(src).read_text() and flaky["n"] == 0:
            flaky["n"] += 1
            return False, "nvcc: fork: Resource temporarily unavailable"
        return real_compile(src, work, arch, timeout)
    monkeypatch.setattr(build, "compile_submission", compile_once_broken)
    subs, out = tmp_path / "subs", tmp_path / "out"
    (subs / "dora" / "trmm").mkdir(parents=True)
    (subs / "dora" / "trmm" / "kernel.cu").write_text("// FLAKY\n" + kernel("reference"))
    (subs / "eve" / "trmm").mkdir(parents=True)
    (subs / "eve" / "trmm" / "kernel.cu").write_text(kernel("reference") + "COMPILE_ERROR\n")
    assert batch.main(args(subs, out)) == 0
    verdict = {s: json.loads((out / "records" / s / "trmm.json").read_text())["verdict"] for s in ("dora", "eve")}
    assert verdict == {"dora": "correct", "eve": "build_error"}
    assert flaky["n"] == 1


def test_a_compile_error_of_the_source_counts_at_once_and_holds_up_no_other_build(fake_kit, tmp_path, monkeypatch):
    """Building again alone waits for every build and GPU stage of the batch running to end and holds up
    all the others meanwhile: a class with many compile errors would crawl. An error the compiler
    places on a line of the source is the source's own, and counts the first time."""
    built = []
    real_compile = build.compile_submission

    def compile_and_count(src, work, arch, timeout):
        built.append(Path(src).parent.parent.name)
        return real_compile(src, work, arch, timeout)
    monkeypatch.setattr(build, "compile_submission", compile_and_count)
    subs, out = tmp_path / "subs", tmp_path / "out"
    (subs / "eve" / "trmm").mkdir(parents=True)
    (subs / "eve" / "trmm" / "kernel.cu").write_text(kernel("reference") + "COMPILE_ERROR\n")
    assert batch.main(args(subs, out)) == 0
    rec = json.loads((out / "records" / "eve" / "trmm.json").read_text())
    assert rec["verdict"] == "build_error" and "Bold" in rec["message"], rec
    assert built == ["eve"]


def test_a_batchs_timings_run_on_cpus_of_their_own_and_its_builds_and_checks_on_the_others(
        fake_kit, tmp_path, monkeypatch, capsys):
    """Compilers at the idle CPU priority still took CPU from a timing (conv1d's reference beside a class
    of heavy compiles: "too busy to time" in 3 of 11 test runs): half of the CPUs are the timings' alone
    (batch.gpus.split_cpus)."""
    from grader import sandbox
    from grader.batch import scheduling
    monkeypatch.setattr(scheduling, "split_cpus", lambda cpus, gpus: ([0, 1, 2, 3], {g: [4, 5, 6, 7] for g in gpus}))
    seen = []

    def where(stage, real):
        def wrapped(*a, **k):
            seen.append((stage, sandbox.pinned()))
            return real(*a, **k)
        return wrapped
    monkeypatch.setattr(build, "compile_submission", where("build", build.compile_submission))
    monkeypatch.setattr(grade, "check_stages", where("check", grade.check_stages))
    monkeypatch.setattr(grade, "timing_stages", where("timing", grade.timing_stages))
    subs, out = tmp_path / "subs", tmp_path / "out"
    (subs / "alice" / "trmm").mkdir(parents=True)
    (subs / "alice" / "trmm" / "kernel.cu").write_text(kernel("reference"))
    assert batch.main(args(subs, out)) == 0
    assert seen == [("build", (0, 1, 2, 3)), ("check", (0, 1, 2, 3)), ("timing", (4, 5, 6, 7))], seen
    assert "batch: CPUs: builds and checks on 0-3; timings on 4-7 (GPU 0), where nothing else runs" in capsys.readouterr().err


def test_half_of_the_cpus_go_to_the_timings_an_equal_share_per_gpu_and_none_on_a_small_machine():
    from grader.batch.gpus import split_cpus
    alone = lambda cpu: cpu  # noqa: E731  (a core per CPU)
    assert split_cpus(range(16), [0], alone) == (list(range(8)), {0: list(range(8, 16))})
    assert split_cpus(range(16), [0, 1], alone) == (list(range(8)), {0: [8, 9, 10, 11], 1: [12, 13, 14, 15]})
    assert split_cpus(range(4), [0], alone) == (None, {})       # a laptop: its builds would lose too much
    assert split_cpus(range(8), [0, 1, 2], alone) == (None, {})  # one CPU a GPU would not hold a judge and a program


def test_a_core_s_two_threads_go_to_the_timings_together_or_not_at_all():
    # Where the kernel numbers a core's threads n apart (0 and 8 of 16), halving the CPUs by number gave
    # each timing CPU a sibling that a compiler or a check used: sharing the core's units, it slows the
    # judge without its waiting for a CPU, and a core scheduling cookie could keep it idle outright.
    from grader.batch.gpus import split_cpus
    shared, timing = split_cpus(range(16), [0, 1], lambda cpu: cpu % 8)
    assert timing == {0: [4, 5, 12, 13], 1: [6, 7, 14, 15]}
    assert shared == [0, 1, 2, 3, 8, 9, 10, 11]


@pytest.mark.parametrize("log,own", [
    ('kernel.cu(11): error: identifier "Bold" is undefined', True),
    ("kernel.o: in function `main':\n(.text+0x40): multiple definition of `cudaEventElapsedTime'", True),
    ("kernel.o: in function `f':\nkernel.cu:(.text+0x9): undefined reference to `helper'", True),
    ('kernel.cu(1): catastrophic error: cannot open source file "cuda_check.cuh"', False),
    ("nvcc error   : 'cicc' died due to signal 9 (Kill signal)", False),
    ("nvcc: fork: Resource temporarily unavailable", False),
    ("the compiler did not finish within 180 s", False),
])
def test_only_a_diagnostic_of_the_source_itself_skips_the_build_alone(log, own):
    assert build.source_error(log) is own


# A real batch on a GPU: the class of gpu_corpus.py, whose verdicts test_gpu_grading.py and
# test_gpu_jail.py check (the references full marks, the skeletons incorrect, a compile error a build error).


def test_a_grader_killed_outright_takes_the_program_it_was_running_with_it(tmp_path):
    """So that a batch killed midway (kill -9) leaves no submission running on the GPU."""
    pidfile = tmp_path / "pid"
    code = ("import sys; from pathlib import Path; from grader import sandbox\n"
            f"sandbox.run(['sh', '-c', 'echo $$ > {pidfile}; exec sleep 1000'], Path({str(tmp_path)!r}), "
            f"Path({str(tmp_path / 'log')!r}), timeout=1000)\n")
    grader_proc = subprocess.Popen([sys.executable, "-c", code], env=dict(os.environ, PYTHONPATH=str(tasks.ROOT / "grader")))
    import time
    for _ in range(200):
        if pidfile.exists() and pidfile.read_text().strip():
            break
        time.sleep(0.05)
    pid = int(pidfile.read_text())
    grader_proc.kill()
    grader_proc.wait()
    for _ in range(100):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        os.kill(pid, 9)
        pytest.fail("the program outlived the grader")


def test_an_assignment_this_machine_cannot_grade_is_left_for_a_later_batch_with_the_reason(fake_kit, tmp_path,
                                                                                         monkeypatch):
    def cannot(task, work, gpu, opts, result):
        result.verdict, result.message = grade.Verdict.SKIPPED, "trmm needs 2 GPUs and this machine has 1"
        return False
    monkeypatch.setattr(grade, "check_stages", cannot)
    subs, out = make_class(tmp_path), tmp_path / "out"
    assert batch.main(args(subs, out)) == 0
    book = {r["student"]: r for r in read_gradebook(out)}
    assert book["alice"]["trmm"] == "" and "needs 2 GPUs" in book["alice"]["notes"]
    state = json.loads((out / "state.json").read_text())
    assert "alice/trmm" not in state["done"] and "alice/trmm" in state["skipped"]


def test_a_batch_with_similarity_keeps_the_files_and_reports_the_pairs_of_its_class(fake_kit, tmp_path):
    pytest.importorskip("copydetect", reason="the similarity report needs copydetect (pip install copydetect)")
    subs, out = make_class(tmp_path), tmp_path / "out"
    tiled = (HERE / "fixtures" / "similarity" / "trmm" / "tiled16.cu").read_text()
    (subs / "alice" / "trmm" / "kernel.cu").write_text(kernel("reference") + tiled.replace("void trmm(", "void trmm2("))
    shutil.copytree(subs / "alice", subs / "mallory")  # a verbatim copy of alice's entry
    assert batch.main(args(subs, out, ("similarity", True), ("threshold", None))) == 0
    assert (out / "sources" / "bob" / "trmm.cu").is_file()  # bob's file came from his zip
    page = (out / "similarity" / "trmm.html").read_text()
    assert "alice" in page and "mallory" in page
    summary = (out / "summary.md").read_text()
    assert "== Similarity" in summary and "alice" in summary.split("== Similarity")[1]


def test_repeated_terms_stop_a_batch_once(monkeypatch):
    batch._interrupted = False
    with pytest.raises(KeyboardInterrupt):
        batch._interrupt(15, None)
    batch._interrupt(15, None)  # the second TERM of a Slurm time limit: ignored while what finished is saved
    batch._interrupted = False
