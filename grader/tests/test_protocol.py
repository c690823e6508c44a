"""The judge and the runner (harness/src/judge.cu, serve.cu, wire.cu; grader/judged.py), on a machine
without a GPU: the judge shares host memory with the runner instead of GPU memory (--memory host),
and everything else is as in a grading: the socket, the doorbell, the judge's clock, its secrets,
its reads of the outputs, its results pipe. The problem is y = 2 x + 1
(harness/tests/protocol/problem.cu); each "submission" in fixtures/protocol/ is a host function
that tries one attack of a hostile kernel.cu. Where the grader runs as root, the judge and the
runner both run as one user (USER), as a student's runner and judge share one user in `make grade`."""
import concurrent.futures
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from grader import checks, jail, judged, sandbox, tasks, workdir
from grader.cgroups import cgroup_kind
from grader.limits import Limits, jail_uid
from jail_box import SYSTEM_PYTHON, as_user

ROOT = tasks.ROOT
FIXTURES = Path(__file__).parent / "fixtures" / "protocol"
ARCH = "sm_90"  # host code only: any architecture the toolkit knows
# The user of the judge and the runner where the test is root: a uid of their own, not nobody. The
# hostile fixtures write into every descriptor of every process of their user (forged_results.cu):
# as nobody they reached the machine's daemons, and the CUDA driver's pipes in the runners of a
# class graded beside the tests while its jails ran as nobody.
USER = jail_uid([*range(2_000_000_500, 2_000_000_600), *range(59999, 59000, -1)]) if os.geteuid() == 0 else None
# The driver runs as USER where the test is root, on a Python that user can run.
PYTHON = SYSTEM_PYTHON if os.geteuid() == 0 else sys.executable

pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc (the CUDA toolkit)")

CORRECTNESS = "case id=small seed=11 rtol=1e-12 reference=cpu n=1000\n"
TIMED = "timed id=big seed=22 rtol=1e-12 reference=cpu warmup=1 runs=3 n=65536\n"


def _parts(name: str) -> list:
    text = (ROOT / "harness" / "harness.mk").read_text()
    return re.search(rf"^{name} := (.*)$", text, re.M).group(1).split()


@pytest.fixture(scope="module")
def kit():
    """The test problem's judge (a checker) and one runner per fixture, built as `make harness` builds them."""
    out = Path(tempfile.mkdtemp(prefix="kit-protocol-build-"))  # where USER may run them from
    os.chmod(out, 0o755)
    build = ROOT / "build" / ARCH / "harness"
    targets = [str(build / f"{p}.o") for p in _parts("CHECKER_PARTS")] + [str(build / "librunner.a")]
    jobs = len(os.sched_getaffinity(0))
    subprocess.run(["make", "-s", f"-j{jobs}", f"ARCH={ARCH}", *[os.path.relpath(t, ROOT) for t in targets]], cwd=ROOT,
                   check=True)
    nvcc = ["nvcc", "-std=c++17", "-O2", f"-arch={ARCH}", f"-I{ROOT / 'harness' / 'include'}"]
    problem = ROOT / "harness" / "tests" / "protocol" / "problem.cu"
    run = lambda cmd: subprocess.run(cmd, check=True)

    def checker():
        run([*nvcc, "-c", str(problem), "-o", str(out / "problem_checker.o")])
        run(["nvcc", f"-arch={ARCH}", "-Xcompiler", "-fopenmp", str(out / "problem_checker.o"),
             *[str(build / f"{p}.o") for p in _parts("CHECKER_PARTS")], "-o", str(out / "checker")])

    def runner(src):
        run([*nvcc, "-c", str(src), "-o", str(out / f"{src.stem}.o")])
        run(["nvcc", f"-arch={ARCH}", str(out / f"{src.stem}.o"), str(out / "problem_runner.o"),
             str(build / "librunner.a"), "-o", str(out / f"runner-{src.stem}")])

    # One nvcc per core: the runners need only the problem's runner side, built first.
    run([*nvcc, "-DKIT_RUNNER", "-c", str(problem), "-o", str(out / "problem_runner.o")])
    sources = sorted(FIXTURES.glob("*.cu"))
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        for done in [pool.submit(checker)] + [pool.submit(runner, src) for src in sources]:
            done.result()
    runners = {src.stem: out / f"runner-{src.stem}" for src in sources}
    fake = out / "libcublas.so.99"  # a library by a forbidden name, for the run-time check
    subprocess.run(["gcc", "-shared", "-fPIC", "-x", "c", "-", "-o", str(fake)], input=b"int kit_fake(void) { return 1; }\n",
                   check=True)
    for p in out.iterdir():
        os.chmod(p, 0o755)
    yield {"checker": out / "checker", "runners": runners, "fake_library": fake}
    shutil.rmtree(out, ignore_errors=True)


