"""How a batch shares its GPUs, without one: checks of a few submissions side by side on a GPU while
a timing has it to itself, a check that fails beside another run again alone, several GPUs each
with a judge of its own, and the time left as the class goes (the fake harness of fake_kit.py,
GPUs described by fixtures)."""
import json
import os
from pathlib import Path

import pytest

from grader import batch, grade, jail, sandbox, tasks
from grader import gpu as gpu_mod
from grader.batch import gpus as batch_gpus
from grader.results import GpuInfo


HERE = Path(__file__).parent


from fake_kit import args, correct_class, kernel, make_class, read_gradebook  # noqa: E402


# ---------------------------------------------------------------------------------------------
# Several GPUs.

def two_gpus(monkeypatch, names=("NVIDIA H200", "NVIDIA H200")):
    base = json.loads((HERE / "fixtures" / "gpu_h200.json").read_text())
    infos = [GpuInfo(**{**base, "name": n, "count": len(names)}) for n in names]
    monkeypatch.setattr(gpu_mod, "detect", lambda index=0: infos[index])


def test_a_batch_on_two_gpus_grades_two_submissions_at_once_each_judge_on_a_gpu_of_its_own(
        fake_kit, tmp_path, monkeypatch):
    subs = make_class(tmp_path)
    assert batch.main(args(subs, tmp_path / "one")) == 0
    two_gpus(monkeypatch)
    log = tmp_path / "gpu-log.jsonl"
    monkeypatch.setenv("KIT_FAKE_GPU_LOG", str(log))
    monkeypatch.setenv("KIT_FAKE_SECONDS", "0.3")
    assert batch.main(args(subs, tmp_path / "two", ("jobs", 4))) == 0
    runs = [json.loads(line) for line in log.read_text().splitlines()]
    assert {r["gpus"] for r in runs} == {"0", "1"}  # one GPU each, both used
    overlap = any(a["start"] < b["end"] and b["start"] < a["end"] and a["gpus"] != b["gpus"]
                  for a in runs for b in runs if a is not b)
    assert overlap, "no two gradings ran at once"
    assert (tmp_path / "two" / "gradebook.csv").read_bytes() == (tmp_path / "one" / "gradebook.csv").read_bytes()


def test_gpus_of_two_models_are_not_mixed_unless_asked(fake_kit, monkeypatch, capsys):
    two_gpus(monkeypatch, ("NVIDIA H200", "NVIDIA H100 80GB HBM3"))
    with pytest.raises(tasks.TaskError, match="different models"):
        batch_gpus.choose([0, 1])
    assert set(batch_gpus.choose([0, 1], mixed=True)) == {0, 1}
    assert set(batch_gpus.choose(None, say=print)) == {0}  # by default, GPU 0's model only, and it says so
    assert "left out" in capsys.readouterr().out


def test_a_gpu_the_machine_does_not_have_is_refused_in_one_line(fake_kit, monkeypatch):
    two_gpus(monkeypatch)
    with pytest.raises(tasks.TaskError, match="there is no GPU 5"):
        batch_gpus.choose([5])
    with pytest.raises(tasks.TaskError, match="expected GPU numbers"):
        batch_gpus.parse("0,x")


def test_a_jailed_run_on_a_gpu_sees_that_gpus_device_node_alone(monkeypatch):
    j = jail.Jail(bwrap="bwrap", toolkit=Path("/usr/local/cuda"), include=Path("/tmp"),
                  devices=["/dev/nvidia0", "/dev/nvidia1", "/dev/nvidiactl", "/dev/nvidia-uvm"])
    cmd = " ".join(j.command(["runner"], Path("/tmp/w"), "run", gpus=["1"]))
    assert "--dev-bind /dev/nvidia1 " in cmd and "/dev/nvidia0" not in cmd
    assert "--dev-bind /dev/nvidiactl" in cmd and "--dev-bind /dev/nvidia-uvm" in cmd
    by_uuid = " ".join(j.command(["runner"], Path("/tmp/w"), "run", gpus=["GPU-1234"]))
    assert "/dev/nvidia0" in by_uuid and "--setenv CUDA_VISIBLE_DEVICES GPU-1234" in by_uuid


