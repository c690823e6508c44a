"""The jail's limits on what a run may use (limits.py, sandbox.Proc), attacked by small C programs
that try what a hostile kernel.cu would: processes (a fork bomb), memory across processes, and the disk
(written, nested past what a path can name, held in deleted files, left as links and pipes). Each test
is an attack that succeeds without its limit. Needs bubblewrap and gcc; the GPU batch test grades the
same attacks as kernel.cu files (fixtures/batch/hostile/)."""
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from grader import build, judged, sandbox
from grader.cgroups import cgroup_kind
from grader.limits import Limits
from jail_box import Box, small_limits

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None or shutil.which("gcc") is None,
                                reason="needs bubblewrap (apt-get install bubblewrap) and gcc")
needs_cgroups = pytest.mark.skipif(cgroup_kind() is None,
                                   reason="needs a cgroup the grader may make (root, cgroup v2 or v1)")


@needs_cgroups
def test_a_fork_bomb_stops_at_its_own_process_limit_and_the_machine_can_still_fork(box):
    r = box.run("""
        int main(void) {
            int made = 0;
            for (int i = 0; i < 1000; i++) { pid_t p = fork(); if (p == 0) { pause(); _exit(0); } if (p > 0) made++; }
            printf("made %d\\n", made);
            return 0;
        }""")
    made = int(r.output.split("made ")[1].split()[0])
    assert 0 < made < 64
    assert subprocess.run(["true"]).returncode == 0


@needs_cgroups
def test_a_fork_bomb_is_stopped_as_soon_as_it_keeps_forking_past_its_limit_and_the_stop_says_why(tmp_path):
    # Before, it ran until the case's time limit (20 s) and was "did not finish": the same as a slow
    # kernel, and the batch graded it a second time alone before that verdict counted. Memory as a
    # submission has it: within the tests' 256 MiB, the bomb was now and then killed for its memory
    # before its forks were counted (a stop too, but not this one).
    with Box(tmp_path, small_limits(memory_bytes=4 << 30)) as box:
        r = box.run("""
        int main(void) {
            for (;;) fork();
        }""", timeout=20)
    assert not r.timed_out and r.seconds < 10, r
    assert r.stopped_for == "kept starting processes past its limit of 64 processes and threads (refused 10,000 times)", r
    assert subprocess.run(["true"]).returncode == 0


@needs_cgroups
def test_memory_is_bounded_across_all_of_a_submissions_processes(box):
    r = box.run("""
        int main(void) {
            for (int i = 0; i < 4; i++)
                if (fork() == 0) {
                    volatile char* p = malloc(128 << 20);  /* touched page by page: really held */
                    for (long k = 0; k < (128 << 20); k += 4096) p[k] = 1;
                    sleep(2);
                    _exit(0);
                }
            int held = 0, status;
            for (int i = 0; i < 4; i++) if (wait(&status) > 0 && WIFEXITED(status)) held++;
            printf("held %d\\n", held);
            return 0;
        }""")
    assert "held 4" not in r.output, "four processes of 128 MiB each held 512 MiB under a limit of 256 MiB"
    assert "memory" in r.stopped_for, r
    # At its own limit, which cgroup v2 tells from the machine's shortage: its own doing, the verdict at once.
    assert judged.over_own_limit(judged.STOPPED + r.stopped_for) == (cgroup_kind() == "v2"), r.stopped_for


def test_a_program_that_fills_the_disk_is_stopped(box):
    r = box.run("""
        int main(void) {
            fill(20, 16);
            printf("wrote 320 MiB\\n");
            return 0;
        }""")
    assert "wrote 320" not in r.output
    assert r.stopped_for.startswith("wrote more than"), r


def test_files_written_below_a_path_too_long_to_name_count_against_the_disk_limit(box):
    # Twenty folders of 250 characters: past PATH_MAX (4,096), where a walk by path cannot open them,
    # and what is written there was never counted.
    r = box.run("""
        int main(void) {
            char name[251];
            memset(name, 'd', 250); name[250] = 0;
            if (nest(name, 20)) return 1;
            fill(10, 16);
            printf("wrote 160 MiB out of sight\\n");
            return 0;
        }""")
    assert "out of sight" not in r.output
    assert r.stopped_for.startswith("made folders nested past"), r


def test_a_file_deleted_while_open_still_counts_against_the_disk_limit(box):
    # Opened, unlinked, then written: the disk fills all the same, but no folder lists the file.
    r = box.run("""
        int main(void) {
            static char buf[1 << 20];
            for (int f = 0; f < 10; f++) {
                int fd = open("held.bin", O_CREAT | O_WRONLY | O_TRUNC, 0644);
                unlink("held.bin");
                for (int i = 0; i < 16; i++) { write(fd, buf, sizeof buf); usleep(20000); }
            }
            printf("held 160 MiB out of sight\\n");
            fflush(stdout);
            sleep(2);
            return 0;
        }""")
    assert "out of sight" not in r.output
    assert r.stopped_for.startswith("wrote more than"), r


