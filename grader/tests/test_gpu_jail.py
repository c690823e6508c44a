"""GPU test: the class of gpu_corpus.py, with honest students, every known submission and the hostile
corpus (fixtures/batch/hostile/*.cu, each a conv1d kernel.cu whose first line names its verdict),
batch-graded in the jail. Every entry gets its verdict, the gradebook and the records are whole,
nothing outside the output folder changed (the kit, the class folder, a stand-in for the TA's home,
another checkout, the host's /tmp), nothing reached the network and no process is left. Skipped
without a GPU or without bubblewrap."""
import csv
import shutil

import pytest

import gpu_corpus
from grader import tasks

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap (apt-get install bubblewrap)")


def test_a_class_with_hostile_entries_is_graded_in_the_jail_and_nothing_outside_the_outputs_changes(corpus):
    assert corpus.jailed and corpus.exit_code == 0, corpus.failures()
    assert len(corpus.hostile) >= 17
    want = {f.stem: gpu_corpus.expectation(f, jailed=True) for _, f in corpus.hostile}
    got = {f.stem: corpus.record(name, f) for name, f in corpus.hostile}
    wrong = {s: (want[s].verdict, r["verdict"], r.get("message", "")[:200]) for s, r in got.items()
             if r["verdict"] != want[s].verdict or not want[s].says(r.get("message", ""))}
    assert not wrong, wrong
    # The grader cannot tell when a run went over its limits, only that it had by its look: such a run
    # keeps no case's points (wide_char_nesting kept 33 for the cases done before the first look).
    stopped = {s: r["score"] for s, r in got.items() if "stopped by the grader" in r.get("message", "")}
    assert len(stopped) >= 4 and not any(stopped.values()), stopped
    assert all("bubblewrap" in r["isolation"]["jail"] for r in got.values())
    book = {row["student"]: row for row in csv.DictReader((corpus.out / "gradebook.csv").open())}
    assert {gpu_corpus.student(n, f) for n, f in corpus.hostile} <= set(book)
    honest = gpu_corpus.student("conv1d", gpu_corpus.reference("conv1d"))
    assert float(book[honest]["conv1d"]) == tasks.load("conv1d").max_score
    assert "pwned" not in (corpus.out / "gradebook.csv").read_text()
    watch = corpus.watch
    assert watch.changed == [], "a file outside the output folder changed"
    assert watch.tmp_left == []
    assert watch.connections == 0, "a jailed program connected to the grader's machine"
    assert watch.processes_left == [], f"processes left after the batch: {watch.processes_left}"


def test_the_known_corpus_hostile_entries_included_is_batch_graded_in_the_jail_every_record_saying_so(corpus):
    """The forgeries of time, inputs, outputs, results and libraries (assignments/*/tests/hostile_*.cu)
    and every other known submission, graded as one class in the jail (gpu_corpus.py): the batch ends
    with exit 0, and each record says the jail held it. Each file's own verdict, and that a hostile
    one earns no more than its honest rate, is test_gpu_grading's test of that file."""
    assert corpus.jailed and corpus.exit_code == 0, corpus.failures()
    hostile = [(n, f) for n, f in gpu_corpus.known() if f.stem.startswith("hostile_") and n in corpus.graded]
    assert len(hostile) >= 12
    for name, f in gpu_corpus.known():
        if name in corpus.graded:
            assert "bubblewrap" in corpus.record(name, f)["isolation"]["jail"], f.name
