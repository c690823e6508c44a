"""GPU tests: the hidden references, the skeletons and every known submission kept in
assignments/<name>/tests/ get their verdicts on the local GPU, all of them graded once as a class in
a batch (gpu_corpus.py: in the jail where bubblewrap is installed). Skipped without a GPU."""
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

import gpu_corpus
from grader import tasks
from grader.grade import grade
from grader.results import Verdict

HEAVY_COMPILE = Path(__file__).parent / "fixtures" / "heavy_compile.inc"
"""Appended to a kernel.cu: seconds of one core to compile, the program unchanged."""


def reference_or_skip(name) -> Path:
    """reference/<name>/kernel.cu, or a skip where the kit came without its hidden references."""
    ref = gpu_corpus.reference(name)
    if not ref.is_file():
        pytest.skip(f"needs the hidden reference of {name} (reference/{name}/kernel.cu)")
    return ref


def load_or_skip(name, gpu):
    """The task, or a skip naming why this machine cannot grade it (jacobi_2gpu on one GPU)."""
    task = tasks.load(name)
    if gpu.count < task.gpus_required:
        pytest.skip(f"{name} needs {task.gpus_required} GPUs; this machine has {gpu.count}")
    return task


def assert_below_expected_performance(want, task, score, correctness_points, message) -> None:
    """`// expect-performance-below: F`: the submission earned less than F of the performance points."""
    if want.performance_below is not None:
        assert score - correctness_points < want.performance_below * task.points["performance"], message


@pytest.mark.parametrize("name", tasks.registry())
def test_the_hidden_reference_gets_full_marks(local_gpu, corpus, name):
    task = load_or_skip(name, local_gpu)
    r = corpus.record(name, gpu_corpus.reference(name))
    assert r["verdict"] == "correct", r["message"]
    assert all(c["verdict"] == "correct" for c in r["cases"])
    assert r["score"] == r["max_score"], "; ".join(f"{p['rate']:.0f} {task.metric} earned {p['points']} points"
                                                   for p in r["performance"])
    assert all(p["baseline_rate"] for p in r["performance"]), "the library baseline was timed next to it"


@pytest.mark.parametrize("name", tasks.registry())
def test_the_unfilled_skeleton_is_incorrect_because_nothing_was_computed(local_gpu, corpus, name):
    load_or_skip(name, local_gpu)
    r = corpus.record(name, gpu_corpus.skeleton(name))
    assert r["verdict"] == "incorrect"
    assert "not computed" in r["message"]
    assert r["score"] == 0


@pytest.mark.parametrize("name,path", [pytest.param(n, f, id=f"{n}/{f.stem}") for n, f in gpu_corpus.known()])
def test_each_known_submission_gets_its_expected_verdict(local_gpu, corpus, name, path):
    task = load_or_skip(name, local_gpu)
    want = gpu_corpus.expectation(path, corpus.jailed)
    r = corpus.record(name, path)
    assert r["verdict"] == want.verdict, f"{r['verdict']}: {r['message']}"
    assert want.says(r["message"]), r["message"]
    assert_below_expected_performance(want, task, r["score"], r["correctness_points"], r["message"])
    if want.verdict == "correct":
        # Correct and timed in full: work left on another stream counts, so the rate is possible.
        assert all(p["rate"] <= p["peak"] for p in r["performance"] if p["peak"])
    else:
        assert r["score"] < r["max_score"]


@pytest.mark.parametrize("name,path", [pytest.param(n, f, id=f"{n}/{f.stem}") for n, f in gpu_corpus.known()
                                       if gpu_corpus.jail_changes(f)])
def test_a_known_submission_the_jail_changes_gets_its_own_verdict_graded_alone_outside_it(local_gpu, name, path):
    """A file whose `// expect-batch:` differs (cuBLAS opened at run time: the jail has no cuBLAS to
    open) is graded alone too, as `make grade` does, where the judge must catch what it does."""
    want = gpu_corpus.expectation(path, jailed=False)
    r = grade(load_or_skip(name, local_gpu), path, local_gpu)
    assert r.verdict == Verdict(want.verdict), f"{r.verdict.value}: {r.message}"
    assert want.says(r.message), r.message


def test_a_runner_of_thousands_of_idle_threads_gets_no_time_between_the_judges_inputs_and_its_clock(local_gpu):
    """Graded outside the jail, the runner has no cgroup of its own, and the judge counts its other
    threads one /proc file each. hostile_judge_stall.cu starts 6000 idle threads and keeps a kernel
    polling the inputs: while the judge counted them after writing the inputs, the kernel computed
    each call off the clock (an H200: 15,897 GFLOPS, full marks). Counted before the inputs exist,
    its calls are timed at its tiled kernel's own rate."""
    path = gpu_corpus.ROOT / "assignments" / "trmm" / "tests" / "hostile_judge_stall.cu"
    task = load_or_skip("trmm", local_gpu)
    want = gpu_corpus.expectation(path, jailed=False)
    r = grade(task, path, local_gpu)
    assert r.verdict == Verdict(want.verdict), f"{r.verdict.value}: {r.message}"
    assert_below_expected_performance(want, task, r.score, r.correctness_points, r.message)