def test_folders_named_in_four_byte_characters_cannot_pass_path_max_under_the_nesting_limit(box):
    # 16 folders of 63 emoji: 1,024 characters but 4,048 bytes, within a character count of the limit
    # and at PATH_MAX; below the last one a walk could stat nothing, and 160 MiB went uncounted.
    r = box.run("""
        int main(void) {
            char name[256] = {0};
            for (int i = 0; i < 63; i++) memcpy(name + 4 * i, "\\xF0\\x9F\\x98\\x80", 4);
            if (nest(name, 16) || nest("x", 1) || fill(10, 16)) return 1;
            printf("wrote 160 MiB out of sight\\n");
            return 0;
        }""")
    assert "out of sight" not in r.output
    assert r.stopped_for.startswith("made folders nested past"), r


def test_a_deleted_file_held_by_a_thread_with_its_own_descriptor_table_counts_after_its_leader_exits(box):
    # unshare(CLONE_FILES) gives the thread a table /proc/PID/fd does not show, and the leader's
    # exit leaves that table empty while the process lives on.
    r = box.run("""
        #include <pthread.h>
        #include <sys/syscall.h>
        static void* worker(void* arg) {
            static char buf[1 << 20];
            unshare(CLONE_FILES);
            usleep(100000);
            int fd = open("held.bin", O_CREAT | O_WRONLY | O_TRUNC, 0644);
            unlink("held.bin");
            for (int i = 0; i < 160; i++) { write(fd, buf, sizeof buf); usleep(5000); }
            printf("held 160 MiB out of sight\\n");
            fflush(stdout);
            sleep(2);
            exit(0);
        }
        int main(void) {
            pthread_t t;
            pthread_create(&t, 0, worker, 0);
            syscall(SYS_exit, 0);
        }""")
    assert "out of sight" not in r.output
    assert r.stopped_for.startswith("wrote more than"), r


def test_a_program_that_nests_folders_and_exits_at_once_is_caught_when_it_ends(box):
    # Fifty folders of 100 characters, made and left in well under the quarter second between two looks
    # at the work folder: the run was over before anything looked.
    r = box.run("""
        int main(void) {
            char name[101];
            memset(name, 'd', 100); name[100] = 0;
            if (nest(name, 50)) return 1;
            printf("nested\\n");
            return 0;
        }""")
    assert "nested" in r.output
    assert r.stopped_for.startswith("made folders nested past"), r


def test_links_and_pipes_left_in_the_work_folder_are_swept_before_the_grader_reads_it(box, tmp_path):
    secret = tmp_path / "ta-file.txt"
    secret.write_text('{"event": "done", "case": "stolen"}\n')
    r = box.run(f"""
        int main(void) {{
            symlink("{secret}", "results.jsonl");
            mkfifo("runner.jsonl", 0666);
            mkdir("dumps", 0755);
            symlink("/", "dumps/out");
            return 0;
        }}""")
    assert r.returncode == 0, r.output
    assert sorted(p.name for p in box.work.rglob("*")) == ["dumps"]
    assert secret.read_text().startswith('{"event"')  # untouched, and never read as a result


def test_a_run_holding_descriptors_in_every_thread_is_stopped_at_once_not_let_past_its_time_limit(box):
    # Descriptors dup'ed up to the hard limit and 24 idle threads sharing their table: each look read and
    # stat'ed every descriptor once per thread (480,000 here) and checked no time limit meanwhile; a 1 s
    # limit ended after 10 s, and with 512 threads and a hard limit of 1,048,576 one look took hours.
    r = box.run("""
        #include <pthread.h>
        #include <sys/resource.h>
        static void* idle(void* arg) { for (;;) pause(); }
        int main(void) {
            struct rlimit rl;
            getrlimit(RLIMIT_NOFILE, &rl);
            rl.rlim_cur = rl.rlim_max < 20000 ? rl.rlim_max : 20000;
            setrlimit(RLIMIT_NOFILE, &rl);
            int fd = open("/proc/self/exe", O_RDONLY), n = 0;
            while (dup(fd) >= 0) n++;
            pthread_t t;
            for (int i = 0; i < 24; i++) pthread_create(&t, 0, idle, 0);
            printf("holding %d\\n", n);
            fflush(stdout);
            for (;;) pause();
        }""", timeout=1)
    held = int(r.output.split("holding ")[1].split()[0])
    if held * 25 <= 65_536:
        pytest.skip(f"the hard limit on open files here ({held + 4}) is too low for this attack")
    assert r.seconds < 4, f"a 1 s time limit held the grader for {r.seconds:.1f} s"
    assert r.stopped_for == "held more than 65,536 open files across its threads", r


