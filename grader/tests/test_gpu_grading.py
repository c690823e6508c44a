"""GPU tests: the hidden references, the skeletons and every known submission kept in
assignments/<name>/tests/ get their verdicts on the local GPU, all of them graded once as a class in
a batch (gpu_corpus.py: in the jail where bubblewrap is installed). Skipped without a GPU."""

import pytest

import gpu_corpus
from grader import tasks
from grader.grade import grade
from grader.results import Verdict

def load_or_skip(name, gpu):
    """The task, or a skip naming why this machine cannot grade it (jacobi_2gpu on one GPU)."""
    task = tasks.load(name)
    if gpu.count < task.gpus_required:
        pytest.skip(f"{name} needs {task.gpus_required} GPUs; this machine has {gpu.count}")
    return task


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
    assert want.message in r["message"]
    if want.performance_below is not None:
        earned = r["score"] - r["correctness_points"]
        assert earned < want.performance_below * task.points["performance"], r["message"]
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
    assert want.message in r.message
