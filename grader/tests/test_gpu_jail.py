"""GPU test: a class with honest students and the hostile corpus (fixtures/batch/hostile/*.cu, each
a conv1d kernel.cu whose first line names its verdict) batch-graded in the jail. Every entry gets its
verdict, the gradebook and the records are whole, nothing outside the output folder changed (the
kit, the class folder, a stand-in for the TA's home, another checkout, the host's /tmp), nothing
reached the network and no process is left. Skipped without a GPU or without bubblewrap."""
import csv
import hashlib
import json
import os
import shutil
import socket
import subprocess
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

import gpu_corpus
from grader import batch, build, tasks

ROOT = tasks.ROOT
HOSTILE = Path(__file__).parent / "fixtures" / "batch" / "hostile"
pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap (apt-get install bubblewrap)")


def snapshot(*folders: Path) -> dict:
    """path -> SHA-256 of every file under the folders (caches of Python and pytest left out)."""
    out = {}
    for top in folders:
        for dirpath, dirs, files in os.walk(top):
            dirs[:] = [d for d in dirs if d not in ("__pycache__", ".pytest_cache", ".venv", ".git")]
            for f in files:
                p = Path(dirpath) / f
                if p.is_file() and not p.is_symlink():
                    out[str(p)] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def expected(path: Path) -> str:
    return path.read_text().splitlines()[0].split(":", 1)[1].strip()


def test_a_class_with_hostile_entries_is_graded_in_the_jail_and_nothing_outside_the_outputs_changes(
        local_gpu, tmp_path):
    subs, out, home, other = tmp_path / "class", tmp_path / "out", tmp_path / "ta-home", tmp_path / "other-kit"
    (home).mkdir()
    (home / "secret.txt").write_text("the TA's own file\n")
    (other / "reference" / "conv1d").mkdir(parents=True)
    shutil.copy(ROOT / "reference" / "conv1d" / "kernel.cu", other / "reference" / "conv1d" / "kernel.cu")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.settimeout(0.5)
    port = listener.getsockname()[1]
    reached = []
    stop = threading.Event()

    def listen():
        while not stop.is_set():
            try:
                reached.append(listener.accept()[1])
            except OSError:
                pass
    threading.Thread(target=listen, daemon=True).start()

    want = {}
    for name, src in (("honest", ROOT / "reference" / "conv1d" / "kernel.cu"),
                      ("honest-basic", ROOT / "assignments" / "conv1d" / "tests" / "basic_correct.cu")):
        (subs / name / "conv1d").mkdir(parents=True)
        shutil.copy(src, subs / name / "conv1d" / "kernel.cu")
        want[name] = expected(src) if name != "honest" else "correct"
    for f in sorted(HOSTILE.glob("*.cu")):
        text = f.read_text()
        for key, value in (("@KIT@", ROOT), ("@SUBMISSIONS@", subs), ("@OUT@", out), ("@HOME@", home),
                           ("@OTHER@", other), ("@PORT@", port)):
            text = text.replace(key, str(value))
        (subs / f"hostile-{f.stem}" / "conv1d").mkdir(parents=True)
        (subs / f"hostile-{f.stem}" / "conv1d" / "kernel.cu").write_text(text)
        want[f"hostile-{f.stem}"] = expected(f)

    build.build_harness(tasks.load("conv1d"), local_gpu.arch, tmp_path / "harness.log")  # before the snapshot
    outside = [ROOT, subs, home, other]
    before = snapshot(*outside)
    tmp_before = set(os.listdir("/tmp"))

    rc = batch.main(SimpleNamespace(submissions=subs, out=out, jobs=os.cpu_count() or 4, assignments=["conv1d"],
                                    regrade=None, regrade_all=False, timed_runs=10, no_reference=True,
                                    no_isolation=False,
                                    memory_gib=4))  # the memory hogs reach it sooner than the default 16
    stop.set()

    assert rc == 0
    got = {s: json.loads((out / "records" / s / "conv1d.json").read_text()) for s in want}
    wrong = {s: (want[s], r["verdict"], r.get("message", "")[:200]) for s, r in got.items() if r["verdict"] != want[s]}
    assert not wrong, wrong
    assert all("bubblewrap" in r["isolation"]["jail"] for r in got.values())
    book = {row["student"]: row for row in csv.DictReader((out / "gradebook.csv").open())}
    assert set(book) == set(want)
    assert float(book["honest"]["conv1d"]) == tasks.load("conv1d").max_score
    assert "pwned" not in (out / "gradebook.csv").read_text()
    assert snapshot(*outside) == before, "a file outside the output folder changed"
    assert not [n for n in set(os.listdir("/tmp")) - tmp_before if "escaped" in n or "pwned" in n]
    assert reached == [], "a jailed program connected to the grader's machine"
    left = subprocess.run(["pgrep", "-f", "kit_daemon|kit_orphan|fill-|kit-batch-"], capture_output=True,
                          text=True).stdout.split()
    assert not left, f"processes left after the batch: {left}"


def test_the_known_corpus_hostile_entries_included_is_batch_graded_in_the_jail_every_record_saying_so(corpus):
    """The forgeries of time, inputs, outputs, results and libraries (assignments/*/tests/hostile_*.cu)
    and every other known submission, graded as one class in the jail (gpu_corpus.py): the batch ends
    with exit 0, and each record says the jail held it. Each file's own verdict, and that a hostile
    one earns no more than its honest rate, is test_gpu_grading's test of that file."""
    assert corpus.jailed and corpus.exit_code == 0
    hostile = [(n, f) for n, f in gpu_corpus.known() if f.stem.startswith("hostile_") and n in corpus.graded]
    assert len(hostile) >= 12
    for name, f in gpu_corpus.known():
        if name in corpus.graded:
            assert "bubblewrap" in corpus.record(name, f)["isolation"]["jail"], f.name
