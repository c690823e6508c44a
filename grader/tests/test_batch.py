"""The batch verb, without a GPU: entry discovery and safe unpacking, then whole batches whose
runner and checker are tests/fake_harness.py replaying records taken on an NVIDIA H200
(fixtures/batch/trmm/, which add trmm's hidden case), so that the gradebook, the records, the
reports, results.json, resuming and regrading are the grader's own code at work. The real batch on
a GPU is the class of gpu_corpus.py (test_gpu_grading.py, test_gpu_jail.py)."""
import csv
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path
from types import SimpleNamespace

import pytest

from grader import archives, batch, build, grade, jail, performance, sandbox, submissions, tasks
from grader import gpu as gpu_mod
from grader.batch import gpus as batch_gpus
from grader.results import GpuInfo


ROOT = tasks.ROOT

HERE = Path(__file__).parent
FIXTURES = HERE / "fixtures"
EPS = {n: tasks.load(n).entry_point for n in tasks.registry()}


from fake_kit import ENTRY, args, kernel, make_class, read_gradebook  # noqa: E402


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
# Discovery.

def test_a_folder_a_zip_and_a_tarball_are_each_one_student_and_an_empty_entry_is_listed(tmp_path):
    subs = make_class(tmp_path)
    found = {e.student: e for e in submissions.discover(subs, EPS, tmp_path / "staging")}
    assert sorted(found) == ["alice", "bob", "carol", "dave", "erin"]
    assert found["alice"].shown == {"trmm": "trmm/kernel.cu"}
    assert found["bob"].shown == {"trmm": "hw/trmm_kernel.cu"} and found["bob"].layout == "zip"
    assert found["carol"].layout == "tar.gz" and list(found["carol"].files) == ["trmm"]
    assert found["dave"].files == {} and found["dave"].problem == "nothing gradeable: no .cu file in it"
    assert list(found["erin"].files) == ["trmm"]  # by the entry point it defines


def test_a_file_is_matched_by_folder_then_file_name_then_the_entry_point_it_defines(tmp_path):
    root = tmp_path / "s"
    (root / "Syr2k").mkdir(parents=True)
    (root / "Syr2k" / "anything.cu").write_text("int x;\n")
    (root / "matmul.cu").write_text("int y;\n")
    (root / "mine.cu").write_text("/* void trmm(int n) { } */\nvoid reduce_sum(long long n, const double* x, double* s)\n{ }\n")
    (root / "helpers.cu").write_text("int z;\n")
    e = submissions.fill(submissions.Entry("x", "x", "folder"), root, EPS, tmp_path / "st")
    assert e.shown == {"syr2k": "Syr2k/anything.cu", "matmul": "matmul.cu", "reduce": "mine.cu"}
    assert any("helpers.cu" in n and "not graded" in n for n in e.notes)


def test_two_files_for_one_assignment_grade_kernel_cu_and_note_the_other(tmp_path):
    root = tmp_path / "s"
    (root / "trmm").mkdir(parents=True)
    (root / "trmm" / "old.cu").write_text(ENTRY)
    (root / "trmm" / "kernel.cu").write_text(ENTRY)
    e = submissions.fill(submissions.Entry("x", "x", "folder"), root, EPS, tmp_path / "st")
    assert e.shown == {"trmm": "trmm/kernel.cu"}
    assert any("old.cu" in n and "another file for trmm" in n for n in e.notes)


def test_a_zip_with_a_path_leaving_the_archive_is_refused_and_listed_with_the_reason(tmp_path):
    subs = tmp_path / "subs"
    subs.mkdir()
    with zipfile.ZipFile(subs / "mallory.zip", "w") as z:
        z.writestr("trmm/kernel.cu", ENTRY)
        z.writestr("../../escaped.cu", ENTRY)
    [e] = submissions.discover(subs, EPS, tmp_path / "staging")
    assert e.student == "mallory" and e.files == {}
    assert "refused" in e.problem and "leaves the archive" in e.problem
    assert not list(tmp_path.rglob("escaped.cu"))


