"""Work folders: a grader killed with -9 leaves its folder behind, and the next grading deletes it."""
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

from grader import grade, sandbox, tasks, workdir
from grader.results import GpuInfo

GRADER = Path(__file__).resolve().parents[1]


@pytest.fixture
def temp_root(monkeypatch, tmp_path):
    """A temp folder of the tests' own, so no sweep touches the machine's."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


def folder_of_a_killed_grader(temp_root: Path) -> Path:
    """Starts a process that makes a work folder and waits; kills it with -9; returns the folder."""
    code = ("import sys, tempfile, time; tempfile.tempdir = sys.argv[1]\n"
            "from grader import workdir\n"
            "print(workdir.new('kit-trmm-'), flush=True); time.sleep(60)")
    p = subprocess.Popen([sys.executable, "-c", code, str(temp_root)], stdout=subprocess.PIPE, text=True,
                         env={**os.environ, "PYTHONPATH": str(GRADER)})
    d = Path(p.stdout.readline().strip())
    p.send_signal(signal.SIGKILL)
    p.wait()
    p.stdout.close()
    (d / "dump.bin").write_bytes(b"\0" * 4096)  # what a runner had written
    return d


def test_a_work_folder_left_by_a_grader_killed_with_minus_9_is_deleted_by_the_next_one(temp_root):
    stale = folder_of_a_killed_grader(temp_root)
    assert stale.is_dir()
    fresh = workdir.new("kit-reduce-")
    assert not stale.exists()
    assert fresh.is_dir() and fresh.parent == temp_root.resolve()


def test_the_work_folder_of_a_grader_still_running_is_left_alone(temp_root):
    mine = workdir.new("kit-conv1d-")
    assert workdir.sweep() == []
    assert mine.is_dir()


def test_a_folder_kept_on_purpose_is_never_swept(temp_root):
    stale = folder_of_a_killed_grader(temp_root)
    workdir.keep(stale)
    assert workdir.sweep() == []
    assert (stale / "dump.bin").is_file()


def test_folders_that_are_not_the_kits_or_belong_to_another_host_are_left_alone(temp_root):
    stale = folder_of_a_killed_grader(temp_root)
    owner = stale / workdir.OWNER
    owner.write_text(owner.read_text().split()[0] + " another-host\n")
    other = temp_root / "unrelated"
    other.mkdir()
    (other / workdir.OWNER).write_text(owner.read_text())
    assert workdir.sweep() == []
    assert stale.is_dir() and other.is_dir()


def test_grading_sweeps_before_it_starts(temp_root, monkeypatch):
    stale = folder_of_a_killed_grader(temp_root)
    monkeypatch.setattr(grade, "_grade", lambda task, submission, gpu, opts, work: None)
    grade.grade(tasks.load("trmm"), Path("kernel.cu"), GpuInfo(name="none", arch="sm_90"))
    assert not stale.exists()
    assert list(temp_root.glob("kit-*")) == []  # and its own folder is gone when it ends


def test_a_left_work_folder_of_3000_nested_folders_and_a_link_out_is_deleted_whole_and_the_link_s_target_kept(temp_root):
    # What a runner can leave: shutil.rmtree recursed once per level and raised RecursionError out of
    # the sweep, which every grading starts with.
    d = folder_of_a_killed_grader(temp_root)
    outside = temp_root.parent / f"{temp_root.name}-ta-file.txt"
    outside.write_text("the TA's")
    here = os.getcwd()
    os.chdir(d)
    try:
        os.symlink(outside, "link-out")
        for _ in range(3000):
            os.mkdir("d")
            os.chdir("d")
        Path("bottom.bin").write_bytes(b"x")
        os.mkdir("closed", 0)
    finally:
        os.chdir(here)
    assert workdir.sweep(temp_root) == [d]
    assert not d.exists()
    assert outside.read_text() == "the TA's"


def test_a_folder_swapped_for_a_link_during_the_walk_is_not_followed_out_of_the_work_folder(tmp_path):
    # A runner looping on renameat2(RENAME_EXCHANGE) swaps a folder it made with a link to /usr/lib
    # between the walk's look at the folder and its listing: the walk listed the TA's files.
    from grader import protocol
    work, outside = tmp_path / "work", tmp_path / "ta"
    (work / "d").mkdir(parents=True)
    outside.mkdir()
    (outside / "ta-file.txt").write_text("the TA's")
    seen = []
    for path, _ in protocol.entries(work):
        seen.append(os.path.basename(path))
        if path.endswith("/d"):  # listed as a folder, not entered yet: now swapped
            os.rename(work / "d", work / "d-was")
            os.symlink(outside, work / "d")
    assert seen == ["d"]


def test_a_folder_the_grader_cannot_read_is_a_limit_gone_over_not_a_folder_skipped(tmp_path, monkeypatch):
    # A grader that is not root cannot open a folder its jailed program closed (chmod 000): the files
    # in it went uncounted.
    from grader import protocol
    from grader.limits import Limits
    work = tmp_path / "work"
    (work / "closed").mkdir(parents=True)
    real_open = os.open

    def refuse(path, flags, *args, **kwargs):
        if os.fsdecode(path).endswith("/closed"):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", refuse)
    with pytest.raises(protocol.Hidden):
        list(protocol.entries(work))
    assert Limits().over_disk(work) == "made a folder in its work folder that the grader cannot read"


def test_an_owner_file_that_is_a_pipe_does_not_block_the_sweep(temp_root):
    # A jailed runner that could reach its work folder's owner file put a pipe there: the next grading's
    # sweep read it and blocked for good (a link to /dev/zero would have read until out of memory).
    d = folder_of_a_killed_grader(temp_root)
    (d / workdir.OWNER).unlink()
    os.mkfifo(d / workdir.OWNER)
    done = []
    sweeper = threading.Thread(target=lambda: done.append(workdir.sweep()), daemon=True)
    sweeper.start()
    sweeper.join(5)
    assert done, "the sweep blocked on a pipe named as the owner file"


@pytest.mark.skipif(shutil.which("bwrap") is None or shutil.which("gcc") is None,
                    reason="needs bubblewrap (apt-get install bubblewrap) and gcc")
@pytest.mark.skipif(os.geteuid() != 0, reason="the jail runs as another user only for a grader run as root")
@pytest.mark.parametrize("prefix", ["kit-trmm-", "kit-hidden-"])
def test_code_under_test_reaches_no_owner_file_and_its_folder_is_swept_once_its_grader_is_gone(
        box, monkeypatch, prefix):
    """grade and its hidden cases ran code under test in the work folder itself, which the jail's
    user then owned: a runner replaced the owner file with a pipe (the next sweep blocked), and after
    a grader killed with -9 the folder was never swept (not the grader's). They now run in a folder
    below it (workdir.new_jailed)."""
    monkeypatch.setattr(tempfile, "tempdir", str(box.root))  # where the jail's user can go through
    work = workdir.new_jailed(prefix)
    exe = box.jail.expose(box.compile("""
        int main(void) {
            int moved = 0;
            const char* owners[] = {".kit-owner", "../.kit-owner", 0};
            for (int i = 0; owners[i]; i++) {
                unlink(owners[i]);
                moved += mkfifo(owners[i], 0666) == 0 && access(owners[i], F_OK) == 0;
            }
            printf("made %d\\n", moved);
            return 0;
        }""", "owner"))
    r = sandbox.run([str(exe)], work, box.tmp / "owner.log", timeout=20, view="run", read_only=(exe,))
    assert r.returncode == 0, r
    owner = work.parent / workdir.OWNER
    assert owner.is_file() and not owner.is_symlink(), "the program reached its work folder's owner file"
    assert work.parent.stat().st_uid == os.getuid()
    dead = subprocess.Popen(["true"])
    dead.wait()
    owner.write_text(f"{dead.pid} {socket.gethostname()}\n")  # its grader is gone
    assert workdir.sweep() == [work.parent]
    assert not work.parent.exists()


def test_grading_and_its_hidden_cases_run_code_in_folders_below_their_work_folders(temp_root, monkeypatch):
    seen = []

    def where(work):  # the folder code under test runs in, and whether the owner file is above it
        seen.append((work, (work.parent / workdir.OWNER).is_file(), (work / workdir.OWNER).exists()))

    monkeypatch.setattr(grade, "_grade", lambda task, submission, gpu, opts, work: where(work))
    grade.grade(tasks.load("trmm"), Path("kernel.cu"), GpuInfo(name="NVIDIA H200", arch="sm_90"))
    task = tasks.load("trmm", include_hidden=True)
    monkeypatch.setattr(grade, "_cases", lambda task, work, *a: (where(work), ({}, {}, {}))[1])
    (temp_root / "work").mkdir()
    (temp_root / "work" / "runner").write_bytes(b"")
    grade.correctness(task, temp_root / "work", "sm_90", None)
    ran = [s for s in seen if s[0] != temp_root / "work"]
    assert len(ran) == 2 and all(w.name == "work" and above and not inside for w, above, inside in ran), seen