DRIVER = """
import json, sys
from pathlib import Path
from grader import judged
a = json.loads(sys.argv[1])
s = judged.run(Path(a["checker"]), a["plan"], [a["runner"]], Path(a["work"]), "session", a["case_limit"], 120,
               view=None, judge_args=tuple(a["judge_args"]))
print(json.dumps({"records": s.records, "timed_out": s.timed_out,
                  "runner": s.runner.returncode if s.runner else None, "judge": s.judge.returncode if s.judge else None,
                  "judge_output": s.judge.output if s.judge else ""}))
"""


def judge(kit, name: str, plan: str = CORRECTNESS + TIMED, extra: tuple = (), env: dict = None,
          case_limit: float = 20) -> dict:
    """One judged session of fixture `name`, in a fresh work folder; as USER where the test is root."""
    work = Path(tempfile.mkdtemp(prefix=f"kit-protocol-{name}-"))
    os.chmod(work, 0o777)
    args = {"checker": str(kit["checker"]), "plan": plan, "runner": str(kit["runners"][name]),
            "work": str(work), "judge_args": ["--memory", "host", *extra], "case_limit": case_limit}
    proc = subprocess.run([PYTHON, "-c", DRIVER, json.dumps(args)], capture_output=True, text=True, timeout=300,
                          preexec_fn=as_user(USER) if USER is not None else None, env={**os.environ, "PYTHONPATH": str(ROOT / "grader"), **(env or {})})
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    out["work"] = work
    WORK.append(work)
    return out


def jailed_session(kit, name: str, plan: str) -> judged.Session:
    """One judged session of fixture `name` with its runner in the jail (and its cgroup), the judge outside."""
    root = Path(tempfile.mkdtemp(prefix="kit-protocol-jail-"))
    try:
        j = sandbox.open_jail(root, ROOT / "harness" / "include", None, Limits())
        j.runtime = jail.runtime_libraries(kit["runners"][name])
        work = root / f"0000-{name}-scale"
        work.mkdir()
        shutil.copy(kit["runners"][name], work / "runner")
        return judged.run(kit["checker"], plan, [str(work / "runner")], work, "session", 20, 120, view="run",
                          read_only=(work / "runner",), judge_args=("--memory", "host"))
    finally:
        sandbox.confine(None)
        shutil.rmtree(root, ignore_errors=True)


WORK = []


@pytest.fixture(autouse=True, scope="module")
def _remove_work_folders():
    yield
    for w in WORK:
        shutil.rmtree(w, ignore_errors=True)


def events(out: dict, event: str, case: str = None) -> list:
    return [r for r in out["records"] if r.get("event") == event and (case is None or r.get("case") == case)]


def test_an_honest_runner_passes_every_check_and_every_timed_run_is_checked(kit):
    out = judge(kit, "honest")
    assert out["judge"] == 0 and out["runner"] == 0 and not out["timed_out"]
    checks = events(out, "check")
    assert checks and all(c["pass"] for c in checks)
    assert {c["run"] for c in events(out, "check", "big")} == {0, 1, 2}  # every timed run
    assert len(events(out, "check", "big")) == 4  # three probes and the last run whole
    timed = events(out, "timed", "big")[0]
    assert len(timed["times_ms"]) == 3
    assert all(t >= 20 for t in timed["times_ms"])  # the call sleeps 20 ms


TWO_TIMED = ("timed id=first seed=31 rtol=1e-12 reference=cpu warmup=1 runs=10 n=65536\n"
             "timed id=second seed=32 rtol=1e-12 reference=cpu warmup=1 runs=10 n=777\n")