def test_an_absolute_path_a_symlink_and_a_bomb_are_each_refused(tmp_path):
    a = tmp_path / "abs.zip"
    with zipfile.ZipFile(a, "w") as z:
        z.writestr("/etc/kernel.cu", ENTRY)
    link = tmp_path / "link.tar.gz"
    with tarfile.open(link, "w:gz") as t:
        info = tarfile.TarInfo("trmm/kernel.cu")
        info.type, info.linkname = tarfile.SYMTYPE, "/home/ta/kit/reference/trmm/kernel.cu"
        t.addfile(info)
    bomb = tmp_path / "bomb.zip"
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("trmm/kernel.cu", b"\0" * (archives.MAX_BYTES + 1))
    many = tmp_path / "many.tar.gz"
    with tarfile.open(many, "w:gz") as t:
        for i in range(archives.MAX_FILES + 1):
            info = tarfile.TarInfo(f"f{i}.txt")
            t.addfile(info, io.BytesIO(b""))
    for path, words in ((a, "absolute path"), (link, "link"), (bomb, "MiB"), (many, "files")):
        with pytest.raises(archives.Refused, match=words):
            archives.extract(path, tmp_path / ("x-" + path.name))


def test_gradescopes_export_names_each_submission_by_its_submitters(tmp_path):
    subs = tmp_path / "export"
    for sid in ("submission_101", "submission_102", "submission_103"):
        (subs / sid).mkdir(parents=True)
    (subs / "submission_101" / "kernel.cu").write_text(ENTRY)
    (subs / "submission_102" / "trmm.cu").write_text(ENTRY)
    (subs / "submission_metadata.yml").write_text(
        "---\nsubmission_101:\n  :submitters:\n  - :name: Ada Lovelace\n    :sid: '1815'\n"
        "    :email: ada@example.edu\n  :created_at: 2026-11-20 10:00:00.000000000 -08:00\n  :score: 0.0\n"
        "submission_102:\n  :submitters:\n  - :name: Alan Turing\n    :sid: '1912'\n"
        "  - :name: Grace Hopper\n    :sid: '1906'\n"
        "submission_103:\n  :submitters:\n  - :name: Empty Handed\n    :email: eh@example.edu\n")
    found = {e.student: e for e in submissions.discover(subs, EPS, tmp_path / "st")}
    assert sorted(found) == ["1815", "1912", "eh"]
    assert found["1815"].name == "Ada Lovelace" and found["1815"].layout == "gradescope"
    assert [m.id for m in found["1912"].members] == ["1912", "1906"]
    assert found["eh"].problem.startswith("nothing gradeable")


def test_canvas_and_moodle_downloads_are_grouped_by_student(tmp_path):
    subs = tmp_path / "lms"
    subs.mkdir()
    (subs / "smithjane_12345_67890_trmm.cu").write_text(ENTRY)
    with zipfile.ZipFile(subs / "smithjane_late_12345_67891_syr2k.zip", "w") as z:
        z.writestr("syr2k/kernel.cu", "int x;")
    (subs / "Jo Bloggs_4242_assignsubmission_file_").mkdir()
    (subs / "Jo Bloggs_4242_assignsubmission_file_" / "trmm_kernel.cu").write_text(ENTRY)
    found = {e.student: e for e in submissions.discover(subs, EPS, tmp_path / "st")}
    assert sorted(found) == ["Jo_Bloggs", "smithjane"]
    assert sorted(found["smithjane"].files) == ["syr2k", "trmm"] and found["smithjane"].layout == "canvas"
    assert found["Jo_Bloggs"].members[0].id == "4242" and list(found["Jo_Bloggs"].files) == ["trmm"]


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
    subs, out = tmp_path / "subs", tmp_path / "out"
    for s in ("alice", "bob", "carol"):
        (subs / s / "trmm").mkdir(parents=True)
        (subs / s / "trmm" / "kernel.cu").write_text(kernel("reference"))
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


