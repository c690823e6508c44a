"""Work folders: a grader killed with -9 leaves its folder behind, and the next grading deletes it."""
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from grader import grade, tasks, workdir
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
