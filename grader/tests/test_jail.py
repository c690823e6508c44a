"""The jail (jail.py, limits.py, sandbox.run with a view), attacked by small C programs that try what a
hostile kernel.cu would: each test is an escape that must fail, and fails without the jail. Who the
jailed programs are, inside and outside: test_jail_user.py; the limits on what a run may use (processes,
memory, disk): test_jail_limits.py. Needs bubblewrap (tools/test.sh installs
it) and gcc; the GPU batch test grades the same attacks as kernel.cu files (fixtures/batch/hostile/)
on a GPU."""
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

from grader import build, jail, sandbox, tasks
from grader.limits import Limits
from jail_box import PRELUDE

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None or shutil.which("gcc") is None,
                                reason="needs bubblewrap (apt-get install bubblewrap) and gcc")


def test_a_jailed_program_can_neither_unmount_nor_mount_nor_make_a_namespace_of_its_own(box):
    r = box.run("""
        int main(void) {
            int undone = 0;
            const char* points[] = {"/tmp", "/proc", "/dev", "/etc/ld.so.cache", "/", 0};
            for (int i = 0; points[i]; i++) undone += umount2(points[i], MNT_DETACH) == 0;
            undone += mount("none", "/tmp", "tmpfs", 0, 0) == 0;
            undone += unshare(CLONE_NEWUSER) == 0;
            undone += unshare(CLONE_NEWNS) == 0;
            printf("undone %d\\n", undone);
            return 0;
        }""")
    assert r.returncode == 0, r.output
    assert "undone 0" in r.output


def test_a_jailed_program_sees_nothing_of_the_kit_the_class_the_outputs_or_the_tas_home(box, tmp_path):
    home = tmp_path / "home-of-the-ta"
    home.mkdir()
    (home / "secret.txt").write_text("the TA's")
    other = box.root / "0001-bob-conv1d"
    other.mkdir()
    (other / "kernel.cu").write_text("bob's")
    wanted = [tasks.ROOT / "reference" / "conv1d" / "kernel.cu", tasks.ROOT / "Makefile",
              tasks.ROOT / "assignments" / "conv1d" / "task.json", home / "secret.txt", other / "kernel.cu",
              Path("/etc/passwd"), Path(sys.executable)]
    opens = "".join(f'    if (open("{p}", O_RDONLY) >= 0) printf("read {p}\\n");\n' for p in wanted)
    r = box.run("int main(void) {\n" + opens + """
            DIR* d = opendir("/"); struct dirent* e;
            while ((e = readdir(d))) printf("top %s\\n", e->d_name);
            return 0;
        }""")
    assert r.returncode == 0, r.output
    assert "read " not in r.output
    top = sorted(line.split()[1] for line in r.output.splitlines() if line.startswith("top "))
    assert set(top) <= {".", "..", "dev", "proc", "tmp", "etc", "lib", "lib64", "usr", box.root.parts[1]}, top


def test_a_jailed_program_writes_only_its_own_work_folder_and_a_private_tmp(box, tmp_path):
    home = tmp_path / "home-of-the-ta"
    home.mkdir()
    # Outside /tmp nothing opens for writing; in /tmp (the jail's own, in memory) the host's stays untouched.
    targets = [tasks.ROOT / "pwned.txt", home / "pwned.txt", tasks.ROOT / "Makefile",
               box.jail.expose(box.compile("int main(void){return 0;}", "victim"))]
    in_tmp = [Path("/tmp/kit-escaped.txt"), box.root / "pwned.txt"]
    writes = "".join(f'    if (open("{p}", O_WRONLY | O_CREAT | O_APPEND, 0644) >= 0) printf("wrote {p}\\n");\n'
                     for p in targets) + "".join(f'    open("{p}", O_WRONLY | O_CREAT, 0644);\n' for p in in_tmp)
    r = box.run("int main(void) {\n" + writes + """
            printf("mine %d\\n", open("mine.txt", O_WRONLY | O_CREAT, 0644) >= 0);
            printf("tmp %d\\n", open("/tmp/scratch", O_WRONLY | O_CREAT, 0644) >= 0);
            return 0;
        }""")
    assert r.returncode == 0, r.output
    assert "wrote" not in r.output and "mine 1" in r.output and "tmp 1" in r.output
    assert not any(Path(t).exists() for t in targets[:2] + in_tmp)
    assert (box.work / "mine.txt").exists()


