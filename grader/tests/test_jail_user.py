"""Who a jailed program is: uid 65534 with no capabilities inside its namespaces, and outside, for a
grader running as root, a uid that no account, no process outside a jail and no user's containers
have (limits.jail_uid). Every process of a user may write into the descriptors of that user's other
processes through /proc/PID/fd, the CUDA driver's pipes among them. Needs bubblewrap and gcc."""
import os
import shutil
import subprocess

import pytest

from grader import limits, tasks
from jail_box import SYSTEM_PYTHON, as_user

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None or shutil.which("gcc") is None,
                                reason="needs bubblewrap (apt-get install bubblewrap) and gcc")


def test_a_jailed_program_runs_as_nobody_with_no_capabilities_and_no_new_privileges(box):
    r = box.run("""
        int main(void) {
            printf("uid %d %d gid %d\\n", getuid(), geteuid(), getgid());
            FILE* f = fopen("/proc/self/status", "r"); char line[256];
            while (fgets(line, sizeof line, f))
                if (!strncmp(line, "CapEff", 6) || !strncmp(line, "CapPrm", 6) || !strncmp(line, "NoNewPrivs", 10))
                    fputs(line, stdout);
            return 0;
        }""")
    assert r.returncode == 0, r.output
    assert "uid 65534 65534 gid 65534" in r.output
    assert "CapEff:\t0000000000000000" in r.output and "CapPrm:\t0000000000000000" in r.output
    assert "NoNewPrivs:\t1" in r.output