@pytest.fixture
def uncapped(tmp_path):
    """A jail with small limits, as a grader that is not root has it: no cgroup (cgroup_kind() None)."""
    with Box(tmp_path, small_limits()) as box:
        box.jail.limits.cgroups = None
        yield box


def test_without_a_cgroup_a_run_cannot_fill_the_jails_own_root_or_dev_with_memory(uncapped):
    # Where no cgroup can be made (a TA who is not root), /tmp's size bounds a run's files in memory; but
    # bubblewrap's empty root and its /dev are memory too, writable by the jailed user and of no size:
    # 600 MiB went into each under a 16 MiB /tmp and a 256 MiB RLIMIT_DATA, memory no process holds,
    # which the out-of-memory killer cannot take back.
    r = uncapped.run("""
        int main(void) {
            long root = fill_at("/big", 600), dev = fill_at("/dev/big", 600), tmp = fill_at("/tmp/big", 600);
            printf("root %ld dev %ld tmp %ld null %d\\n", root, dev, tmp, (int) write(open("/dev/null", O_WRONLY), "x", 1));
            return 0;
        }""")
    assert "root 0 dev 0 tmp 16 null 1" in r.output, r


def test_without_a_cgroup_a_run_cannot_fill_the_cover_over_a_hidden_folder_either(uncapped):
    # Each hidden folder under /usr (another toolkit, pip's NVIDIA wheels, a kit kept in /usr/local) is
    # covered by an empty tmpfs in every view, of no size and owned by the jailed user: a reviewer wrote
    # 600 MiB into one under a 16 MiB /tmp where no cgroup could be made.
    hidden = Path(tempfile.mkdtemp(prefix="kit-test-hidden-", dir="/usr/local"))  # as /usr/local/cuda-12.4 is
    uncapped.jail.hidden = [str(hidden)]
    try:
        r = uncapped.run(f"""
        int main(void) {{
            long n = fill_at("{hidden}/big", 600);
            chmod("{hidden}", 0777);
            printf("wrote %ld MiB, listed %d\\n", n, opendir("{hidden}") != 0);
            return 0;
        }}""")
    finally:
        shutil.rmtree(hidden, ignore_errors=True)
    assert "wrote 0 MiB, listed 1" in r.output, r


@needs_cgroups
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_a_compile_that_runs_out_of_time_with_the_cpu_to_itself_is_the_sources_error_not_built_again_alone(
        tmp_path, monkeypatch):
    # Four lines that include their own file twice per level, 40 levels deep, never compile. A time-out
    # was not the source's error (a starved compile times out too), so a batch built it again with
    # everything else stopped: 180 s of an idle class per such file (a reviewer's attack). The
    # compiler's cgroup tells a compile that had the CPU from a starved one: the verdict follows the CPU
    # it had (the tests beside this one may take some).
    runs = []
    real_run = sandbox.run
    monkeypatch.setattr(sandbox, "run", lambda *a, **k: runs.append(real_run(*a, **k)) or runs[-1])
    with Box(tmp_path, Limits()) as box:
        src = box.tmp / "kernel.cu"
        src.write_text("#if __INCLUDE_LEVEL__ < 40\n#include __FILE__\n#include __FILE__\n#endif\n")
        ok, log = build.compile_submission(src, box.work, "sm_90", timeout=4)
    assert not ok and "did not finish within 4 s" in log, log
    cpu = runs[-1].cpu_s
    assert cpu is not None and cpu > 1, runs[-1]  # the cgroup counted the compiler's CPU
    assert build.source_error(log) == (cpu >= build.OWN_TIME_OUT * 4), (cpu, log)


@needs_cgroups
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
@pytest.mark.parametrize("device", ["ptmx", "pts/ptmx"])
def test_a_compile_cannot_wait_on_a_terminal_for_its_whole_time_limit_without_the_cpu(tmp_path, device):
    # `#include "/dev/ptmx"` opened a new terminal, whose read waits for ever using no CPU: a time-out
    # that reads as a starved compile, built again with the whole batch stopped (a reviewer's attack).
    with Box(tmp_path, Limits()) as box:
        src = box.tmp / "kernel.cu"
        src.write_text(f'#include "/dev/{device}"\n')
        t0 = time.monotonic()
        ok, log = build.compile_submission(src, box.work, "sm_90", timeout=6)
        took = time.monotonic() - t0
    assert not ok and took < 5 and "No such file" in log, (took, log)  # at once: no terminal in the jail
