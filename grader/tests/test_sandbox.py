"""sandbox.py: untrusted programs are stopped in time, with everything they started, and only the
tail of what they print is read back."""
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from grader import sandbox


def py(code: str) -> list:
    return [sys.executable, "-c", code]


def gone(pid: int) -> bool:
    """The process no longer runs (never existed, reaped, or a zombie waiting to be reaped)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except (FileNotFoundError, ProcessLookupError):
        return True


def wait_until(cond, seconds=5.0) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.02)
    return cond()


def test_a_program_that_sleeps_forever_is_killed_at_the_time_limit(tmp_path):
    r = sandbox.run(py("import time; time.sleep(1000)"), tmp_path, tmp_path / "log", timeout=0.5)
    assert r.timed_out is True
    assert r.returncode == -signal.SIGKILL
    assert 0.5 <= r.seconds < 5


def test_the_time_limit_also_kills_the_processes_the_program_started(tmp_path):
    pidfile = tmp_path / "grandchild.pid"
    cmd = ["sh", "-c", f"sleep 1000 & echo $! > {pidfile}; wait"]
    r = sandbox.run(cmd, tmp_path, tmp_path / "log", timeout=1.0)
    assert r.timed_out is True
    pid = int(pidfile.read_text())
    assert wait_until(lambda: gone(pid)), f"the grandchild {pid} survived the kill"


def test_the_program_leads_its_own_process_group_so_the_kill_never_reaches_the_grader(tmp_path):
    r = sandbox.run(py("import os; print(os.getpgid(0) == os.getpid(), os.getsid(0) == os.getpid())"),
                    tmp_path, tmp_path / "log", timeout=10)
    assert r.output.split() == ["True", "True"]


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2 CPUs to keep one apart")
def test_a_program_started_in_on_cpus_runs_on_those_cpus_only_and_so_do_its_children(tmp_path):
    one = min(os.sched_getaffinity(0))
    show = py("import os, subprocess, sys; print(sorted(os.sched_getaffinity(0)), subprocess.run("
              "[sys.executable, '-c', 'import os; print(sorted(os.sched_getaffinity(0)))'], capture_output=True, "
              "text=True).stdout.strip())")
    with sandbox.on_cpus([one]):
        inside = sandbox.run(show, tmp_path, tmp_path / "in.log", timeout=30).output.split("] ")
    outside = sandbox.run(show, tmp_path, tmp_path / "out.log", timeout=30).output.split("] ")
    assert [x.strip().rstrip("]") for x in inside] == [f"[{one}"] * 2, inside
    assert outside[0].count(",") == len(os.sched_getaffinity(0)) - 1, outside


def test_a_watchdog_returning_true_stops_the_program_as_timed_out(tmp_path):
    r = sandbox.run(py("import time; time.sleep(1000)"), tmp_path, tmp_path / "log", timeout=60,
                    watchdog=lambda: True)
    assert r.timed_out is True
    assert r.seconds < 5


def test_a_watchdog_is_polled_until_it_fires(tmp_path):
    calls = []

    def watchdog():
        calls.append(1)
        return len(calls) >= 5
    r = sandbox.run(py("import time; time.sleep(1000)"), tmp_path, tmp_path / "log", timeout=60, watchdog=watchdog)
    assert r.timed_out is True
    assert len(calls) == 5


def test_a_watchdog_returning_false_lets_the_program_finish(tmp_path):
    r = sandbox.run(py("print('done')"), tmp_path, tmp_path / "log", timeout=60, watchdog=lambda: False)
    assert (r.timed_out, r.returncode, r.output.strip()) == (False, 0, "done")


@pytest.mark.parametrize("code", [0, 1, 5, 6, 255])
def test_the_exit_code_comes_back(tmp_path, code):
    r = sandbox.run(py(f"import sys; sys.exit({code})"), tmp_path, tmp_path / "log", timeout=10)
    assert r.returncode == code
    assert r.timed_out is False


@pytest.mark.parametrize("sig", [signal.SIGSEGV, signal.SIGABRT, signal.SIGKILL])
def test_death_by_a_signal_comes_back_as_its_negative_number(tmp_path, sig):
    r = sandbox.run(py(f"import os; os.kill(os.getpid(), {int(sig)})"), tmp_path, tmp_path / "log", timeout=10)
    assert r.returncode == -sig
    assert r.timed_out is False


def test_a_crash_leaves_no_core_file(tmp_path):
    sandbox.run(py("import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"), tmp_path, tmp_path / "log",
                timeout=10)
    assert not [p for p in os.listdir(tmp_path) if p.startswith("core")]


def test_only_the_tail_of_a_huge_output_is_read_back(tmp_path):
    code = "import sys; sys.stdout.write('x' * 10_000_000); sys.stdout.write('THE END')"
    r = sandbox.run(py(code), tmp_path, tmp_path / "log", timeout=30)
    assert r.returncode == 0
    assert len(r.output) <= sandbox.TAIL_BYTES
    assert r.output.endswith("xTHE END")
    assert (tmp_path / "log").stat().st_size == 10_000_007  # all of it went to the file, not to memory


def test_stdout_and_stderr_both_reach_the_output(tmp_path):
    r = sandbox.run(py("import sys; print('to out', flush=True); print('to err', file=sys.stderr)"), tmp_path,
                    tmp_path / "log", timeout=10)
    assert "to out" in r.output and "to err" in r.output


def test_a_program_reading_stdin_gets_end_of_file_instead_of_waiting(tmp_path):
    """Even when the grader's own stdin is open and silent (a terminal, a pipe)."""
    read_end, write_end = os.pipe()
    saved = os.dup(0)
    os.dup2(read_end, 0)
    try:
        r = sandbox.run(py("import sys; print(len(sys.stdin.read()))"), tmp_path, tmp_path / "log", timeout=5)
    finally:
        os.dup2(saved, 0)
        for fd in (saved, read_end, write_end):
            os.close(fd)
    assert (r.timed_out, r.output.strip()) == (False, "0")


