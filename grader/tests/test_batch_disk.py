"""A batch on a disk short of the jail's reserve (limits.Limits.disk_reserve_bytes): the disk is shared
by every build, check and timing of the batch, on every GPU, so a stop for the reserve, or a run it
refused to start, is graded again with nothing else running; with nothing else running, what a
grading's own folders hold is its doing, and a disk still short otherwise stops the batch. On the fake
harness of fake_kit.py, with the stages wrapped as test_batch_gpus.py wraps them."""
import json
import os
import threading
import time

import pytest

from grader import batch, grade, judged, protocol, tasks
from grader.limits import DISK_LOW, DiskLow
from grader.results import CaseResult

from fake_kit import args, correct_class  # noqa: E402
from test_batch_gpus import Stages


def test_a_grading_stopped_for_the_disks_reserve_or_refused_a_start_by_it_is_graded_again_with_nothing_else_running(
        fake_kit, tmp_path, monkeypatch):
    """The disk is shared by every build, check and timing of the batch, on every GPU: one run can take
    it below the jail's reserve and another be stopped for it (a reviewer's attack: a check on another
    GPU, or beside a timing, is not run again for a fault). Such a grading's GPU stages run again with
    nothing else of the batch running, and that verdict counts."""
    stages = Stages(monkeypatch)
    real_decide = stages.decide
    tries, beside = {}, {}
    stop = f"{judged.STOPPED}{DISK_LOW} 1 GiB free"

    def short_of_disk(kind, who, real, task, work, gpu, opts, result):
        n = tries[kind, who] = tries.get((kind, who), 0) + 1
        with stages.lock:
            beside[kind, who, n] = sorted(stages.checking - {who}) + ["timing"] * (stages.timing - (kind == "timing"))
        if n == 1 and (kind, who) == ("check", "checked"):
            result.cases = [CaseResult("n1", {"n": 1}, grade.Verdict.RUNTIME_ERROR, stop)]
            result.verdict, result.message, result.score = grade.Verdict.RUNTIME_ERROR, f"case n1: {stop}", 0.0
            return False
        if n == 1 and (kind, who) == ("timing", "timed"):
            result.verdict, result.message = grade.Verdict.RUNTIME_ERROR, f"in the timed runs: {stop}"
            result.score = result.correctness_points
            return result
        if n == 1 and (kind, who) == ("check", "refused"):
            raise DiskLow("the disk holding the work folder has less than 1 GiB free")
        return real_decide(kind, who, real, task, work, gpu, opts, result)
    stages.decide = short_of_disk
    subs, out = correct_class(tmp_path / "class", ("checked", "timed", "refused", "n1", "n2")), tmp_path / "out"
    assert batch.main(args(subs, out, ("checks_per_gpu", 4), ("jobs", 5))) == 0
    for who, kind in (("checked", "check"), ("timed", "timing"), ("refused", "check")):
        rec = json.loads((out / "records" / who / "trmm.json").read_text())
        assert rec["verdict"] == "correct" and rec["score"] == 100, (who, rec["message"])
        assert tries[kind, who] == 2 and beside[kind, who, 2] == [], (who, beside)


def test_a_program_that_writes_the_disk_reserves_words_into_its_own_fault_is_not_run_again_for_them(
        fake_kit, tmp_path, monkeypatch):
    """A fault's text is the program's own (it sends it): the words of a stop for the disk's reserve
    there would buy it a second grading with the whole batch stopped for it, at every run."""
    stages = Stages(monkeypatch)
    real_decide = stages.decide
    forged = f"the kernel faulted: cudaErrorUnknown ({judged.STOPPED}{DISK_LOW} 1 GiB free)"

    def forger(kind, who, real, task, work, gpu, opts, result):
        if kind == "check" and who == "forger":
            result.cases = [CaseResult("n1", {"n": 1}, grade.Verdict.RUNTIME_ERROR, forged)]
            result.verdict, result.message, result.score = grade.Verdict.RUNTIME_ERROR, f"case n1: {forged}", 0.0
            return False
        return real_decide(kind, who, real, task, work, gpu, opts, result)
    stages.decide = forger
    subs, out = correct_class(tmp_path / "class", ("forger", "other")), tmp_path / "out"
    assert batch.main(args(subs, out, ("checks_per_gpu", 1), ("jobs", 2))) == 0
    assert [w for k, w in stages.spans if k == "check"].count("forger") == 1, stages.spans