def test_a_jailed_program_has_no_network(box):
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    srv.settimeout(3)
    port = srv.getsockname()[1]
    got = []
    t = threading.Thread(target=lambda: got.append(_accept(srv)))
    t.start()
    r = box.run(f"""
        int main(void) {{
            struct sockaddr_in a = {{0}};
            a.sin_family = AF_INET; a.sin_port = htons({port}); a.sin_addr.s_addr = inet_addr("127.0.0.1");
            int s = socket(AF_INET, SOCK_STREAM, 0);
            printf("local %d\\n", connect(s, (struct sockaddr*)&a, sizeof a) == 0);
            a.sin_port = htons(53); a.sin_addr.s_addr = inet_addr("8.8.8.8");
            s = socket(AF_INET, SOCK_STREAM, 0);
            printf("outside %d\\n", connect(s, (struct sockaddr*)&a, sizeof a) == 0);
            return 0;
        }}""")
    t.join()
    srv.close()
    assert "local 0" in r.output and "outside 0" in r.output
    assert got == [None], "a connection reached the grader's machine"


def _accept(srv):
    try:
        return srv.accept()[1]
    except OSError:
        return None


def test_a_daemon_started_in_the_jail_does_not_outlive_the_run(box):
    r = box.run("""
        int main(int argc, char** argv) {
            if (argc > 1) { sleep(600); return 0; }
            if (fork() == 0) {
                setsid();
                if (fork() == 0) { execl("/proc/self/exe", "kit_daemon_test", "x", (char*)0); _exit(1); }
                _exit(0);
            }
            sleep(1);
            return 0;
        }""")
    assert r.returncode == 0, r.output
    left = subprocess.run(["pgrep", "-f", "kit_daemon_test"], capture_output=True, text=True).stdout.split()
    assert not left, f"a process outlived its jail: {left}"


def test_a_results_file_that_is_a_link_or_a_pipe_reads_as_empty(tmp_path):
    from grader import protocol
    secret = tmp_path / "ta-file.txt"
    secret.write_text('{"event": "done"}\n')
    (tmp_path / "link.jsonl").symlink_to(secret)
    os.mkfifo(tmp_path / "pipe.jsonl")
    assert protocol.read_results(tmp_path / "link.jsonl") == []
    assert protocol.read_results(tmp_path / "pipe.jsonl") == []  # and returns at once


def test_the_run_view_holds_no_cublas_even_where_the_machine_has_it(box):
    r = box.run("""
        int main(void) {
            const char* libs[] = {"libcublas.so", "libcublas.so.13", "libcublas.so.12", "libcublasLt.so.13", 0};
            for (int i = 0; libs[i]; i++) if (dlopen(libs[i], RTLD_NOW)) printf("loaded %s\\n", libs[i]);
            return 0;
        }""")
    assert r.returncode == 0, r.output
    assert "loaded" not in r.output
    assert not any("cublas" in lib for lib in box.jail.runtime)


def test_the_profile_view_adds_ncu_s_folder_and_the_system_files_read_only_and_nothing_of_the_kit(box):
    ncu = box.root / "nsight-compute"
    ncu.mkdir()
    (ncu / "ncu").write_text("#!/bin/sh\n")
    os.chmod(ncu, 0o755)
    os.chmod(ncu / "ncu", 0o755)
    box.jail.profiler = ncu
    body = f"""
        int main(void) {{
            printf("ncu %d\\n", access("{ncu}/ncu", X_OK) == 0);
            printf("usr %d\\n", access("/usr/bin", R_OK) == 0);
            printf("kit %d\\n", access("{tasks.ROOT}/Makefile", F_OK) == 0);
            int fd = open("{ncu}/planted", O_CREAT | O_WRONLY, 0644);
            printf("write %d\\n", fd >= 0);
            return 0;
        }}"""
    r = box.run(body, view="profile")
    assert r.returncode == 0, r.output
    assert "ncu 1" in r.output and "usr 1" in r.output and "kit 0" in r.output and "write 0" in r.output
    r = box.run(body, view="run")  # the other views never see it
    assert "ncu 0" in r.output and "usr 0" in r.output