def test_the_program_runs_in_the_folder_it_is_given(tmp_path):
    (tmp_path / "work").mkdir()
    r = sandbox.run(py("import os; print(os.getcwd())"), tmp_path / "work", tmp_path / "log", timeout=10)
    assert r.output.strip() == str(tmp_path / "work")


def test_tail_of_a_missing_file_is_empty(tmp_path):
    assert sandbox.tail(tmp_path / "missing") == ""


def test_processes_left_in_the_background_are_killed_when_the_program_exits(tmp_path):
    pidfile = tmp_path / "background.pid"
    r = sandbox.run(["sh", "-c", f"sleep 1000 & echo $! > {pidfile}"], tmp_path, tmp_path / "log", timeout=10)
    assert r.returncode == 0 and not r.timed_out
    pid = int(pidfile.read_text())
    assert wait_until(lambda: gone(pid)), f"the background process {pid} outlived the program"


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
@pytest.mark.parametrize("entry", ["", "."], ids=["an_empty_entry", "a_relative_entry"])
def test_a_library_a_runner_leaves_in_its_work_folder_is_never_loaded_by_the_judge(tmp_path, monkeypatch, entry):
    """The judge and the library's server run outside the jail, as the TA, in the submission's work
    folder, which the jailed runner writes. `export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH`
    with nothing before it leaves an empty entry, which the loader reads as the current folder: a
    libcublas.so.13 (here libkitvictim.so) left there by one session's runner was loaded, and its
    constructor run as the TA, by the next session's judge."""
    from grader import judged
    real, work, marker = tmp_path / "kit-libs", tmp_path / "work", tmp_path / "pwned"
    real.mkdir()
    work.mkdir()
    gcc = ["gcc", "-shared", "-fPIC", "-x", "c", "-"]
    subprocess.run([*gcc, "-o", str(real / "libkitvictim.so")], input=b"int kit_victim(void) { return 0; }\n", check=True)
    planted = (f'#include <stdio.h>\nint kit_victim(void) {{ return 0; }}\n'
               f'__attribute__((constructor)) static void pwn(void) {{ fclose(fopen("{marker}", "w")); }}\n')
    subprocess.run([*gcc, "-o", str(work / "libkitvictim.so")], input=planted.encode(), check=True)  # the runner's
    judge = tmp_path / "judge"  # a stand-in judge that needs the library (as the checker needs cuBLAS)
    subprocess.run(["gcc", "-x", "c", "-", "-o", str(judge), f"-L{real}", "-lkitvictim"],
                   input=b"int kit_victim(void);\nint main(void) { return kit_victim(); }\n", check=True)
    monkeypatch.setenv("LD_LIBRARY_PATH", f"{entry}:{real}")
    judged.run(judge, "", [sys.executable, "-c", "pass"], work, "session", 10, 10, view=None)
    assert not marker.exists(), "the judge loaded a library from the work folder"
    r = sandbox.run([str(judge)], work, tmp_path / "kit.log", timeout=10)  # any kit program run outside the jail
    assert r.returncode == 0, r.output  # the kit's own library is still found
    assert not marker.exists(), "a kit program loaded a library from the work folder"


@pytest.mark.parametrize("idle,view,policy", [(True, "compile", "SCHED_IDLE"), (False, "compile", "SCHED_OTHER"),
                                              (True, "run", "SCHED_OTHER"), (True, None, "SCHED_OTHER")])