def test_gpus_given_to_the_grader_by_slurm_are_the_ones_its_programs_get(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    assert sandbox.physical((1,)) == ["3"]
    assert sandbox.gpu_env((0,))["CUDA_VISIBLE_DEVICES"] == "2"
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert sandbox.physical((1,)) == ["1"]


def test_a_judge_stopped_by_a_term_from_outside_stops_the_grading_without_a_verdict(fake_kit):
    from grader import judged
    s = judged.Session(records=[{"event": "start", "case": "n1"}], runner=sandbox.Run(-15, False, 1, ""),
                       judge=sandbox.Run(-15, False, 1, ""))
    with pytest.raises(KeyboardInterrupt):
        judged.judge_failed(tasks.load("trmm"), s)


# ---------------------------------------------------------------------------------------------
# Checks side by side, timings alone.

class Stages:
    """grade.check_stages and grade.timing_stages wrapped: who ran when, and how many checks at once."""

    def __init__(self, monkeypatch, hold_s=0.3):
        import threading
        import time
        self.lock, self.time, self.hold_s = threading.Lock(), time, hold_s
        self.spans, self.checking, self.timing, self.most_checks = [], set(), 0, 0
        self.overlaps = []  # (what, student) that ran while a timing held the GPU, or a timing while anything ran
        real_check, real_timing = grade.check_stages, grade.timing_stages
        monkeypatch.setattr(grade, "check_stages", lambda *a: self.run("check", real_check, *a))
        monkeypatch.setattr(grade, "timing_stages", lambda *a: self.run("timing", real_timing, *a))

    def student(self, result) -> str:
        return result.submission.split(":")[0].split("/")[0].split(".")[0]

    def run(self, kind, real, task, work, gpu, opts, result):
        who = self.student(result)
        with self.lock:
            if self.timing or (kind == "timing" and self.checking):
                self.overlaps.append((kind, who))
            if kind == "check":
                self.checking.add(who)
                self.most_checks = max(self.most_checks, len(self.checking))
            else:
                self.timing += 1
        try:
            return self.decide(kind, who, real, task, work, gpu, opts, result)
        finally:
            with self.lock:
                if kind == "check":
                    self.checking.discard(who)
                else:
                    self.timing -= 1
                self.spans.append((kind, who))

    def decide(self, kind, who, real, task, work, gpu, opts, result):
        self.time.sleep(self.hold_s)  # long enough for the next builds to reach the GPU
        return real(task, work, gpu, opts, result)


def test_checks_of_several_submissions_share_the_gpu_while_a_timing_has_it_to_itself(fake_kit, tmp_path,
                                                                                    monkeypatch):
    stages = Stages(monkeypatch)
    subs, out = correct_class(tmp_path / "class", 6), tmp_path / "out"
    assert batch.main(args(subs, out, ("checks_per_gpu", 3), ("jobs", 6))) == 0
    assert 2 <= stages.most_checks <= 3, stages.spans
    assert stages.overlaps == [], "a timing shared the GPU"
    assert sorted(w for k, w in stages.spans if k == "timing") == [f"s{i}" for i in range(6)]
    book = {r["student"]: r for r in read_gradebook(out)}
    assert all(float(book[f"s{i}"]["trmm"]) == 100 for i in range(6))


def test_a_check_that_faults_beside_another_submissions_is_run_again_alone_before_its_verdict_counts(
        fake_kit, tmp_path, monkeypatch):
    """A neighbour whose check takes the GPU's memory makes a correct submission's check fail while
    they share it: its verdict is the one it gets with the GPU to itself."""
    stages = Stages(monkeypatch)
    real_decide = stages.decide

    def neighbour_takes_the_memory(kind, who, real, task, work, gpu, opts, result):
        if kind == "check" and who == "victim":
            stages.time.sleep(0.5)  # the neighbour is checked meanwhile
            with stages.lock:
                beside = stages.checking - {"victim"}
            if beside:
                result.verdict, result.message = grade.Verdict.RUNTIME_ERROR, "cudaErrorMemoryAllocation"
                result.score = 0.0
                return False
        if kind == "check" and who == "neighbour":
            stages.time.sleep(1.5)
        if kind == "check" and who == "wrong":
            stages.time.sleep(0.5)
            with stages.lock:
                assert "neighbour" in stages.checking
        return real_decide(kind, who, real, task, work, gpu, opts, result)
    stages.decide = neighbour_takes_the_memory
    subs, out = tmp_path / "class", tmp_path / "out"
    for who, scenario in (("neighbour", "reference"), ("victim", "reference"), ("wrong", "skeleton")):
        (subs / who / "trmm").mkdir(parents=True)
        (subs / who / "trmm" / "kernel.cu").write_text(kernel(scenario))
    assert batch.main(args(subs, out, ("checks_per_gpu", 4), ("jobs", 3))) == 0
    rec = json.loads((out / "records" / "victim" / "trmm.json").read_text())
    assert rec["verdict"] == "correct" and rec["score"] == 100, rec.get("message")
    assert "run again with the GPU to itself" in rec["batch"]["checked_alone"]
    assert [w for k, w in stages.spans if k == "check"].count("victim") == 2
    assert "checked_alone" not in json.loads((out / "records" / "neighbour" / "trmm.json").read_text())["batch"]
    # A wrong output is the submission's own, beside others or not: checked once.
    assert json.loads((out / "records" / "wrong" / "trmm.json").read_text())["verdict"] == "incorrect"
    assert [w for k, w in stages.spans if k == "check"].count("wrong") == 1


def test_a_check_that_went_past_its_own_disk_processes_memory_or_file_size_beside_others_is_not_run_again(
        fake_kit, tmp_path, monkeypatch):
    """Its work folder's disk counts what it wrote alone, its cgroup the processes it started and the memory
    it used, and its file size limit (SIGXFSZ) its own writes: a neighbour cannot put it over those
    limits, so the stop is its verdict at once. A fault beside others, and a kill by the machine's
    out-of-memory killer (below its limit, or where the cgroup cannot tell), are still run again alone."""
    from grader import judged, sandbox
    from grader.limits import FORK_BOMB_REFUSALS, Limits
    from grader.results import CaseResult
    stages = Stages(monkeypatch)
    real_decide = stages.decide
    forking = Limits().over_processes(type("Group", (), {"refused_forks": lambda self: FORK_BOMB_REFUSALS})())

    def over_limits(kind, who, real, task, work, gpu, opts, result):
        if kind == "check" and who in ("filler", "bomber", "faulter", "hog", "starved", "either", "printer"):
            stages.time.sleep(0.5)  # the neighbour is checked meanwhile
            with stages.lock:
                beside = stages.checking - {who}
            if beside:
                why = {"filler": f"{judged.STOPPED}wrote more than 8 GiB to disk",
                       "bomber": f"{judged.STOPPED}{forking}",
                       "hog": f"{judged.STOPPED}{sandbox.memory_stop(16 << 30, True)}",
                       "starved": f"{judged.STOPPED}{sandbox.memory_stop(16 << 30, False)}",
                       "either": f"{judged.STOPPED}{sandbox.memory_stop(16 << 30, None)}",
                       "printer": judged.FILE_TOO_LARGE,
                       "faulter": "the kernel faulted: cudaErrorIllegalAddress"}[who]
                result.cases = [CaseResult("n1", {"n": 1}, grade.Verdict.RUNTIME_ERROR, why)]
                result.verdict, result.message, result.score = grade.Verdict.RUNTIME_ERROR, f"case n1: {why}", 0.0
                return False
        if kind == "check" and who == "neighbour":
            stages.time.sleep(1.5)
        return real_decide(kind, who, real, task, work, gpu, opts, result)
    stages.decide = over_limits
    subs, out = correct_class(tmp_path / "class", ("neighbour", "filler", "bomber", "faulter", "hog", "starved", "either", "printer")), tmp_path / "out"
    assert batch.main(args(subs, out, ("checks_per_gpu", 4), ("jobs", 4))) == 0
    checks = [w for k, w in stages.spans if k == "check"]
    for who, said in (("filler", "wrote more than 8 GiB"), ("bomber", "kept starting processes past its limit"),
                      ("hog", "used more than 16 GiB of host memory"), ("printer", "killed by signal 25")):
        rec = json.loads((out / "records" / who / "trmm.json").read_text())
        assert rec["verdict"] == "runtime_error" and said in rec["message"], rec["message"]
        assert checks.count(who) == 1 and "checked_alone" not in rec["batch"], who
    for who in ("faulter", "starved", "either"):
        rec = json.loads((out / "records" / who / "trmm.json").read_text())
        assert checks.count(who) == 2 and rec["verdict"] == "correct", who


def test_a_batch_s_burst_gap_reaches_every_timed_plan_the_library_s_too_and_each_record_says_it(fake_kit, tmp_path,
                                                                                                 monkeypatch):
    from grader import judged
    plans, real = [], judged.run
    monkeypatch.setattr(judged, "run", lambda checker, plan, *a, **k: plans.append(plan) or real(checker, plan, *a, **k))
    subs, out = correct_class(tmp_path / "class", ("amy", "ben")), tmp_path / "out"
    assert batch.main(args(subs, out, ("burst_gap_ms", 50.0))) == 0
    timed = [line for plan in plans for line in plan.splitlines() if line.startswith("timed ")]
    assert len(timed) >= 3  # the library's and each student's
    assert all(" gap_ms=50 " in f" {line} " for line in timed), timed
    for who in ("amy", "ben"):
        rec = json.loads((out / "records" / who / "trmm.json").read_text())
        assert rec["verdict"] == "correct" and rec["batch"]["burst_gap_ms"] == 50.0
    # Without the option the plans say nothing: the judge's own 400 ms.
    plans.clear()
    assert batch.main(args(subs, tmp_path / "out2")) == 0
    assert plans and not any("gap_ms" in plan for plan in plans)


@pytest.mark.parametrize("gap", [-1.0, 10001.0, float("nan")])
def test_a_burst_gap_out_of_range_is_refused_with_the_range(tmp_path, gap):
    (tmp_path / "class").mkdir()
    with pytest.raises(tasks.TaskError, match=r"--burst-gap-ms .*: expected 0 to 10000"):
        batch.main(args(tmp_path / "class", tmp_path / "out", ("burst_gap_ms", gap)))


def test_checks_per_gpu_out_of_range_is_refused_with_the_range(tmp_path):
    (tmp_path / "class").mkdir()
    with pytest.raises(tasks.TaskError, match="--checks-per-gpu 0: expected 1"):
        batch.main(args(tmp_path / "class", tmp_path / "out", ("checks_per_gpu", 0)))


def test_a_gpu_that_stops_working_mid_batch_ends_it_with_the_reason_while_a_timing_waits(fake_kit, tmp_path,
                                                                                       monkeypatch):
    """The checks still to start are dropped when the batch stops: a timing that waited for them must
    not wait forever."""
    import signal
    from grader.gpu import NoGpu
    from grader.batch import scheduling
    real = grade.check_stages

    def check(task, work, gpu, opts, result):
        if "s1" in result.submission:
            import time
            time.sleep(0.5)  # s0 passed and waits to be timed; s2 and s3 wait to be checked
            raise NoGpu("no CUDA GPU: the runner could not open the device")
        return real(task, work, gpu, opts, result)
    monkeypatch.setattr(grade, "check_stages", check)
    monkeypatch.setattr(scheduling.Batch, "_gpu_works", lambda self: False)
    subs, out = correct_class(tmp_path / "class", 4), tmp_path / "out"

    def hung(signum, frame):
        raise TimeoutError("the batch hung")
    before = signal.signal(signal.SIGALRM, hung)
    signal.alarm(60)
    try:
        with pytest.raises(tasks.TaskError, match="the GPU stopped working during the batch"):
            batch.main(args(subs, out, ("checks_per_gpu", 1), ("jobs", 4)))
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, before)