def test_the_gradebook_has_one_row_per_student_and_one_per_member_of_a_group(tmp_path):
    state = {"entries": {"g1": {"name": "A & B", "members": [{"id": "a1", "name": "A"}, {"id": "b2", "name": "B"}],
                                "files": {"trmm": "kernel.cu"}},
                         "solo": {"name": "Solo", "members": [{"id": "solo", "name": "Solo"}], "files": {}}},
             "done": {"g1/trmm": {"score": 75.0, "verdict": "correct", "max_score": 100}}, "errors": {}}
    rows = list(csv.reader(io.StringIO(batch.gradebook_csv(state, ["trmm", "syr2k"]))))
    assert rows[0] == ["student", "name", "trmm", "syr2k", "total", "notes"]
    assert rows[1][:5] == ["a1", "A", "75", "", "75"] and rows[2][:5] == ["b2", "B", "75", "", "75"]
    assert rows[3][:5] == ["solo", "Solo", "", "", "0"]


def test_the_gradebook_is_replaced_whole_or_not_at_all(tmp_path, monkeypatch):
    path = tmp_path / "gradebook.csv"
    batch.atomic_write(path, "old\n")

    def broken(src, dst):
        raise OSError("disk full")
    monkeypatch.setattr(os, "replace", broken)
    with pytest.raises(OSError):
        batch.atomic_write(path, "new, but never complete\n")
    assert path.read_text() == "old\n"


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


def test_shards_of_a_class_merged_give_the_gradebook_records_and_reports_of_one_batch(fake_kit, tmp_path):
    subs = make_class(tmp_path)
    one, split = tmp_path / "one", tmp_path / "split"
    assert batch.main(args(subs, one)) == 0
    for i in (1, 2, 3):
        assert batch.main(args(subs, split / "shards" / str(i), ("shard", f"{i}/3"))) == 0
    shard_students = [set(json.loads((split / "shards" / str(i) / "state.json").read_text())["entries"]) for i in (1, 2, 3)]
    assert sum(len(s) for s in shard_students) == 5 and len(set().union(*shard_students)) == 5  # each once
    assert batch.main(args(subs, split, ("merge", 3))) == 0
    assert (split / "gradebook.csv").read_bytes() == (one / "gradebook.csv").read_bytes()
    for rec in (one / "records").glob("*/*.json"):
        got, want = (json.loads(p.read_text()) for p in (split / rec.relative_to(one), rec))
        assert got["verdict"] == want["verdict"] and got["score"] == want["score"]
    for page in (one / "reports").glob("*.md"):
        assert (split / "reports" / page.name).is_file()
    assert sorted(p.name for p in (split / "gradescope").iterdir()) == sorted(p.name for p in (one / "gradescope").iterdir())


def test_a_merge_lists_the_shards_that_did_not_finish_and_exits_2(fake_kit, tmp_path):
    subs = make_class(tmp_path)
    out = tmp_path / "split"
    assert batch.main(args(subs, out / "shards" / "1", ("shard", "1/2"))) == 0  # shard 2 never ran
    assert batch.main(args(subs, out, ("merge", 2))) == 2
    assert "shards that did not finish: 2" in (out / "summary.md").read_text()


def test_a_shard_that_is_not_i_of_n_is_refused_in_one_line(tmp_path):
    with pytest.raises(tasks.TaskError, match="expected I/N"):
        batch.main(args(tmp_path, tmp_path / "out", ("shard", "4/3")))


def test_repeated_terms_stop_a_batch_once(monkeypatch):
    batch._interrupted = False
    with pytest.raises(KeyboardInterrupt):
        batch._interrupt(15, None)
    batch._interrupt(15, None)  # the second TERM of a Slurm time limit: ignored while what finished is saved
    batch._interrupted = False


# ---------------------------------------------------------------------------------------------
# Several GPUs.