# A process of the machine's user nobody (a daemon, another tool's sandbox, the kit's own protocol tests):
# it writes into every descriptor of every process of its user that it can open through /proc/PID/fd.
# The CUDA driver keeps pipes among a program's descriptors, and a write there ends the program's next
# CUDA call in cudaErrorOperatingSystem: a correct submission lost its timed runs that way.
NEIGHBOUR = """
import os, sys, time
end = time.monotonic() + float(sys.argv[1])
wrote = opened = 0
while time.monotonic() < end:
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if pid == str(os.getpid()) or b"kit_pipe_target" not in open(f"/proc/{pid}/cmdline", "rb").read():
                continue
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                f = os.open(f"/proc/{pid}/fd/{fd}", os.O_WRONLY | os.O_NONBLOCK)
            except OSError:
                continue
            opened += 1
            try:
                wrote += os.write(f, b"forged") > 0
            except OSError:
                pass
            os.close(f)
    time.sleep(0.01)
print(f"opened {opened} wrote {wrote}")
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="a grader run as another user runs its jails as that user")
def test_a_process_of_the_machines_nobody_user_cannot_write_into_a_jailed_programs_descriptors(box):
    neighbour = subprocess.Popen([SYSTEM_PYTHON, "-c", NEIGHBOUR, "2"], preexec_fn=as_user(limits.NOBODY),
                                 stdout=subprocess.PIPE, text=True)
    try:
        r = box.run("""
            int main(int argc, char** argv) {
                if (argc == 1) { execl("/proc/self/exe", "kit_pipe_target", "x", (char*)0); return 1; }
                int p[2]; char buf[64];
                if (pipe2(p, O_NONBLOCK) != 0) return 1;
                for (int i = 0; i < 150; i++) {  /* 1.5 s, as a runner's driver holds its pipes */
                    ssize_t n = read(p[0], buf, sizeof buf - 1);
                    if (n > 0) { buf[n] = 0; printf("forged into my pipe: %s\\n", buf); return 0; }
                    usleep(10000);
                }
                printf("untouched\\n");
                return 0;
            }""")
    finally:
        seen = neighbour.communicate(timeout=30)[0]
    assert r.returncode == 0, r.output
    assert "untouched" in r.output, f"{r.output.strip()} (the neighbour: {seen.strip()})"
    assert seen.strip() == "opened 0 wrote 0"


@pytest.mark.skipif(os.geteuid() != 0, reason="a grader run as another user runs its jails as that user")
def test_the_jails_uid_outside_is_one_no_account_and_no_running_process_has_and_the_record_names_it(box):
    # The range's last two uids: the jails of tests run beside this one take its first ones.
    first = limits.JAIL_UIDS[-2]
    squatter = subprocess.Popen(["sleep", "60"], preexec_fn=as_user(first))
    try:
        assert limits.jail_uid([0, first, first + 1]) == first + 1  # root has an account; first, a process
        with pytest.raises(OSError, match=f"no uid of 0..{first} is free"):
            limits.jail_uid([0, first])
    finally:
        squatter.kill()
        squatter.wait()
    uid = box.jail.limits.drop_to
    assert uid in limits.JAIL_UIDS
    assert (f"uid {uid} outside it, which no account, no process outside a jail and no user's containers have"
            in box.jail.describe()["user"])


def test_the_jails_uid_is_none_another_user_may_run_containers_as_nor_one_this_namespace_does_not_map(
        tmp_path, monkeypatch):
    """A user granted subordinate ids (/etc/subuid) runs processes as them in their own containers, and
    could write into a jail's work folder if its uid were one; a grader in a container whose root is
    remapped can only hand out the ids its namespace maps."""
    first = limits.JAIL_UIDS[0]
    (tmp_path / "subuid").write_text(f"eve:{first}:65536\n")
    (tmp_path / "subgid").write_text("")
    monkeypatch.setattr(limits, "SUBORDINATE", (str(tmp_path / "subuid"), str(tmp_path / "subgid")))
    assert limits.jail_uid([first, first + 65536]) == first + 65536
    (tmp_path / "uid_map").write_text("         0     100000      65536\n")
    (tmp_path / "gid_map").write_text("         0     100000      65536\n")
    monkeypatch.setattr(limits, "ID_MAPS", (str(tmp_path / "uid_map"), str(tmp_path / "gid_map")))
    uid = limits.jail_uid()
    assert 60000 <= uid <= 65533


REMAPPED = """
import ctypes, os, shutil, tempfile
from pathlib import Path
ready, go = os.pipe(), os.pipe()
pid = os.fork()
if pid == 0:  # a container's root: uid 0 in a user namespace that maps ids 0..65535 to 100000..165535
    if ctypes.CDLL(None, use_errno=True).unshare(0x10000000) != 0:  # CLONE_NEWUSER
        os._exit(2)
    os.write(ready[1], b"x")
    os.read(go[0], 1)
    os.setresgid(0, 0, 0)
    os.setresuid(0, 0, 0)
    from grader import sandbox, tasks
    from grader.limits import Limits
    limits = Limits()
    root = Path(tempfile.mkdtemp(prefix="kit-test-remapped-"))
    try:
        j = sandbox.open_jail(root, tasks.ROOT / "harness" / "include", None, limits)
        print("jail as", limits.drop_to, "|", j.describe()["user"], flush=True)
    except Exception as e:
        print("no jail as", limits.drop_to, "|", e, flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    os._exit(0)
os.read(ready[0], 1)
for name in ("uid_map", "gid_map"):
    with open(f"/proc/{pid}/{name}", "w") as f:
        f.write("0 100000 65536\\n")
os.write(go[1], b"x")
os.waitpid(pid, 0)
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="makes a user namespace with a remapped root, as root")
def test_a_root_grader_in_a_container_whose_root_is_remapped_jails_as_an_id_the_container_maps(tmp_path):
    r = subprocess.run([SYSTEM_PYTHON, "-c", REMAPPED], capture_output=True, text=True, timeout=120, cwd=tmp_path,
                       env={**os.environ, "PYTHONPATH": str(tasks.ROOT / "grader")})
    assert r.stdout.startswith("jail as "), r.stdout + r.stderr
    uid = int(r.stdout.split()[2])
    assert 60000 <= uid <= 65533, r.stdout