def test_compute_sanitizer_s_folder_runs_in_the_sanitize_view_with_the_libraries_its_programs_load(box):
    # compute-sanitizer loads libraries the runner does not (libutil): without them the sanitized run
    # of every submission ended with exit 127, misgraded as a runtime error. Here the tool loads libm,
    # which the box's C runner does not.
    tool = box.root / "compute-sanitizer"
    tool.mkdir()
    src = box.tmp / "tool.c"
    src.write_text(PRELUDE + "#include <math.h>\nint main(int c, char** v) { (void)v; return (int)sqrt(c - 1); }\n")
    subprocess.run(["gcc", "-o", str(tool / "compute-sanitizer"), str(src), "-Wl,--no-as-needed", "-lm"],
                   check=True, capture_output=True)
    os.chmod(tool, 0o755)
    box.jail.sanitizer = tool
    run = sandbox.run([str(tool / "compute-sanitizer")], box.work, box.tmp / "log", timeout=30, view="sanitize")
    assert run.returncode == 0, run.output
    assert "libm.so" in " ".join(jail.tool_libraries(tool))
    run = sandbox.run([str(tool / "compute-sanitizer")], box.work, box.tmp / "log", timeout=30, view="run")
    assert run.returncode != 0 and "No such file" in run.output  # the other views never see it


@pytest.mark.skipif(os.geteuid() != 0, reason="the jail runs as another user only for a grader run as root")
def test_a_private_temp_folder_is_named_with_the_fix_before_any_submission_runs(monkeypatch):
    """A cluster job's TMPDIR is often its own, mode 0700: each work folder is made there, and the
    jail's user could not reach it (bubblewrap: "Can't find source path ...: Permission denied",
    which read as a machine without user namespaces)."""
    private = Path(tempfile.mkdtemp(prefix="kit-test-job-tmp-"))  # mode 0700, in the open /tmp
    try:
        monkeypatch.setattr(tempfile, "tempdir", str(private))
        root = Path(tempfile.mkdtemp(prefix="kit-test-jail-"))
        with pytest.raises(jail.JailError) as e:
            sandbox.open_jail(root, tasks.ROOT / "harness" / "include", None, Limits())
        assert f"cannot pass through {private}," in str(e.value)
        assert "point TMPDIR at a folder every user can enter" in str(e.value)
        assert f"chmod o+x {private}" in str(e.value)
    finally:
        shutil.rmtree(private, ignore_errors=True)


def _stand_in_nm(box, monkeypatch, script: str) -> None:
    """build.NM made a shell script the jail can read, and an empty kernel.o in the work folder."""
    fake = box.tmp / "nm"
    fake.write_text(f"#!/bin/sh\n{script}\n")
    fake.chmod(0o755)
    monkeypatch.setattr(build, "NM", str(box.jail.expose(fake)))
    (box.work / "kernel.o").write_bytes(b"")


def test_the_symbol_scan_of_a_submission_s_object_runs_in_the_jail_never_as_the_ta(box, monkeypatch):
    """nm's demangler parses names the submission chose (an asm label can be any string): a flaw in
    it must not run as the TA. Here a stand-in nm lists, as a cuBLAS call, the user it ran as."""
    _stand_in_nm(box, monkeypatch, 'echo "0000000000000000 T cublas_run_by_uid_$(id -u)"')
    assert [f.call for f in build.scan_forbidden(box.work / "kernel.o")] == [f"cublas_run_by_uid_{jail.NOBODY}"]


def test_an_object_whose_symbols_cannot_be_listed_goes_no_further(box, monkeypatch):
    """A listing cut short (nm failing on a malformed object, or stopped at a limit) would leave
    forbidden calls unread: it is a build error, never an empty list."""
    _stand_in_nm(box, monkeypatch, 'echo "0000000000000000 T kernel_ok"\n'
                                    'echo "nm: kernel.o: file format not recognized" >&2\nexit 1')
    with pytest.raises(build.ScanError, match="nm exited 1: nm: kernel.o: file format not recognized"):
        build.scan_forbidden(box.work / "kernel.o")


def test_a_death_by_a_signal_in_the_jail_comes_back_as_that_signal(box):
    assert box.run("int main(void) { raise(SIGSEGV); return 0; }").returncode == -11
    assert box.run("int main(void) { return 5; }").returncode == 5


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc (the CUDA Toolkit) on PATH")
def test_in_the_compile_view_kernel_cu_compiles_but_cannot_include_the_reference(box, tmp_path):
    fine, thief = tmp_path / "fine.cu", tmp_path / "thief.cu"
    fine.write_text('#include "cuda_check.cuh"\nvoid trmm(int n, const double* A, double* B) { }\n')
    thief.write_text(f'#include "{tasks.ROOT / "reference" / "trmm" / "kernel.cu"}"\n')
    results = {}
    for src in (fine, thief):
        work = box.root / src.stem
        work.mkdir()
        results[src.stem] = build.compile_submission(src, work, "sm_90", 300)
    assert results["fine"][0] is True, results["fine"][1]
    assert results["thief"][0] is False and "No such file" in results["thief"][1]
    assert build.scan_forbidden(box.root / "fine" / "kernel.o") == []  # the system's nm, in the same view
    assert "trmm" in (box.root / "fine" / "symbols.txt").read_text()