def test_timed_runs_checked_in_the_gaps_hand_the_turn_back_before_the_next_call_and_end_their_case(kit):
    """Two timed cases in one session, each of 20 ms calls in five bursts 0.4 s apart: the judge checks
    runs in the gaps. The checks of a gap are followed by "resumed" (the grader's limits follow the
    last record: the runner's calls are due again), a case's checks come before its "checked", and
    all of them before the next case starts."""
    out = judge(kit, "honest", plan=TWO_TIMED)
    assert out["judge"] == 0 and out["runner"] == 0 and not out["timed_out"]
    order = [(r["event"], r.get("case")) for r in out["records"]]
    for case in ("first", "second"):
        runs = [r["run"] for r in events(out, "check", case)]
        assert sorted(runs) == list(range(10)) + [9], runs  # every timed run, and the last one whole
        assert all(r["pass"] for r in events(out, "check", case))
        start, timed = order.index(("start", case)), order.index(("timed", case))
        during = order[start + 1:timed]
        assert set(during) <= {("check", case), ("resumed", case)}
        assert ("check", case) in during, "no run was checked in a gap"
        assert during[-1] == ("resumed", case)
        assert all(b == ("resumed", case) for a, b in zip(during, during[1:] + [("timed", case)]) if a[0] == "check"
                   and b[0] != "check")
        checked = order.index(("checked", case))
        assert checked > max(i for i, o in enumerate(order) if o == ("check", case))
    assert order.index(("checked", "first")) < order.index(("start", "second"))


def test_a_runner_that_exits_in_the_second_timed_case_leaves_the_first_case_checked(kit):
    out = judge(kit, "exits_in_second_case", plan=TWO_TIMED)
    assert sorted(r["run"] for r in events(out, "check", "first")) == list(range(10)) + [9]
    assert events(out, "checked", "first") and not events(out, "checked", "second")
    s = judged.Session(records=out["records"], runner=sandbox.Run(out["runner"], False, 0, ""))
    assert not s.ended_early("first") and s.ended_early("second")


def test_a_runner_that_hangs_in_the_second_timed_case_cannot_hide_the_first_case_s_wrong_outputs(kit):
    """The first case's two runs come in one burst, with no gap to check them in. Were their checks
    left for later, the hang that the grader stops would take them along, and the first case would
    read as a time-out (which keeps the correctness points) instead of a wrong timed output."""
    plan = ("timed id=first seed=31 rtol=1e-12 reference=cpu warmup=0 runs=2 n=65536\n"
            "timed id=second seed=32 rtol=1e-12 reference=cpu warmup=0 runs=10 n=777\n")
    out = judge(kit, "wrong_then_hangs", plan=plan, case_limit=3)
    assert out["timed_out"]
    first = events(out, "check", "first")
    assert sorted(c["run"] for c in first) == [0, 1, 1] and not any(c["pass"] for c in first)
    order = [(r["event"], r.get("case")) for r in out["records"]]
    assert order.index(("checked", "first")) < order.index(("start", "second"))


def test_a_runner_that_exits_after_wrong_timed_runs_leaves_their_checks_on_record(kit):
    out = judge(kit, "wrong_then_exits", plan="timed id=big seed=22 rtol=1e-12 reference=cpu warmup=0 runs=10 n=65536\n")
    checks = events(out, "check", "big")
    assert sorted(c["run"] for c in checks) == [0, 1] and not any(c["pass"] for c in checks)
    order = [r["event"] for r in out["records"]]
    assert order.index("runner_gone") > max(i for i, e in enumerate(order) if e == "check")


def test_a_runner_that_hangs_after_wrong_timed_runs_leaves_their_checks_on_record(kit):
    out = judge(kit, "wrong_then_hangs_in_case", plan="timed id=big seed=22 rtol=1e-12 reference=cpu warmup=0 runs=10 "
                "n=65536\n", case_limit=3)
    assert out["timed_out"]
    checks = events(out, "check", "big")
    assert sorted(c["run"] for c in checks) == [0, 1] and not any(c["pass"] for c in checks)


def test_a_runner_that_stops_every_clock_of_its_own_process_is_timed_at_its_true_duration(kit):
    out = judge(kit, "forged_clock", plan=TIMED)
    timed = events(out, "timed", "big")[0]
    assert all(t >= 20 for t in timed["times_ms"]), timed
    assert all(c["pass"] for c in events(out, "check"))