def test_a_compile_that_holds_a_core_cannot_slow_the_library_or_the_empty_call_timed_beside_it(local_gpu, tmp_path):
    """The library's routes and the empty call's round trip (taken off every timed run) are timed while
    kernel.cu compiles only where there are 4 or more cores (performance.EarlyBaselines). On an H100
    held to two cores and timed beside the compile all the same, the round trip read 2.2 to 3.3 ms in
    place of 0.3: taken off each run it left reduce's reference at no time at all, an invalid
    measurement, and it would make a slower kernel look faster (16 cores: 0.3 ms, the overlap harmless).
    Here reduce's reference, with a compile of some seconds appended, is graded on two cores: it gets
    full marks, and the library was timed after the student, not beside the compile."""
    ref = reference_or_skip("reduce")
    src, record = tmp_path / "kernel.cu", tmp_path / "reduce.json"
    src.write_text(ref.read_text() + HEAVY_COMPILE.read_text())
    two = sorted(os.sched_getaffinity(0))[:2]
    cmd, env = gpu_corpus.grader_command("grade", "reduce", "--submission", str(src), "--json", str(record))
    r = subprocess.run(cmd, cwd=tasks.ROOT, env=env, capture_output=True, text=True, timeout=600,
                       preexec_fn=lambda: os.sched_setaffinity(0, two))
    assert r.returncode in (0, 1) and record.is_file(), r.stdout[-3000:] + r.stderr[-3000:]  # 1: not full marks
    rec = json.loads(record.read_text())
    assert "library" not in rec["stage_seconds"], rec["stage_seconds"]
    assert (rec["verdict"], rec["score"]) == ("correct", tasks.load("reduce").max_score), r.stdout[-3000:]


def test_a_class_of_heavy_compiles_takes_no_cpu_from_the_timing_beside_them(local_gpu, tmp_path):
    """A batch builds on every core while it times. conv1d's reference sorts first in a class whose
    other entries (twice as many as cores) each take seconds of one core to compile: the reference is
    timed while they build. At the normal priority the compilers took the CPU from its judge and runner
    in each of its three timings ("too busy to time": not graded); at the idle priority they take none
    (the batch's own threads may still cost it a second timing), and it gets full marks. The bursts
    keep their 0.4 s gaps: with the class's 50 ms the timing was over before the compilers took the
    CPU, and the reference got full marks at the normal priority too."""
    ref = reference_or_skip("conv1d")
    subs, out = tmp_path / "class", tmp_path / "out"
    (subs / "a-reference" / "conv1d").mkdir(parents=True)
    (subs / "a-reference" / "conv1d" / "kernel.cu").write_text(ref.read_text())
    heavy = gpu_corpus.skeleton("conv1d").read_text() + HEAVY_COMPILE.read_text()
    for i in range(2 * len(os.sched_getaffinity(0))):  # incorrect at once: built, never timed
        (subs / f"b-heavy{i:02d}" / "conv1d").mkdir(parents=True)
        (subs / f"b-heavy{i:02d}" / "conv1d" / "kernel.cu").write_text(heavy)
    jail = [] if shutil.which("bwrap") else ["--no-isolation"]
    cmd, env = gpu_corpus.grader_command("batch", str(subs), "--out", str(out), "--assignments", "conv1d",
                                         "--no-reference", "--timed-runs", str(gpu_corpus.TIMED_RUNS), *jail)
    record = out / "records" / "a-reference" / "conv1d.json"  # written whole once the reference is graded
    proc = subprocess.Popen(cmd, cwd=tasks.ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        end = time.monotonic() + 600
        while proc.poll() is None and not record.is_file() and time.monotonic() < end:
            time.sleep(0.2)
        proc.terminate()  # the heavy entries left to build prove nothing more: the batch stops as on Ctrl-C
        log = proc.communicate(timeout=120)[0][-3000:]
    finally:
        proc.kill()
        proc.wait()
    assert record.is_file(), log
    rec = json.loads(record.read_text())
    assert (rec["verdict"], rec["score"]) == ("correct", tasks.load("conv1d").max_score), log


def test_a_grading_beside_twice_as_many_busy_processes_as_cores_gives_full_marks_or_says_the_machine_is_busy(
        local_gpu, tmp_path):
    """With twice as many spinning processes as cores beside a class, an H200's empty call (taken off
    every timed run) read 7.6 ms in place of 0.3: 11 of the class's 13 correct conv1d entries, the
    reference among them, were graded "invalid measurement" and lost their performance points, and the
    other two were scored at 2x and 4x the copy's rate. The judge now reads
    how long its thread and the runner's waited for a CPU in each run: the library's disturbed runs
    are left out, a disturbed student timing is taken again, and a machine that stays too busy is
    said to be, never turned into a score. conv1d's reference, graded beside such a load."""
    ref = reference_or_skip("conv1d")
    record = tmp_path / "conv1d.json"
    cmd, env = gpu_corpus.grader_command("grade", "conv1d", "--submission", str(ref), "--json", str(record))
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
            for _ in range(2 * len(os.sched_getaffinity(0)))]
    try:
        r = subprocess.run(cmd, cwd=tasks.ROOT, env=env, capture_output=True, text=True, timeout=600)
    finally:
        for p in busy:
            p.kill()
            p.wait()
    out = r.stdout[-3000:] + r.stderr[-3000:]
    if "too busy" in out:
        assert r.returncode == 2 and not record.is_file(), out
        return
    rec = json.loads(record.read_text())
    assert (rec["verdict"], rec["score"]) == ("correct", tasks.load("conv1d").max_score), out