def test_in_the_compile_view_a_forbidden_library_cannot_be_embedded_in_the_object(box, tmp_path):
    """An asm block's `.incbin` puts any file the compiler can read into the object, in a section of the
    program's choosing that the scan of its strings never reads: cuBLAS's GPU code would then be in the
    runner, for it to load through a driver function looked up by a name built at run time. There the
    forbidden libraries are /dev/null: the assembler finds no file to embed (or nothing in it)."""
    libs = [f for f in box.jail.emptied if os.path.getsize(f) > 4 << 20]
    if not libs:
        pytest.skip("this toolkit has no forbidden library of 4 MiB or more (cuBLAS, cuFFT, ...)")
    lib = min(libs, key=os.path.getsize)
    src = tmp_path / "kernel.cu"
    src.write_text(f'asm(".section .kit_blob, \\"a\\"\\n.incbin \\"{lib}\\"\\n.previous");\n'
                   'void trmm(int n, const double* A, double* B) { }\n')
    work = box.root / "embed"
    work.mkdir()
    ok, messages = build.compile_submission(src, work, "sm_90", 300)
    if not ok:
        assert f"file not found: {lib}" in messages, messages
        return
    size = (work / "kernel.o").stat().st_size
    assert size < 1 << 20, f"{size} bytes: {lib} ({os.path.getsize(lib)} bytes) went into the object"


def test_without_bubblewrap_there_is_no_jail_and_the_message_says_how_to_get_one(monkeypatch):
    real = shutil.which
    monkeypatch.setattr(shutil, "which", lambda name: None if name == "bwrap" else real(name))
    with pytest.raises(jail.JailError, match="apt-get install bubblewrap"):
        jail.find(tasks.ROOT / "harness" / "include")


def test_gradescope_in_a_container_without_user_namespaces_refuses_and_runs_nothing(tmp_path):
    """Docker's default seccomp profile, as Gradescope uses it, refuses new user namespaces: the
    grader runs here inside a sandbox that refuses them too, and must not run the submission open."""
    root = tmp_path / "autograder"
    (root / "submission").mkdir(parents=True)
    marker = tmp_path / "student-code-ran"
    (root / "submission" / "kernel.cu").write_text(
        f'#include <cstdio>\nstatic int x = (std::fopen("{marker}", "w"), 0);\n'
        "void conv1d(int n, int w, const float* N, const float* M, float* P) { }\n")
    cmd = ["bwrap", "--dev-bind", "/", "/", "--unshare-user", "--uid", "1000", "--disable-userns", "--",
           sys.executable, "-m", "grader", "gradescope", "--root", str(root), "--assignments", "conv1d"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, PYTHONPATH=str(tasks.ROOT / "grader")))
    assert r.returncode == 2, r.stderr
    assert "no jail" in r.stderr and "namespaces" in r.stderr
    results = (root / "results" / "results.json").read_text()
    assert "not run" in results and '"score": 0' in results
    assert not marker.exists()


@pytest.mark.skipif(shutil.which("nvcc") is None or not os.access("/usr/local/lib", os.W_OK),
                    reason="needs nvcc on PATH and a /usr/local this test may write in (root)")