@pytest.mark.parametrize("name", ["false_done", "work_after_clock"])
@pytest.mark.parametrize("plan", [CORRECTNESS, TIMED], ids=["correctness", "timed"])
def test_a_done_said_before_the_outputs_are_written_fails_the_comparison_or_is_timed_to_the_end_of_the_work(
        kit, name, plan):
    out = judge(kit, name, plan=plan)
    # The outputs the judge read when the runner said done (the last timed run is also read whole, later).
    read_at_done = [c for c in events(out, "check") if c["compared"] in (1000, 4096)]
    if plan == CORRECTNESS:
        times = [r["ms"] for r in events(out, "done")]
    else:
        times = events(out, "timed")[0]["times_ms"]
    assert len(read_at_done) == len(times) == (1 if plan == CORRECTNESS else 3)
    for check, ms in zip(sorted(read_at_done, key=lambda c: c["run"]), times):
        # The work ends 50 ms after "done": a read at "done" sees it unfinished, unless the judge's read
        # came later (a busy machine), and then its clock ran until then.
        assert not check["pass"] or ms >= 50, (check, ms)
    assert not all(c["pass"] for c in read_at_done), "every read at done found the work finished"


def test_results_forged_by_the_runner_on_every_descriptor_file_and_pipe_it_can_reach_are_never_read(kit):
    out = judge(kit, "forged_results")
    assert not any(r.get("forged") for r in out["records"])
    timed = events(out, "timed", "big")
    assert len(timed) == 1 and all(t >= 20 for t in timed[0]["times_ms"]), out
    assert all(c["pass"] for c in events(out, "check"))
    assert (out["work"] / "results.jsonl").exists()  # the forgery was written; the judge never reads it


def test_the_judges_seeds_are_fresh_and_written_nowhere_the_runner_can_read(kit):
    first = judge(kit, "honest", extra=("--record-seeds",))
    second = judge(kit, "honest", extra=("--record-seeds",))
    seeds = [int(r["seed"]) for r in events(first, "seed")]
    assert len(seeds) == 4 and len(set(seeds)) == 4  # the correctness case and three timed runs
    assert not set(seeds) & {int(r["seed"]) for r in events(second, "seed")}
    forms = [str(s).encode() for s in seeds] + [f"{s:x}".encode() for s in seeds] + \
            [s.to_bytes(8, "little") for s in seeds]
    for path in first["work"].rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert not any(f in data for f in forms), path.name


def test_a_runner_finds_the_judges_memory_environment_and_descriptors_closed(kit):
    out = judge(kit, "snoop")
    assert all(c["pass"] for c in events(out, "check")), "the runner opened the judge's /proc files"


def test_a_runner_that_writes_into_the_judges_socket_ends_its_session_as_a_broken_protocol(kit):
    out = judge(kit, "garbage")
    gone = events(out, "runner_gone")
    assert gone and "malformed" in gone[0]["message"]
    assert not events(out, "timed")
    verdict, message = judged.Session(records=out["records"], runner=sandbox.Run(out["runner"], False, 0, "")).fault("small")
    assert verdict.value == "runtime_error" and "broke the judge's protocol" in message


@pytest.mark.parametrize("oom", [1, 2], ids=["a_runtime_call", "a_driver_call"])
def test_the_judge_finding_no_memory_for_its_own_allocation_ends_the_session_as_the_runners_runtime_error(kit, oom):
    """A kernel.cu that takes the GPU's memory and keeps it leaves the judge none for its next case
    or its truth: that is the runner's verdict, not a kit failure (gpu_memory_hog.cu in the hostile
    class is the attack on a GPU; here the test problem's truth stands in for the failed allocation)."""
    plan = f"case id=small seed=11 rtol=1e-12 reference=cpu n=1000 oom={oom}\n" + TIMED
    out = judge(kit, "honest", plan=plan)
    assert out["judge"] == 0, out["judge_output"]  # without the hook: CUDA_CHECK's exit 1, "the judge failed"
    oom_record = events(out, "out_of_memory")
    assert len(oom_record) == 1 and oom_record[0]["case"] == "small", out["records"]
    assert not events(out, "checked") and not events(out, "timed")  # the session ended there
    s = judged.Session(records=out["records"], runner=sandbox.Run(out["runner"] or 0, False, 0, ""))
    assert s.ended_early()
    verdict, message = s.fault("small")
    assert verdict.value == "runtime_error" and "memory ran out while your program held it" in message


