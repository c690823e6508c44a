"""The cluster route (batch --slurm) against a real Slurm: a single-node cluster (munged, slurmctld,
slurmd) started under a temp folder, with a GPU declared through a character device made for it
(c 195 0, as /dev/nvidia0), so that --gres=gpu:1 works on a machine without one. The jobs run the
grader with the fake kit (fake_kit.py: builds and runs replayed, no nvcc, no GPU). Needs root and
Debian's slurm-wlm and munge (tools/test.sh installs them); every daemon is stopped at the end."""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from grader import tasks

import fake_kit

HERE = Path(__file__).parent
pytestmark = [
    pytest.mark.skipif(not all(shutil.which(c) for c in ("slurmctld", "slurmd", "munged", "sbatch")),
                       reason="needs Slurm and munge (apt-get install slurm-wlm munge)"),
    pytest.mark.skipif(os.geteuid() != 0, reason="starts slurmd and munged, which need root"),
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    """A one-node Slurm under `root`; env is what a client needs (SLURM_CONF)."""

    def __init__(self, root: Path):
        self.root = root
        host = socket.gethostname()
        for d in ("state", "spool", "munge"):
            (root / d).mkdir(parents=True)
        os.chmod(root / "munge", 0o700)
        key = root / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        self.munge_socket = root / "munge" / "munge.socket"
        subprocess.run(["munged", "--force", f"--key-file={key}", f"--socket={self.munge_socket}",
                        f"--pid-file={root / 'munge' / 'munged.pid'}", f"--log-file={root / 'munge' / 'munged.log'}",
                        f"--seed-file={root / 'munge' / 'munged.seed'}"], check=True, capture_output=True)
        gpu = root / "nvidia0"
        subprocess.run(["mknod", str(gpu), "c", "195", "0"], check=True)
        (root / "gres.conf").write_text(f"NodeName={host} Name=gpu File={gpu}\n")
        cpus = os.cpu_count() or 2
        (root / "slurm.conf").write_text(f"""ClusterName=kit
SlurmctldHost={host}
SlurmctldPort={free_port()}
SlurmdPort={free_port()}
AuthType=auth/munge
AuthInfo=socket={self.munge_socket}
CredType=cred/munge
SlurmUser=root
StateSaveLocation={root / 'state'}
SlurmdSpoolDir={root / 'spool'}
SlurmctldPidFile={root / 'slurmctld.pid'}
SlurmdPidFile={root / 'slurmd.pid'}
SlurmctldLogFile={root / 'slurmctld.log'}
SlurmdLogFile={root / 'slurmd.log'}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/builtin
SchedulerParameters=batch_sched_delay=0
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
NodeName={host} CPUs={cpus} RealMemory=1000 Gres=gpu:1 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
""")
        self.env = {**os.environ, "SLURM_CONF": str(root / "slurm.conf")}
        subprocess.run(["slurmctld", "-c"], env=self.env, check=True, capture_output=True)
        subprocess.run(["slurmd", "-c", "-N", host], env=self.env, check=True, capture_output=True)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            r = subprocess.run(["sinfo", "-h", "-o", "%t"], env=self.env, capture_output=True, text=True)
            if r.stdout.strip() in ("idle", "mix", "alloc"):
                return
            time.sleep(0.3)
        raise RuntimeError(f"the node did not come up: {r.stdout} {r.stderr}\n"
                           + (root / "slurmctld.log").read_text()[-2000:])

    def wait_idle(self, timeout: float = 240) -> None:
        """Until no job is queued or running (squeue: there is no slurmdbd to ask)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            r = subprocess.run(["squeue", "-h", "-o", "%i"], env=self.env, capture_output=True, text=True)
            if r.returncode == 0 and not r.stdout.strip():
                return
            time.sleep(0.3)
        raise TimeoutError(subprocess.run(["squeue"], env=self.env, capture_output=True, text=True).stdout)

    def stop(self) -> None:
        subprocess.run(["scontrol", "shutdown"], env=self.env, capture_output=True)
        for pid_file in ("slurmd.pid", "slurmctld.pid", "munge/munged.pid"):
            try:
                os.kill(int((self.root / pid_file).read_text()), 15)
            except (OSError, ValueError):
                pass


@pytest.fixture(scope="module")
def cluster():
    root = Path(tempfile.mkdtemp(prefix="kit-slurm-"))
    c = Cluster(root)
    yield c
    c.stop()
    shutil.rmtree(root, ignore_errors=True)


def make_class(folder: Path) -> Path:
    """Six students, one trmm kernel each, in recorded scenarios."""
    for student, scenario in (("alice", "reference"), ("bob", "no_bounds_check"), ("carol", "skeleton"),
                              ("dave", "reference"), ("erin", "COMPILE_ERROR"), ("frank", "reference")):
        (folder / student).mkdir(parents=True)
        (folder / student / "kernel.cu").write_text(fake_kit.kernel(scenario))
    return folder


def grader(cluster, *args, timeout=300) -> subprocess.CompletedProcess:
    env = {**cluster.env, "PYTHONPATH": str(tasks.ROOT / "grader"),
           "KIT_GRADER_COMMAND": f"{sys.executable} {HERE / 'fake_kit.py'}"}
    return subprocess.run([sys.executable, str(HERE / "fake_kit.py"), *args], env=env, capture_output=True,
                          text=True, timeout=timeout)


def test_a_class_graded_as_a_slurm_array_merges_into_the_gradebook_of_one_batch(cluster, tmp_path):
    subs = make_class(tmp_path / "class")
    one = grader(cluster, "batch", str(subs), "--out", str(tmp_path / "one"), "--assignments", "trmm",
                 "--no-isolation", "--no-reference")
    assert one.returncode == 0, one.stderr
    out = tmp_path / "cluster"
    r = grader(cluster, "batch", str(subs), "--out", str(out), "--assignments", "trmm", "--no-isolation",
               "--no-reference", "--slurm", "--array-size", "3")
    assert r.returncode == 0, r.stderr + r.stdout
    cluster.wait_idle()
    jobs = json.loads((out / "slurm" / "jobs.json").read_text())
    assert jobs["shards"] == [1, 2, 3]
    logs = "\n".join(p.read_text()[-1500:] for p in sorted((out / "slurm").glob("*.log")))
    assert (out / "gradebook.csv").is_file(), logs
    assert (out / "gradebook.csv").read_bytes() == (tmp_path / "one" / "gradebook.csv").read_bytes()
    status = grader(cluster, "batch", str(subs), "--out", str(out), "--assignments", "trmm", "--status")
    assert "all        6      6      0       0" in status.stdout, status.stdout


def test_a_task_cancelled_half_way_keeps_what_it_finished_and_the_same_command_submits_only_what_is_left(
        cluster, tmp_path):
    subs = make_class(tmp_path / "class")
    (subs / "dave" / "kernel.cu").write_text(fake_kit.kernel("endless_loop"))  # hangs: the task is cancelled there
    out = tmp_path / "cluster"
    flags = ["--out", str(out), "--assignments", "trmm", "--no-isolation", "--no-reference", "--jobs", "1",
             "--checks-per-gpu", "1"]  # one at a time: dave's hang holds up frank
    r = grader(cluster, "batch", str(subs), *flags, "--slurm", "--array-size", "2")  # 2: bob, dave, frank
    assert r.returncode == 0, r.stderr
    jobs = json.loads((out / "slurm" / "jobs.json").read_text())
    bob = out / "shards" / "2" / "records" / "bob" / "trmm.json"
    deadline = time.monotonic() + 120
    while not bob.is_file() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert bob.is_file(), "shard 2 graded nothing"
    time.sleep(1)  # dave's grading has started, and hangs
    subprocess.run(["scancel", f"{jobs['array']}_2"], env=cluster.env, check=True)
    cluster.wait_idle()
    state = json.loads((out / "shards" / "2" / "state.json").read_text())
    assert "bob/trmm" in state["done"] and "dave/trmm" not in state["done"]  # kept what it finished
    assert "shards that did not finish: 2" in (out / "summary.md").read_text()
    status = grader(cluster, "batch", str(subs), *flags, "--status")
    assert "    2        3      1      0       2" in status.stdout, status.stdout

    (subs / "dave" / "kernel.cu").write_text(fake_kit.kernel("reference"))
    again = grader(cluster, "batch", str(subs), *flags, "--slurm")
    assert again.returncode == 0, again.stderr
    assert json.loads((out / "slurm" / "jobs.json").read_text())["shards"] == [2]
    cluster.wait_idle()
    assert "did not finish" not in (out / "summary.md").read_text()
    book = (out / "gradebook.csv").read_text().splitlines()
    assert len(book) == 7 and not any("not graded" in row for row in book)
    assert json.loads(bob.read_text())["batch"]["graded_at"] == json.loads(
        (out / "records" / "bob" / "trmm.json").read_text())["batch"]["graded_at"]  # bob was not graded again