def test_a_grading_whose_own_leftovers_keep_the_disk_short_gets_that_verdict_and_the_batch_goes_on(
        fake_kit, tmp_path, monkeypatch):
    """A runner may leave up to its disk limit (8 GiB) in its work folder, kept until the grading's
    outputs are written: on a disk with less than that and the reserve free, every later run was
    refused, alone as well, and the batch stopped, at every run (a reviewer's attack). Simulated: every
    stage asks for room first, as a jailed run does, on a disk of 400 MiB that holds the batch's work
    folders alone, with a reserve of 200 MiB, and mallory's check leaves 300 MiB."""
    stages = Stages(monkeypatch, hold_s=0.05)
    real_decide = stages.decide

    def leaves_junk(kind, who, real, task, work, gpu, opts, result):
        free = (400 << 20) - sum(st.st_blocks * 512 for _, st in protocol.entries(work.parent))
        if free < 200 << 20:  # as Limits.room_to_run, on this disk
            raise DiskLow(f"the disk holding {work} is short", free, 200 << 20, work)
        if kind == "check" and who == "mallory":
            with open(work / "junk.bin", "wb") as f:
                for _ in range(300):
                    f.write(b"\1" * (1 << 20))
                os.fsync(f.fileno())
        return real_decide(kind, who, real, task, work, gpu, opts, result)
    stages.decide = leaves_junk
    subs, out = correct_class(tmp_path / "class", ("mallory", "v1", "v2", "v3")), tmp_path / "out"
    # Others refused while its files were kept are graded at the next run; none stops the batch.
    assert batch.main(args(subs, out, ("checks_per_gpu", 1), ("jobs", 1))) in (0, 2)
    assert batch.main(args(subs, out, ("checks_per_gpu", 1), ("jobs", 1))) == 0
    rec = json.loads((out / "records" / "mallory" / "trmm.json").read_text())
    assert rec["verdict"] == "runtime_error" and rec["score"] == 0, rec["message"]
    assert "left 300 MiB in its work folders" in rec["message"] and judged.over_own_limit(rec["message"])
    assert all(json.loads((out / "records" / v / "trmm.json").read_text())["verdict"] == "correct"
               for v in ("v1", "v2", "v3"))


def test_a_disk_that_gets_its_blocks_back_soon_after_is_waited_for_and_the_batch_goes_on(fake_kit, tmp_path,
                                                                                         monkeypatch):
    """A filesystem gives the blocks of files just deleted back when its journal next commits (every 5 s
    on ext4): a grading started right after another's work folder went found the disk short, alone as
    well, with no folder to blame, and stopped the batch (seen in a reviewer's run on a real disk)."""
    stages = Stages(monkeypatch, hold_s=0.05)
    real_decide = stages.decide
    tries = []

    def late_blocks(kind, who, real, task, work, gpu, opts, result):
        if kind == "check" and who == "late":
            tries.append(who)
            if len(tries) <= 2:  # beside the others, then alone; the disk (here: this one) has room by then
                raise DiskLow(f"the disk holding {work} is short", 0, 1 << 20, tmp_path)
        return real_decide(kind, who, real, task, work, gpu, opts, result)
    stages.decide = late_blocks
    subs, out = correct_class(tmp_path / "class", ("late", "other")), tmp_path / "out"
    assert batch.main(args(subs, out)) == 0
    assert len(tries) == 3
    assert json.loads((out / "records" / "late" / "trmm.json").read_text())["verdict"] == "correct"