def test_the_time_left_counts_the_checks_still_to_run_side_by_side_then_the_timings_of_those_that_pass():
    from grader.batch.progress import time_left
    # 80 submissions to check at 4 s, four at once; half pass; 10 passed already wait for 6 s timings.
    assert time_left(80, 10, [4.0] * 20, [6.0] * 3, 10, 4, 1) == pytest.approx(80 * 4 / 4 + (10 + 40) * 6)
    assert time_left(80, 10, [4.0] * 20, [6.0] * 3, 10, 4, 2) == pytest.approx(80 * 4 / 8 + (10 + 40) * 6 / 2)
    # Before the first timing ends, a timing is taken to cost a check.
    assert time_left(10, 2, [3.0, 5.0], [], 1, 4, 1) == pytest.approx(10 * 4 / 4 + (2 + 5) * 4)
    assert time_left(10, 0, [], [], 0, 4, 1) != time_left(10, 0, [], [], 0, 4, 1)  # nothing checked: unknown (nan)


def test_the_progress_line_says_the_time_left_once_a_check_has_ended(fake_kit, tmp_path, capsys):
    subs, out = correct_class(tmp_path / "class", 4), tmp_path / "out"
    info = gpu_mod.detect()
    opts = batch.Options(submissions=subs, out=out, jobs=2, assignments=["trmm"], reference=False, isolation=False,
                         tty=True, checks_per_gpu=2, gpu_infos={0: info})
    assert batch.Batch(opts, info).run() == 0
    err = capsys.readouterr().err
    assert "[4/4]" in err and "left ~" in err