def test_a_batch_s_build_runs_at_the_idle_cpu_priority_and_everything_else_at_the_normal_one(tmp_path, idle, view,
                                                                                            policy):
    """A batch builds on every core while it times: its compilers get a CPU only when no judge or runner
    wants one (test_gpu_grading's class of heavy compiles shows what that keeps from a timing). A build
    on its own, or retried alone, keeps the normal priority: a machine busy with other work would starve
    it past its time limit."""
    with sandbox.idle_builds() if idle else contextlib.nullcontext():
        r = sandbox.run([sys.executable, "-c", "import os; print(os.sched_getscheduler(0))"], tmp_path,
                        tmp_path / "log", timeout=30, view=view)
    assert r.returncode == 0 and int(r.output.split()[-1]) == getattr(os, policy), r.output


def test_the_processes_a_run_started_are_found_through_their_parents_down_to_a_grandchild(tmp_path):
    p = subprocess.Popen(py("import subprocess, sys, time\n"
                            "c = subprocess.Popen([sys.executable, '-c', 'import subprocess, sys; "
                            "subprocess.Popen([sys.executable, \"-c\", \"import time; time.sleep(30)\"]).wait()'])\n"
                            "time.sleep(30)"), start_new_session=True)
    try:
        assert wait_until(lambda: len(sandbox.descendants(p.pid)) == 3), sandbox.descendants(p.pid)
        assert sandbox.descendants(p.pid)[0] == p.pid
    finally:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()



@pytest.mark.parametrize("events, own", [("oom 1\noom_kill 1\n", True), ("oom 0\noom_kill 1\n", False), (None, None)],
                         ids=["at its own limit", "below it: the machine's shortage", "cgroup v1: cannot tell"])
def test_a_kill_by_the_out_of_memory_killer_says_whether_the_runs_own_limit_was_reached(tmp_path, events, own):
    # cgroup v2 counts an out-of-memory kill at the group's own memory.max under "oom" as well as
    # "oom_kill"; a kill by the machine's killer, for other programs' use, only under "oom_kill". Only the
    # first is the program's own doing, whose stop a batch need not check again with the GPU to itself.
    from grader import judged
    from grader.cgroups import Group
    if events is None:
        (tmp_path / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 1\n")
    else:
        (tmp_path / "memory.events").write_text("low 0\nhigh 0\nmax 12\n" + events)
    group = Group([tmp_path])
    assert group.oom_killed() and group.at_own_memory_limit() is own
    stop = sandbox.memory_stop(16 << 30, group.at_own_memory_limit())
    assert "16 GiB of host memory" in stop
    assert judged.over_own_limit(judged.STOPPED + stop) is bool(own), stop


def test_a_process_in_each_of_a_cgroup_v1_groups_folders_is_one_process(tmp_path):
    # cgroup v1 keeps one folder per controller (memory, pids, cpuacct), each listing every process of
    # the run: listed three times, each process's descriptors were counted three times, and an honest
    # run was stopped at a third of the descriptor limit.
    from grader.cgroups import Group
    folders = [tmp_path / c for c in ("memory", "pids", "cpuacct")]
    for d in folders:
        d.mkdir()
        (d / "cgroup.procs").write_text("41\n42\n")
    assert sorted(Group(folders).pids()) == [41, 42]


@pytest.mark.parametrize("layout", ["v2", "v1 cpu and cpuacct apart", "v1 cpu,cpuacct together"])
def test_a_groups_cpu_time_is_read_from_the_controller_that_counts_it(tmp_path, layout):
    # v1's cpu controller keeps a cpu.stat of its throttling alone (no usage_usec): read as v2's, the
    # group's CPU time was 0 where cpu and cpuacct share a folder (as systemd mounts them), and a compile
    # that ran out of time with the CPU to itself read as having had none of it: not the source's own
    # error, built again alone, the batch held for another whole time limit (build.compile_submission).
    from grader.cgroups import Group
    throttling = "nr_periods 3\nnr_throttled 1\nthrottled_time 900\n"
    if layout == "v2":
        d = tmp_path / "g"
        d.mkdir()
        (d / "cpu.stat").write_text("usage_usec 2500000\nuser_usec 2000000\nsystem_usec 500000\n")
        folders = [d]
    else:
        folders = [tmp_path / c for c in ("memory", "pids", "cpuacct", "cpu")][:3 if "together" in layout else 4]
        for d in folders:
            d.mkdir()
        (folders[2] / "cpuacct.usage").write_text("2500000000\n")
        (folders[-1] / "cpu.stat").write_text(throttling)
    assert Group(folders).cpu_seconds() == 2.5
