"""GPU tests: grade the hidden references, the skeletons and every known-wrong submission kept in
assignments/<name>/tests/ on the local GPU, and check each verdict. Skipped without a GPU."""

import pytest

from grader import tasks
from grader.grade import grade
from grader.results import Verdict

ROOT = tasks.ROOT


def known_submissions():
    """(assignment, file, expected verdict, header lines) for every file whose first line is
    `// expect: VERDICT`. Among the first five lines, `// expect-message: WORDS` adds words the
    verdict's message must contain, and `// expect-performance-below: F` says a correct submission
    earns less than the fraction F of the performance points (right, but slow)."""
    for name in tasks.registry():
        for f in sorted((ROOT / "assignments" / name / "tests").glob("*.cu")):
            head = f.read_text().splitlines()[:5]
            if head and head[0].startswith("// expect:"):
                extra = {h[3:].split(":", 1)[0]: h.split(":", 1)[1].strip() for h in head[1:] if h.startswith("// expect-")}
                yield pytest.param(name, f, Verdict(head[0].split(":", 1)[1].strip()), extra, id=f"{name}/{f.stem}")


def load_or_skip(name, gpu):
    """The task, or a skip naming why this machine cannot grade it (jacobi_2gpu on one GPU)."""
    task = tasks.load(name)
    if gpu.count < task.gpus_required:
        pytest.skip(f"{name} needs {task.gpus_required} GPUs; this machine has {gpu.count}")
    return task


@pytest.mark.parametrize("name", tasks.registry())
def test_the_hidden_reference_gets_full_marks(local_gpu, name):
    task = load_or_skip(name, local_gpu)
    r = grade(task, ROOT / "reference" / name / "kernel.cu", local_gpu)
    assert r.verdict == Verdict.CORRECT, r.message
    assert all(c.verdict == Verdict.CORRECT for c in r.cases)
    assert r.score == r.max_score, "; ".join(f"{p.rate:.0f} {task.metric} earned {p.points} points" for p in r.performance)
    assert all(p.baseline_rate for p in r.performance), "the library baseline was timed next to it"


@pytest.mark.parametrize("name", tasks.registry())
def test_the_unfilled_skeleton_is_incorrect_because_nothing_was_computed(local_gpu, name):
    r = grade(load_or_skip(name, local_gpu), ROOT / "student_template" / name / "kernel.cu", local_gpu)
    assert r.verdict == Verdict.INCORRECT
    assert "not computed" in r.message
    assert r.score == 0


@pytest.mark.parametrize("name,path,expected,extra", list(known_submissions()))
def test_each_known_submission_gets_its_expected_verdict(local_gpu, name, path, expected, extra):
    task = load_or_skip(name, local_gpu)
    r = grade(task, path, local_gpu)
    assert r.verdict == expected, f"{r.verdict.value}: {r.message}"
    assert extra.get("expect-message", "") in r.message
    if "expect-performance-below" in extra:
        earned = r.score - r.correctness_points
        assert earned < float(extra["expect-performance-below"]) * task.points["performance"], r.message
    if expected == Verdict.CORRECT:
        # Correct and timed in full: work left on another stream counts, so the rate is possible.
        assert all(p.rate <= p.peak for p in r.performance if p.peak)
    else:
        assert r.score < r.max_score