def test_checks_side_by_side_default_to_one_per_16_gib_of_gpu_memory_at_most_four():
    gib = 1 << 30
    info = GpuInfo("NVIDIA L4", "sm_89")
    assert batch_gpus.default_checks(info) == 4  # memory not known
    for memory, checks in ((16, 1), (24, 1), (40, 2), (48, 3), (80, 4), (141, 4)):
        info.memory_bytes = memory * gib
        assert batch_gpus.default_checks(info) == checks, memory


def test_the_batch_s_own_threads_keep_off_the_cpus_of_its_timings_and_give_the_caller_its_cpus_back(
        fake_kit, tmp_path, monkeypatch):
    """The grader looks at every run's processes and files four times a second: at a program holding
    thousands of descriptors a look takes milliseconds of CPU, which on a timing's CPUs its judge would
    wait for, as if other programs had taken them (a retime the program chose). Here two CPUs are split
    one for the builds and checks, one for the timing."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("needs two CPUs")
    monkeypatch.setattr(batch.scheduling, "split_cpus", lambda all_cpus, ids: ([cpus[0]], {ids[0]: [cpus[1]]}))
    seen = {}
    for stage in ("check_stages", "timing_stages"):
        real = getattr(grade, stage)

        def watched(*a, real=real, stage=stage):
            seen.setdefault(stage, set()).update(os.sched_getaffinity(0))
            return real(*a)
        monkeypatch.setattr(grade, stage, watched)
    subs, out = correct_class(tmp_path / "class", 2), tmp_path / "out"
    assert batch.main(args(subs, out)) == 0
    assert seen == {"check_stages": {cpus[0]}, "timing_stages": {cpus[0]}}
    assert sorted(os.sched_getaffinity(0)) == cpus
