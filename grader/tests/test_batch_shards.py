"""The batch verb over a class graded in shards and merged, and over a class that changes between
runs (a student gone, moved to another shard, or whose file is gone), on the fake harness
(fake_kit.py) as in test_batch.py."""
import json
import shutil

import pytest

from fake_kit import args, kernel, make_class, read_gradebook
from grader import batch, similarity, tasks


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


def test_a_student_moved_to_another_shard_by_a_new_entry_keeps_the_grade_of_their_new_file_in_the_merge(fake_kit,
                                                                                                      tmp_path):
    # A shard is every n-th student by name: a new entry that sorts first moves the others along, and the
    # shard that had carol kept her old grade, which the merge (shards in order) laid over the new one.
    subs, out = tmp_path / "subs", tmp_path / "split"
    for who, scenario in (("bob", "reference"), ("carol", "skeleton")):
        (subs / who).mkdir(parents=True)
        (subs / who / "kernel.cu").write_text(kernel(scenario))

    def grade_in_two_shards():
        for i in (1, 2):
            assert batch.main(args(subs, out / "shards" / str(i), ("shard", f"{i}/2"))) == 0
        assert batch.main(args(subs, out, ("merge", 2))) == 0
        return {r["student"]: r["trmm"] for r in read_gradebook(out)}

    assert grade_in_two_shards() == {"bob": "100", "carol": "0"}
    (subs / "carol" / "kernel.cu").write_text(kernel("reference"))  # carol resubmits
    (subs / "aaron").mkdir()
    (subs / "aaron" / "kernel.cu").write_text(kernel("skeleton"))   # and aaron comes first now
    assert grade_in_two_shards() == {"aaron": "0", "bob": "100", "carol": "100"}
    assert json.loads((out / "records" / "carol" / "trmm.json").read_text())["verdict"] == "correct"


def test_a_student_gone_from_the_class_folder_leaves_the_gradebooks_and_comes_back_without_a_regrade(
        fake_kit, tmp_path, capsys):
    # The gradebooks listed every student the batch had ever graded: a folder renamed (a late
    # resubmission's new name) left its old grade beside the new one, under the same student id.
    subs, out = tmp_path / "subs", tmp_path / "out"
    for who, scenario in (("alice", "reference"), ("bob", "skeleton")):
        (subs / who).mkdir(parents=True)
        (subs / who / "kernel.cu").write_text(kernel(scenario))
    assert batch.main(args(subs, out)) == 0
    shutil.move(subs / "bob", tmp_path / "bob")
    capsys.readouterr()
    assert batch.main(args(subs, out)) == 0
    said = capsys.readouterr().err
    assert "bob/trmm" in said and "left out of the gradebooks" in said
    for name in ("gradebook.csv", "gradebook-canvas.csv", "gradebook-moodle.csv"):
        assert "bob" not in (out / name).read_text()
    assert (out / "records" / "bob" / "trmm.json").exists()  # kept
    assert set(similarity.submissions_of(out)["trmm"]) == {"alice"}  # and not compared with the class
    builds = len(fake_kit["build"])
    shutil.move(tmp_path / "bob", subs / "bob")
    assert batch.main(args(subs, out)) == 0
    assert {r["student"]: r["trmm"] for r in read_gradebook(out)} == {"alice": "100", "bob": "0"}
    assert len(fake_kit["build"]) == builds  # the same file: its grade taken back, not graded again


def test_a_student_whose_file_is_gone_has_no_grade_for_it_in_the_gradebook(fake_kit, tmp_path):
    subs, out = tmp_path / "subs", tmp_path / "out"
    (subs / "carol").mkdir(parents=True)
    (subs / "carol" / "kernel.cu").write_text(kernel("reference"))
    assert batch.main(args(subs, out)) == 0
    (subs / "carol" / "kernel.cu").unlink()
    (subs / "carol" / "notes.txt").write_text("withdrawn")
    assert batch.main(args(subs, out)) == 0
    [row] = read_gradebook(out)
    assert row["trmm"] == "" and row["total"] == "0" and "nothing gradeable" in row["notes"]


def test_a_merge_lists_the_shards_that_did_not_finish_and_exits_2(fake_kit, tmp_path):
    subs = make_class(tmp_path)
    out = tmp_path / "split"
    assert batch.main(args(subs, out / "shards" / "1", ("shard", "1/2"))) == 0  # shard 2 never ran
    assert batch.main(args(subs, out, ("merge", 2))) == 2
    assert "shards that did not finish: 2" in (out / "summary.md").read_text()


def test_a_shard_that_is_not_i_of_n_is_refused_in_one_line(tmp_path):
    with pytest.raises(tasks.TaskError, match="expected I/N"):
        batch.main(args(tmp_path, tmp_path / "out", ("shard", "4/3")))
