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

    rc = batch.main(SimpleNamespace(submissions=subs, out=out, jobs=4, assignments=["conv1d"], regrade=None,
                                    regrade_all=False, timed_runs=10, no_reference=True, no_isolation=False,
                                    memory_gib=16))
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


def known_hostile():
    """(assignment, file, verdict in a batch) for every assignments/*/tests/hostile_*.cu: its
    `// expect-batch:` line where the jail changes the outcome, else its `// expect:` line."""
    for name in tasks.registry():
        for f in sorted((ROOT / "assignments" / name / "tests").glob("hostile_*.cu")):
            head = f.read_text().splitlines()[:6]
            batch_line = next((h for h in head if h.startswith("// expect-batch:")), head[0])
            yield name, f, batch_line.split(":", 1)[1].strip()


def test_the_hostile_corpus_of_every_assignment_gets_its_verdicts_in_a_jailed_batch(local_gpu, tmp_path):
    """The forgeries of time, inputs, outputs, results and libraries (assignments/*/tests/hostile_*.cu),
    batch-graded in the jail as a class would be: each gets its verdict, never more than its honest rate."""
    subs, out = tmp_path / "class", tmp_path / "out"
    want = {}
    for name, f, verdict in known_hostile():
        student = f"{name}-{f.stem}"
        (subs / student / name).mkdir(parents=True)
        shutil.copy(f, subs / student / name / "kernel.cu")
        want[(student, name)] = (verdict, f)
    assignments = sorted({a for _, a in want})
    rc = batch.main(SimpleNamespace(submissions=subs, out=out, jobs=4, assignments=assignments, regrade=None,
                                    regrade_all=False, timed_runs=10, no_reference=True, no_isolation=False,
                                    memory_gib=16))
    assert rc == 0
    wrong = {}
    for (student, name), (verdict, f) in want.items():
        r = json.loads((out / "records" / student / f"{name}.json").read_text())
        if r["verdict"] != verdict:
            wrong[student] = (verdict, r["verdict"], r.get("message", "")[:200])
        below = next((h.split(":", 1)[1] for h in f.read_text().splitlines()[:6]
                      if h.startswith("// expect-performance-below:")), None)
        task = tasks.load(name)
        if verdict == "correct" and below is not None:
            earned = r["score"] - r["correctness_points"]
            assert earned < float(below) * task.points["performance"], (student, r.get("message"))
    assert not wrong, wrong