def two_gpus(monkeypatch, names=("NVIDIA H200", "NVIDIA H200")):
    base = json.loads((HERE / "fixtures" / "gpu_h200.json").read_text())
    infos = [GpuInfo(**{**base, "name": n, "count": len(names)}) for n in names]
    monkeypatch.setattr(gpu_mod, "detect", lambda index=0: infos[index])


def test_a_batch_on_two_gpus_grades_two_submissions_at_once_each_judge_on_a_gpu_of_its_own(
        fake_kit, tmp_path, monkeypatch):
    subs = make_class(tmp_path)
    assert batch.main(args(subs, tmp_path / "one")) == 0
    two_gpus(monkeypatch)
    log = tmp_path / "gpu-log.jsonl"
    monkeypatch.setenv("KIT_FAKE_GPU_LOG", str(log))
    monkeypatch.setenv("KIT_FAKE_SECONDS", "0.3")
    assert batch.main(args(subs, tmp_path / "two", ("jobs", 4))) == 0
    runs = [json.loads(line) for line in log.read_text().splitlines()]
    assert {r["gpus"] for r in runs} == {"0", "1"}  # one GPU each, both used
    overlap = any(a["start"] < b["end"] and b["start"] < a["end"] and a["gpus"] != b["gpus"]
                  for a in runs for b in runs if a is not b)
    assert overlap, "no two gradings ran at once"
    assert (tmp_path / "two" / "gradebook.csv").read_bytes() == (tmp_path / "one" / "gradebook.csv").read_bytes()


def test_gpus_of_two_models_are_not_mixed_unless_asked(fake_kit, monkeypatch, capsys):
    two_gpus(monkeypatch, ("NVIDIA H200", "NVIDIA H100 80GB HBM3"))
    with pytest.raises(tasks.TaskError, match="different models"):
        batch_gpus.choose([0, 1])
    assert set(batch_gpus.choose([0, 1], mixed=True)) == {0, 1}
    assert set(batch_gpus.choose(None, say=print)) == {0}  # by default, GPU 0's model only, and it says so
    assert "left out" in capsys.readouterr().out


def test_a_gpu_the_machine_does_not_have_is_refused_in_one_line(fake_kit, monkeypatch):
    two_gpus(monkeypatch)
    with pytest.raises(tasks.TaskError, match="there is no GPU 5"):
        batch_gpus.choose([5])
    with pytest.raises(tasks.TaskError, match="expected GPU numbers"):
        batch_gpus.parse("0,x")


def test_a_jailed_run_on_a_gpu_sees_that_gpus_device_node_alone(monkeypatch):
    j = jail.Jail(bwrap="bwrap", toolkit=Path("/usr/local/cuda"), include=Path("/tmp"),
                  devices=["/dev/nvidia0", "/dev/nvidia1", "/dev/nvidiactl", "/dev/nvidia-uvm"])
    cmd = " ".join(j.command(["runner"], Path("/tmp/w"), "run", gpus=["1"]))
    assert "--dev-bind /dev/nvidia1 " in cmd and "/dev/nvidia0" not in cmd
    assert "--dev-bind /dev/nvidiactl" in cmd and "--dev-bind /dev/nvidia-uvm" in cmd
    by_uuid = " ".join(j.command(["runner"], Path("/tmp/w"), "run", gpus=["GPU-1234"]))
    assert "/dev/nvidia0" in by_uuid and "--setenv CUDA_VISIBLE_DEVICES GPU-1234" in by_uuid