HIDDEN = "case id=hidden-1 seed=11 rtol=1e-12 reference=cpu n=777\n"


@pytest.mark.parametrize("name", ["hidden_leak", "hidden_exit"])
def test_a_fault_in_a_hidden_case_is_told_without_anything_the_program_chose_so_its_sizes_stay_hidden(kit, name):
    """The runner knows a hidden case's sizes (it passes them to the entry point). hidden_leak sends a
    fault of its own whose text carries n; hidden_exit exits with status n % 256."""
    out = judge(kit, name, plan=HIDDEN)
    s = judged.Session(records=out["records"], runner=sandbox.Run(out["runner"], False, 0, "n is 777"))
    verdict, message = s.fault("hidden-1", conceal=True)
    assert verdict.value == "runtime_error"
    assert not re.search(r"\d", message), message
    assert re.search(r"\d", s.fault("hidden-1")[1])  # a public case's message says it all


def _mine(folders) -> list:
    """The work folders of `folders` this process made (the tests and batches beside it make their own)."""
    return [d for d in folders if workdir.owner(d) == (os.getpid(), socket.gethostname())]


def test_a_hidden_case_s_sizes_reach_no_public_case_of_the_grading_through_the_runner_s_memory_or_its_files(
        kit, tmp_path, monkeypatch):
    """Every task runs a hidden case before a public one. In one runner, the program remembered the
    hidden size and wrote it into the public case's relative error, shown with it (7.8e-14 for n =
    777, still within the tolerance), and a file in the work folder would carry it to the timing's
    runner. The hidden cases now run in a runner and a folder of their own, removed after."""
    from grader import grade
    from grader.tasks import Case
    cases = [Case("hidden-1", {"n": 777}, 11, "cpu", 1e-12, hidden=True), Case("n1000", {"n": 1000}, 12, "cpu", 1e-12)]
    task = type("Task", (), {"name": "protocol", "cases": cases, "timeouts": {"case": 20}})()
    work = tmp_path / "work"
    work.mkdir()
    os.chmod(tmp_path, 0o755)
    shutil.copy(kit["runners"]["hidden_to_public"], work / "runner")
    monkeypatch.setattr(judged.build, "checker_path", lambda task, arch: kit["checker"])
    real_run = judged.run
    monkeypatch.setattr(judged, "run", lambda *a, **k: real_run(*a, **{**k, "view": None,
                                                                         "judge_args": ("--memory", "host")}))
    results = {r.id: r for r in grade.correctness(task, work, ARCH, None)}
    assert [results[c.id].verdict.value for c in cases] == ["correct", "correct"], results
    assert results["n1000"].message == "relative error 0.0e+00", results["n1000"].message
    assert not (work / "remembered.txt").exists()
    assert not _mine(tmp_path.parent.glob("kit-hidden-*")) and not _mine(Path(tempfile.gettempdir()).glob("kit-hidden-*"))


@pytest.mark.skipif(cgroup_kind() is None or shutil.which("bwrap") is None,
                    reason="needs bubblewrap and a cgroup the grader may make (root, cgroup v2 or v1)")
def test_the_cpu_a_jailed_runner_s_child_processes_use_is_counted_as_its_own(kit, tmp_path):
    """The judge tells the program's own CPU use apart from other programs' by its cgroup's; on cgroup
    v1 it read none and counted the runner's threads only, so a child process that spun beside the
    timed runs passed for another program, and the timing was taken again (performance.py)."""
    s = jailed_session(kit, "forks_a_spinner", TIMED)
    [timed] = [r for r in s.records if r.get("event") == "timed"]
    assert all(c["pass"] for c in s.records if c.get("event") == "check"), s.records
    assert sum(timed["others_cpu_ms"]) >= 45, timed  # three runs of 30 ms each, with room for a slow machine


