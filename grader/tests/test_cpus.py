"""cpus.py: a timed session's judge times each run on a core of its own, which the program it times does
not have; an untimed one (a check, several side by side) leaves both on the grader's CPUs."""
import os
import sys
import textwrap

import pytest

from grader import cpus, judged, sandbox


def cores_of_two(cpu: int) -> str:
    """A machine whose cores have two threads each: 0 and 1 share one, 2 and 3 the next..."""
    return f"{cpu - cpu % 2},{cpu - cpu % 2 + 1}"


def test_the_judge_gets_the_last_core_whole_and_the_runner_every_other():
    assert cpus.apart([0, 1, 2, 3, 4, 5, 6, 7], cores_of_two) == ((6, 7), (0, 1, 2, 3, 4, 5))
    assert cpus.apart([5, 4, 3, 2], cores_of_two) == ((4, 5), (2, 3))


def test_the_cpus_of_a_single_core_are_split_one_for_the_judge_the_rest_for_the_runner():
    assert cpus.apart([2, 3], cores_of_two) == ((3,), (2,))


def test_a_single_cpu_is_not_split():
    assert cpus.apart([3], cores_of_two) == (None, None)


JUDGE = textwrap.dedent("""\
    #!{python}
    # A stand-in for the checker's judge: says it is ready, waits for the runner's answer, then says
    # which CPUs it had and which it was told to time on (--cpus; none: where it is).
    import os, sys, time
    work = os.getcwd()
    fd = int(sys.argv[sys.argv.index("--results") + 1])
    os.write(fd, b'{{"event": "ready"}}\\n')
    end = time.monotonic() + 10
    while not os.path.exists(os.path.join(work, "runner.cpus")) and time.monotonic() < end:
        time.sleep(0.01)
    open(os.path.join(work, "judge.cpus"), "w").write(" ".join(map(str, sorted(os.sched_getaffinity(0)))))
    told = sys.argv[sys.argv.index("--cpus") + 1].replace(",", " ") if "--cpus" in sys.argv else ""
    open(os.path.join(work, "judging.cpus"), "w").write(told)
""")
RUNNER = "import os; open('runner.cpus', 'w').write(' '.join(map(str, sorted(os.sched_getaffinity(0)))))"


def session_cpus(tmp_path, timed: bool) -> tuple:
    """The judge's CPUs, those it was told to time on, and the runner's, as each read them."""
    judge = tmp_path / "judge"
    judge.write_text(JUDGE.format(python=sys.executable))
    judge.chmod(0o755)
    work = tmp_path / "work"
    work.mkdir()
    s = judged.run(judge, "", [sys.executable, "-c", RUNNER], work, "session", 10, 10, view=None, timed=timed)
    assert s.judge.returncode == 0, s.judge.output
    read = lambda name: {int(c) for c in (work / name).read_text().split()}
    return read("judge.cpus"), read("judging.cpus"), read("runner.cpus")


def test_a_timed_session_s_judge_times_on_a_cpu_the_runner_does_not_have(tmp_path):
    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) < 2:
        pytest.skip("needs two CPUs")
    judge, judging, runner = session_cpus(tmp_path, timed=True)
    assert judging and runner and not judging & runner, (judging, runner)
    assert judging | runner == judge == set(allowed), "the judge's checks between runs keep every CPU"


def test_in_a_batch_the_timed_session_is_split_within_the_cpus_of_its_timings(tmp_path):
    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) < 3:
        pytest.skip("needs three CPUs")
    with sandbox.on_cpus(allowed[1:]):
        judge, judging, runner = session_cpus(tmp_path, timed=True)
    assert judging and runner and not judging & runner, (judging, runner)
    assert judging | runner == judge == set(allowed[1:])


def test_an_untimed_session_leaves_judge_and_runner_on_all_the_grader_s_cpus(tmp_path):
    """Checks run several at a time: a core for each judge would put them all on one."""
    judge, judging, runner = session_cpus(tmp_path, timed=False)
    assert judge == runner == set(os.sched_getaffinity(0)) and not judging