def test_gpus_given_to_the_grader_by_slurm_are_the_ones_its_programs_get(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    assert sandbox.physical((1,)) == ["3"]
    assert sandbox.gpu_env((0,))["CUDA_VISIBLE_DEVICES"] == "2"
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert sandbox.physical((1,)) == ["1"]


def test_a_judge_stopped_by_a_term_from_outside_stops_the_grading_without_a_verdict(fake_kit):
    from grader import judged
    s = judged.Session(records=[{"event": "start", "case": "n1"}], runner=sandbox.Run(-15, False, 1, ""),
                       judge=sandbox.Run(-15, False, 1, ""))
    with pytest.raises(KeyboardInterrupt):
        judged.judge_failed(tasks.load("trmm"), s)


# ---------------------------------------------------------------------------------------------
# Gradebooks an LMS imports as they are.

CANVAS_COLUMNS = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
"""Canvas's gradebook import: the identifying columns its export writes and its import reads, before
one column per assignment (Canvas Instructor Guide, "How do I import grades in the Gradebook?")."""


def test_a_class_from_a_canvas_download_gets_a_canvas_gradebook_keyed_by_canvas_user_id(fake_kit, tmp_path):
    subs, out = tmp_path / "lms", tmp_path / "out"
    subs.mkdir()
    (subs / "smithjane_12345_67890_trmm.cu").write_text(kernel("reference"))
    (subs / "doejohn_23456_67891_trmm.cu").write_text(kernel("no_bounds_check"))
    assert batch.main(args(subs, out)) == 0
    rows = list(csv.reader((out / "gradebook-canvas.csv").open()))
    assert rows[0] == CANVAS_COLUMNS + ["trmm"]
    assert rows[1][0].strip() == "Points Possible" and rows[1][5] == "100"
    by_id = {r[1]: r for r in rows[2:]}
    plain = {r["student"]: r for r in read_gradebook(out)}
    assert by_id["12345"][5] == plain["12345"]["trmm"] == "100"
    assert by_id["23456"][5] == plain["23456"]["trmm"] != ""


def test_the_moodle_gradebook_has_a_column_to_map_students_by_and_one_per_assignment(fake_kit, tmp_path):
    subs, out = make_class(tmp_path), tmp_path / "out"
    assert batch.main(args(subs, out)) == 0
    rows = list(csv.reader((out / "gradebook-moodle.csv").open()))
    assert rows[0] == ["Identifier", "Email address", "Full name", "trmm"]
    plain = {r["student"]: r["trmm"] for r in read_gradebook(out)}
    assert {r[0]: r[3] for r in rows[1:]} == plain


def test_gradescope_results_have_a_leaderboard_entry_for_a_correct_submission_only(fake_kit, tmp_path):
    subs, out = make_class(tmp_path), tmp_path / "out"
    assert batch.main(args(subs, out)) == 0
    alice = json.loads((out / "gradescope" / "alice" / "results.json").read_text())
    assert alice["leaderboard"] and alice["leaderboard"][0]["name"] == "trmm GFLOPS"
    assert alice["leaderboard"][0]["order"] == "desc" and alice["leaderboard"][0]["value"] > 0
    bob = json.loads((out / "gradescope" / "bob" / "results.json").read_text())
    assert bob["leaderboard"] == []


class Stages:
    """grade.check_stages and grade.timing_stages wrapped: who ran when, and how many checks at once."""

    def __init__(self, monkeypatch, hold_s=0.3):
        import threading
        import time
        self.lock, self.time, self.hold_s = threading.Lock(), time, hold_s
        self.spans, self.checking, self.timing, self.most_checks = [], set(), 0, 0
        self.overlaps = []  # (what, student) that ran while a timing held the GPU, or a timing while anything ran
        real_check, real_timing = grade.check_stages, grade.timing_stages
        monkeypatch.setattr(grade, "check_stages", lambda *a: self.run("check", real_check, *a))
        monkeypatch.setattr(grade, "timing_stages", lambda *a: self.run("timing", real_timing, *a))

    def student(self, result) -> str:
        return result.submission.split(":")[0].split("/")[0].split(".")[0]

    def run(self, kind, real, task, work, gpu, opts, result):
        who = self.student(result)
        with self.lock:
            if self.timing or (kind == "timing" and self.checking):
                self.overlaps.append((kind, who))
            if kind == "check":
                self.checking.add(who)
                self.most_checks = max(self.most_checks, len(self.checking))
            else:
                self.timing += 1
        try:
            return self.decide(kind, who, real, task, work, gpu, opts, result)
        finally:
            with self.lock:
                if kind == "check":
                    self.checking.discard(who)
                else:
                    self.timing -= 1
                self.spans.append((kind, who))

    def decide(self, kind, who, real, task, work, gpu, opts, result):
        self.time.sleep(self.hold_s)  # long enough for the next builds to reach the GPU
        return real(task, work, gpu, opts, result)


def correct_class(root: Path, n: int) -> Path:
    for i in range(n):
        (root / f"s{i}" / "trmm").mkdir(parents=True)
        (root / f"s{i}" / "trmm" / "kernel.cu").write_text(kernel("reference"))
    return root


def test_checks_of_several_submissions_share_the_gpu_while_a_timing_has_it_to_itself(fake_kit, tmp_path,
                                                                                    monkeypatch):
    stages = Stages(monkeypatch)
    subs, out = correct_class(tmp_path / "class", 6), tmp_path / "out"
    assert batch.main(args(subs, out, ("checks_per_gpu", 3), ("jobs", 6))) == 0
    assert 2 <= stages.most_checks <= 3, stages.spans
    assert stages.overlaps == [], "a timing shared the GPU"
    assert sorted(w for k, w in stages.spans if k == "timing") == [f"s{i}" for i in range(6)]
    book = {r["student"]: r for r in read_gradebook(out)}
    assert all(float(book[f"s{i}"]["trmm"]) == 100 for i in range(6))


def test_a_check_that_faults_beside_another_submissions_is_run_again_alone_before_its_verdict_counts(
        fake_kit, tmp_path, monkeypatch):
    """A neighbour whose check takes the GPU's memory makes a correct submission's check fail while
    they share it: its verdict is the one it gets with the GPU to itself."""
    stages = Stages(monkeypatch)
    real_decide = stages.decide

    def neighbour_takes_the_memory(kind, who, real, task, work, gpu, opts, result):
        if kind == "check" and who == "victim":
            stages.time.sleep(0.5)  # the neighbour is checked meanwhile
            with stages.lock:
                beside = stages.checking - {"victim"}
            if beside:
                result.verdict, result.message = grade.Verdict.RUNTIME_ERROR, "cudaErrorMemoryAllocation"
                result.score = 0.0
                return False
        if kind == "check" and who == "neighbour":
            stages.time.sleep(1.5)
        if kind == "check" and who == "wrong":
            stages.time.sleep(0.5)
            with stages.lock:
                assert "neighbour" in stages.checking
        return real_decide(kind, who, real, task, work, gpu, opts, result)
    stages.decide = neighbour_takes_the_memory
    subs, out = tmp_path / "class", tmp_path / "out"
    for who, scenario in (("neighbour", "reference"), ("victim", "reference"), ("wrong", "skeleton")):
        (subs / who / "trmm").mkdir(parents=True)
        (subs / who / "trmm" / "kernel.cu").write_text(kernel(scenario))
    assert batch.main(args(subs, out, ("checks_per_gpu", 4), ("jobs", 3))) == 0
    rec = json.loads((out / "records" / "victim" / "trmm.json").read_text())
    assert rec["verdict"] == "correct" and rec["score"] == 100, rec.get("message")
    assert "run again with the GPU to itself" in rec["batch"]["checked_alone"]
    assert [w for k, w in stages.spans if k == "check"].count("victim") == 2
    assert "checked_alone" not in json.loads((out / "records" / "neighbour" / "trmm.json").read_text())["batch"]
    # A wrong output is the submission's own, beside others or not: checked once.
    assert json.loads((out / "records" / "wrong" / "trmm.json").read_text())["verdict"] == "incorrect"
    assert [w for k, w in stages.spans if k == "check"].count("wrong") == 1


def test_a_check_stopped_for_writing_past_its_folders_limit_beside_others_is_not_run_again(fake_kit, tmp_path,
                                                                                            monkeypatch):
    """Its work folder's disk counts what it wrote alone: a neighbour cannot put it over that limit, so the
    stop is its verdict at once. A fault beside others, and a stop at the memory limit (which a kill by the
    machine's out-of-memory killer reads as), are still run again alone."""
    from grader import judged, sandbox
    from grader.results import CaseResult
    stages = Stages(monkeypatch)
    real_decide = stages.decide

    def over_limits(kind, who, real, task, work, gpu, opts, result):
        if kind == "check" and who in ("filler", "faulter", "hog"):
            stages.time.sleep(0.5)  # the neighbour is checked meanwhile
            with stages.lock:
                beside = stages.checking - {who}
            if beside:
                why = {"filler": f"{judged.STOPPED}wrote more than 8 GiB to disk",
                       "hog": f"{judged.STOPPED}used more than 16 {sandbox.MEMORY_STOP}",
                       "faulter": "the kernel faulted: cudaErrorIllegalAddress"}[who]
                result.cases = [CaseResult("n1", {"n": 1}, grade.Verdict.RUNTIME_ERROR, why)]
                result.verdict, result.message, result.score = grade.Verdict.RUNTIME_ERROR, f"case n1: {why}", 0.0
                return False
        if kind == "check" and who == "neighbour":
            stages.time.sleep(1.5)
        return real_decide(kind, who, real, task, work, gpu, opts, result)
    stages.decide = over_limits
    subs, out = tmp_path / "class", tmp_path / "out"
    for who in ("neighbour", "filler", "faulter", "hog"):
        (subs / who / "trmm").mkdir(parents=True)
        (subs / who / "trmm" / "kernel.cu").write_text(kernel("reference"))
    assert batch.main(args(subs, out, ("checks_per_gpu", 4), ("jobs", 4))) == 0
    checks = [w for k, w in stages.spans if k == "check"]
    filler = json.loads((out / "records" / "filler" / "trmm.json").read_text())
    assert filler["verdict"] == "runtime_error" and "wrote more than 8 GiB" in filler["message"]
    assert checks.count("filler") == 1 and "checked_alone" not in filler["batch"]
    for who in ("faulter", "hog"):
        rec = json.loads((out / "records" / who / "trmm.json").read_text())
        assert checks.count(who) == 2 and rec["verdict"] == "correct", who


def test_a_batch_s_burst_gap_reaches_every_timed_plan_the_library_s_too_and_each_record_says_it(fake_kit, tmp_path,
                                                                                                 monkeypatch):
    from grader import judged
    plans, real = [], judged.run
    monkeypatch.setattr(judged, "run", lambda checker, plan, *a, **k: plans.append(plan) or real(checker, plan, *a, **k))
    subs, out = tmp_path / "class", tmp_path / "out"
    for who in ("amy", "ben"):
        (subs / who / "trmm").mkdir(parents=True)
        (subs / who / "trmm" / "kernel.cu").write_text(kernel("reference"))
    assert batch.main(args(subs, out, ("burst_gap_ms", 50.0))) == 0
    timed = [line for plan in plans for line in plan.splitlines() if line.startswith("timed ")]
    assert len(timed) >= 3  # the library's and each student's
    assert all(" gap_ms=50 " in f" {line} " for line in timed), timed
    for who in ("amy", "ben"):
        rec = json.loads((out / "records" / who / "trmm.json").read_text())
        assert rec["verdict"] == "correct" and rec["batch"]["burst_gap_ms"] == 50.0
    # Without the option the plans say nothing: the judge's own 400 ms.
    plans.clear()
    assert batch.main(args(subs, tmp_path / "out2")) == 0
    assert plans and not any("gap_ms" in plan for plan in plans)


@pytest.mark.parametrize("gap", [-1.0, 10001.0, float("nan")])
def test_a_burst_gap_out_of_range_is_refused_with_the_range(tmp_path, gap):
    (tmp_path / "class").mkdir()
    with pytest.raises(tasks.TaskError, match=r"--burst-gap-ms .*: expected 0 to 10000"):
        batch.main(args(tmp_path / "class", tmp_path / "out", ("burst_gap_ms", gap)))


def test_checks_per_gpu_out_of_range_is_refused_with_the_range(tmp_path):
    (tmp_path / "class").mkdir()
    with pytest.raises(tasks.TaskError, match="--checks-per-gpu 0: expected 1"):
        batch.main(args(tmp_path / "class", tmp_path / "out", ("checks_per_gpu", 0)))


def test_a_gpu_that_stops_working_mid_batch_ends_it_with_the_reason_while_a_timing_waits(fake_kit, tmp_path,
                                                                                       monkeypatch):
    """The checks still to start are dropped when the batch stops: a timing that waited for them must
    not wait forever."""
    import signal
    from grader.gpu import NoGpu
    from grader.batch import scheduling
    real = grade.check_stages

    def check(task, work, gpu, opts, result):
        if "s1" in result.submission:
            import time
            time.sleep(0.5)  # s0 passed and waits to be timed; s2 and s3 wait to be checked
            raise NoGpu("no CUDA GPU: the runner could not open the device")
        return real(task, work, gpu, opts, result)
    monkeypatch.setattr(grade, "check_stages", check)
    monkeypatch.setattr(scheduling.Batch, "_gpu_works", lambda self: False)
    subs, out = correct_class(tmp_path / "class", 4), tmp_path / "out"

    def hung(signum, frame):
        raise TimeoutError("the batch hung")
    before = signal.signal(signal.SIGALRM, hung)
    signal.alarm(60)
    try:
        with pytest.raises(tasks.TaskError, match="the GPU stopped working during the batch"):
            batch.main(args(subs, out, ("checks_per_gpu", 1), ("jobs", 4)))
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, before)