def test_a_runner_that_truncates_the_judge_s_doorbell_gets_its_wrong_answer_judged_not_a_failed_kit(kit):
    out = judge(kit, "shrinks_the_doorbell", plan=CORRECTNESS)
    assert out["judge"] == 0, out["judge_output"]
    found = events(out, "check", "small")
    assert found and not any(c["pass"] for c in found), out["records"]


def test_a_hidden_case_s_message_gives_no_relative_error_which_the_program_could_choose(kit):
    out = judge(kit, "hidden_error", plan=HIDDEN)
    found = events(out, "check", "hidden-1")
    assert found and all(c["pass"] for c in found)
    assert "7.8e-14" in checks.explain(found[0], 1e-12)  # n = 777, written into the error
    assert checks.explain(found[0], 1e-12, conceal=True) == "within the tolerance"


def test_a_library_loaded_at_run_time_by_a_forbidden_name_is_reported_naming_it(kit):
    out = judge(kit, "library", plan=CORRECTNESS, env={"KIT_TEST_LIBRARY": str(kit["fake_library"])})
    bad = events(out, "forbidden_library")
    assert bad and bad[0]["library"] == "libcublas.so.99"


@pytest.mark.parametrize("mode,said", [("anonymous", "anonymous memory"), ("memory", "from memory"),
                                       ("patched", "changed in memory"), ("decoy", "from memory")])
def test_code_no_file_of_the_system_holds_is_reported_however_the_runner_got_it(kit, mode, said):
    """A library the machine does not offer would reach a runner as bytes it carries: run from anonymous
    memory, loaded from a memfd, or copied over code already mapped; or held by the runner while a
    forked child in a session of its own says hello and serves the judge."""
    out = judge(kit, "foreign", plan=CORRECTNESS, env={"KIT_TEST_FOREIGN": mode})
    bad = events(out, "forbidden_library")
    assert bad and said in bad[0]["library"], out["records"]
    assert judged.forbidden_message(bad[0]).startswith("kernel.cu's process ran code no file of the system holds: ")


def test_a_forbidden_library_is_named_as_one_and_an_unreadable_map_says_so():
    said = {lib: judged.forbidden_message({"event": "forbidden_library", "case": "n1", "kind": kind, "library": lib})
            for kind, lib in (("library", "libcublas.so.13"),
                              ("unreadable", "(unknown: the runner made its memory map unreadable)"))}
    assert said["libcublas.so.13"] == ("kernel.cu's process loaded a library this assignment forbids: "
                                       "libcublas.so.13 (in case n1)")
    assert said["(unknown: the runner made its memory map unreadable)"].startswith(
        "kernel.cu's process made its memory map unreadable")


def test_a_runner_that_loads_nothing_forbidden_is_not_reported(kit):
    out = judge(kit, "library", plan=CORRECTNESS, env={"KIT_TEST_LIBRARY": "libm.so.6"})
    assert not events(out, "forbidden_library")
    assert all(c["pass"] for c in events(out, "check"))


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap (apt-get install bubblewrap)")
def test_a_runner_in_the_jail_is_judged_across_its_namespaces(kit):
    """The socket, the doorbell (a futex on a shared page), the arrays and the runner's pid all cross
    the jail's user, PID, IPC and mount namespaces; the judge stays outside."""
    s = jailed_session(kit, "honest", CORRECTNESS + TIMED)
    out = {"records": s.records}
    assert s.runner.returncode == 0 and s.judge.returncode == 0, (s.records, s.runner, s.judge)
    assert events(out, "check") and all(c["pass"] for c in events(out, "check"))
    assert all(t >= 20 for t in events(out, "timed", "big")[0]["times_ms"])
    assert not events(out, "forbidden_library")


def test_a_plan_rewritten_by_the_runner_changes_nothing_the_judge_reads_the_graders_own(kit):
    out = judge(kit, "replan", plan=TIMED)
    assert "n=16" in (out["work"] / "session.plan").read_text()  # the copy on disk was rewritten
    timed = events(out, "timed", "big")[0]
    assert len(timed["times_ms"]) == 3
    whole = [c for c in events(out, "check", "big") if c["compared"] == 65536]
    assert len(whole) == 1 and whole[0]["pass"]