def test_a_grading_is_not_blamed_for_a_disk_that_another_gradings_kept_files_took_below_the_reserve(
        fake_kit, tmp_path, monkeypatch):
    """mallory's runner leaves the disk just above the reserve, in files kept in her work folder until
    her outputs are written; victim's next run writes a 10 MiB output (within every limit) and the disk
    goes short. The grading's own folder was looked at first, so victim's 10 MiB "held the shortfall":
    a runtime error of its own, mallory's 195 MiB never looked at (a reviewer's attack). Simulated on a
    400 MiB disk holding the work folders alone, reserve 200 MiB."""
    stages = Stages(monkeypatch, hold_s=0.05)
    real_decide = stages.decide
    junk_down = threading.Event()

    def free_of(work):
        return (400 << 20) - sum(st.st_blocks * 512 for _, st in protocol.entries(work.parent))

    def room(work):
        if (free := free_of(work)) < 200 << 20:  # as Limits.room_to_run, on this disk
            raise DiskLow(f"the disk holding {work} is short", free, 200 << 20, work)

    def write(path, mib):
        with open(path, "wb") as f:
            for _ in range(mib):
                f.write(b"\1" * (1 << 20))
            os.fsync(f.fileno())

    def decide(kind, who, real, task, work, gpu, opts, result):
        room(work)
        if kind == "check" and who == "mallory":
            write(work / "junk.bin", 195)  # leaves the disk at ~205 MiB free: no stop for her
            junk_down.set()
            time.sleep(1.0)  # her check ends after victim's: victim is timed (and checked alone) first
        if kind == "check" and who == "victim" and not (work / "out.bin").exists():
            junk_down.wait(10)
            write(work / "out.bin", 10)  # its run's output dump, within every limit
            room(work)  # its next run (the next case) is refused: the disk is short
        return real_decide(kind, who, real, task, work, gpu, opts, result)
    stages.decide = decide
    subs, out = correct_class(tmp_path / "class", ("mallory", "victim")), tmp_path / "out"
    rc = batch.main(args(subs, out, ("checks_per_gpu", 2), ("jobs", 2)))
    rec_path = out / "records" / "victim" / "trmm.json"
    rec = json.loads(rec_path.read_text()) if rec_path.exists() else {"verdict": "(not graded)", "message": ""}
    # victim's own files are not what keeps the disk short (mallory's 195 MiB are): no verdict against it
    # (not graded this run, or graded once the disk has room, are both fine).
    assert not (rec["verdict"] == "runtime_error" and judged.over_own_limit(rec["message"])), (rc, rec["message"],
                                                                                             stages.spans)


def test_a_batch_gives_each_work_folder_the_disk_asked_for_in_its_jail_and_passes_it_on_to_its_slurm_jobs(
        fake_kit, tmp_path, monkeypatch):
    """--disk-gib: a TA whose disk is small (or a class that writes nothing) sets each work folder's disk
    below the default 8 GiB, and a program that fills it is stopped that much sooner."""
    from grader import jail, sandbox
    from grader.batch import slurm
    from grader.limits import Limits
    seen = []

    def open_jail(root, include, probe, limits, hidden=()):
        seen.append(limits)
        raise jail.JailError("the test stops the batch here")
    monkeypatch.setattr(jail, "find", lambda include: None)
    monkeypatch.setattr(sandbox, "open_jail", open_jail)
    correct_class(tmp_path / "class", ["amy"])
    for gib, want in ((None, Limits.disk_bytes), (1.5, 3 << 29)):
        with pytest.raises(jail.JailError):
            batch.main(args(tmp_path / "class", tmp_path / "out", ("no_isolation", False), ("disk_gib", gib)))
        assert seen[-1].disk_bytes == want and seen[-1].describe_disk().startswith(f"{want / 2**30:g} GiB and")
    opts = batch.Options(submissions=tmp_path / "class", out=tmp_path / "out", disk_bytes=3 << 29)
    flags = slurm._flags(args(tmp_path / "class", tmp_path / "out"), opts)
    assert flags[flags.index("--disk-gib") + 1] == "1.5"


@pytest.mark.parametrize("gib", [0.0, 0.1, -2.0, 2000.0, float("nan")])
def test_a_work_folders_disk_out_of_range_is_refused_with_the_range(tmp_path, gib):
    (tmp_path / "class").mkdir()
    with pytest.raises(tasks.TaskError, match=r"--disk-gib .*: expected 0.25 to 1024 GiB"):
        batch.main(args(tmp_path / "class", tmp_path / "out", ("disk_gib", gib)))