def test_copies_of_the_math_libraries_beside_the_toolkit_in_use_cannot_be_embedded_in_the_object(tmp_path):
    """The compile view empties the forbidden libraries of the toolkit in use and of the system's
    library folders. Another toolkit (/usr/local/cuda-12.x) and pip's NVIDIA wheels
    (python3.x/dist-packages/nvidia/cublas/lib) hold copies too, and `.incbin` put those in the object."""
    from jail_box import Box, small_limits
    toolkit = Path(tempfile.mkdtemp(prefix="cuda-kit-test-", dir="/usr/local"))
    wheels = Path(tempfile.mkdtemp(prefix="python3-kit-test-", dir="/usr/local/lib"))
    copies = [toolkit / "lib64" / "libcublas.so.12", wheels / "dist-packages" / "nvidia" / "cublas" / "lib" / "libcublas.so.12"]
    b = None
    try:
        for f in copies:
            f.parent.mkdir(parents=True)
            f.write_bytes(b"cuBLAS's GPU code " * 100_000)
            for d in (toolkit, wheels, *f.parents):
                if str(d).startswith(("/usr/local/cuda-kit-test-", "/usr/local/lib/python3-kit-test-")):
                    os.chmod(d, 0o755)
            os.chmod(f, 0o644)
        b = Box(tmp_path, small_limits())
        for i, f in enumerate(copies):
            src = tmp_path / f"embed{i}.cu"
            src.write_text(f'asm(".section .kit_blob, \\"a\\"\\n.incbin \\"{f}\\"\\n.previous");\n'
                           'void trmm(int n, const double* A, double* B) { }\n')
            work = b.root / f"embed{i}"
            work.mkdir()
            ok, messages = build.compile_submission(src, work, "sm_90", 300)
            assert not ok or (work / "kernel.o").stat().st_size < 1 << 20, f"{f} went into the object"
    finally:
        sandbox.confine(None)
        if b is not None:
            shutil.rmtree(b.root, ignore_errors=True)
        shutil.rmtree(toolkit, ignore_errors=True)
        shutil.rmtree(wheels, ignore_errors=True)


@pytest.mark.skipif(shutil.which("nvcc") is None or not os.access("/usr/local", os.W_OK),
                    reason="needs nvcc on PATH and a /usr/local this test may write in (root)")
@pytest.mark.parametrize("nvcc_on_path", ["the toolkit's own", "a wrapper script beside the kit"])
def test_a_kit_installed_under_usr_local_stays_hidden_from_the_compile_and_profile_views(tmp_path, monkeypatch,
                                                                                        nvcc_on_path):
    """The compile view binds /usr whole: a kit installed in /usr/local (with its references, its task
    files and hidden cases, a class or outputs kept beside it) would be #include-able there. Where the
    nvcc on PATH is a wrapper script (Debian's CUDA images put one in /usr/local/bin), its folder's
    parent is not the toolkit: bound as if it were, it showed the kit again."""
    top = Path(tempfile.mkdtemp(prefix="kit-installed-", dir="/usr/local"))
    kit = top / "kit"
    root = Path(tempfile.mkdtemp(prefix="kit-test-jail-"))
    try:
        kit.mkdir()
        if nvcc_on_path == "a wrapper script beside the kit":  # as /usr/local/bin/nvcc beside /usr/local/kit
            (top / "bin").mkdir()
            (top / "bin" / "nvcc").write_text(f'#!/bin/sh\nexec {jail.toolkit_root() / "bin" / "nvcc"} "$@"\n')
            (top / "bin" / "nvcc").chmod(0o755)
            monkeypatch.setenv("PATH", f"{top / 'bin'}:{os.environ['PATH']}")
            assert shutil.which("nvcc") == str(top / "bin" / "nvcc")
        (kit / "reference" / "trmm").mkdir(parents=True)
        (kit / "reference" / "trmm" / "kernel.cu").write_text("void trmm(int n, const double* A, double* B) { }\n")
        os.chmod(top, 0o755)
        os.chmod(kit, 0o755)
        j = sandbox.open_jail(root, tasks.ROOT / "harness" / "include", None, Limits(), hidden=(kit,))
        fine, thief = tmp_path / "fine.cu", tmp_path / "thief.cu"
        fine.write_text('#include "cuda_check.cuh"\n#include <vector>\nvoid trmm(int n, const double* A, double* B) { }\n')
        thief.write_text(f'#include "{kit / "reference" / "trmm" / "kernel.cu"}"\n')
        results = {}
        for src in (fine, thief):
            work = root / src.stem
            work.mkdir()
            results[src.stem] = build.compile_submission(src, work, "sm_90", 300)
        assert results["fine"][0] is True, results["fine"][1]  # the toolkit and /usr are still there
        assert results["thief"][0] is False and "No such file" in results["thief"][1]
        j.profiler = root / "no-ncu"  # the profile view binds the system folders too
        look = root / "look"
        look.mkdir()
        r = sandbox.run(["/bin/sh", "-c", f"ls {kit}; cat {kit}/reference/trmm/kernel.cu; echo end"], look,
                        root / "look.log", timeout=30, view="profile")
        assert "end" in r.output and "void trmm" not in r.output, r.output
    finally:
        sandbox.confine(None)
        shutil.rmtree(top, ignore_errors=True)
        shutil.rmtree(root, ignore_errors=True)