def test_the_time_left_counts_the_checks_still_to_run_side_by_side_then_the_timings_of_those_that_pass():
    from grader.batch.progress import time_left
    # 80 submissions to check at 4 s, four at once; half pass; 10 passed already wait for 6 s timings.
    assert time_left(80, 10, [4.0] * 20, [6.0] * 3, 10, 4, 1) == pytest.approx(80 * 4 / 4 + (10 + 40) * 6)
    assert time_left(80, 10, [4.0] * 20, [6.0] * 3, 10, 4, 2) == pytest.approx(80 * 4 / 8 + (10 + 40) * 6 / 2)
    # Before the first timing ends, a timing is taken to cost a check.
    assert time_left(10, 2, [3.0, 5.0], [], 1, 4, 1) == pytest.approx(10 * 4 / 4 + (2 + 5) * 4)
    assert time_left(10, 0, [], [], 0, 4, 1) != time_left(10, 0, [], [], 0, 4, 1)  # nothing checked: unknown (nan)


def test_the_progress_line_says_the_time_left_once_a_check_has_ended(fake_kit, tmp_path, capsys):
    subs, out = correct_class(tmp_path / "class", 4), tmp_path / "out"
    info = gpu_mod.detect()
    opts = batch.Options(submissions=subs, out=out, jobs=2, assignments=["trmm"], reference=False, isolation=False,
                         tty=True, checks_per_gpu=2, gpu_infos={0: info})
    assert batch.Batch(opts, info).run() == 0
    err = capsys.readouterr().err
    assert "[4/4]" in err and "left ~" in err


def test_checks_side_by_side_default_to_one_per_16_gib_of_gpu_memory_at_most_four():
    gib = 1 << 30
    info = GpuInfo("NVIDIA L4", "sm_89")
    assert batch_gpus.default_checks(info) == 4  # memory not known
    for memory, checks in ((16, 1), (24, 1), (40, 2), (48, 3), (80, 4), (141, 4)):
        info.memory_bytes = memory * gib
        assert batch_gpus.default_checks(info) == checks, memory
