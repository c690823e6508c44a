"""A jail for tests (test_jail.py, test_jail_limits.py, test_jail_user.py): small C programs compiled
with gcc and run in it as a submission's runner is, in one submission's work folder."""
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

from grader import jail, protocol, sandbox, tasks
from grader.limits import Limits

PRELUDE = """#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <dlfcn.h>
#include <unistd.h>

/* Writes `files` files of `mib` MiB in the current folder, a MiB at a time, flushed, 20 ms apart: slow
   enough for the grader's looks at the work folder (every quarter second) to see it grow. */
static int fill(int files, int mib) {
    static char buf[1 << 20];
    for (int f = 0; f < files; f++) {
        char name[32];
        snprintf(name, sizeof name, "fill-%d.bin", f);
        FILE* out = fopen(name, "wb");
        if (!out) return -1;
        for (int i = 0; i < mib; i++) { fwrite(buf, 1, sizeof buf, out); fflush(out); usleep(20000); }
        fclose(out);
    }
    return 0;
}

/* Writes up to `mib` MiB into the file `path` at once; the MiB written. */
static long fill_at(const char* path, long mib) {
    static char buf[1 << 20];
    memset(buf, 1, sizeof buf);
    int fd = open(path, O_CREAT | O_WRONLY, 0644);
    long n = 0;
    while (fd >= 0 && n < mib && write(fd, buf, sizeof buf) == sizeof buf) n++;
    return n;
}

/* Makes `levels` folders named `name`, each in the last, and goes down into the deepest. */
static int nest(const char* name, int levels) {
    for (int i = 0; i < levels; i++) { mkdir(name, 0755); if (chdir(name)) return -1; }
    return 0;
}
"""


class Box:
    """A jail with the C runtime of its test programs, and one submission's work folder."""

    def __init__(self, tmp: Path, limits: Limits):
        self.tmp = tmp
        # As a batch's work root: in the temp folder itself, where the jailed user can go through.
        self.root = Path(tempfile.mkdtemp(prefix="kit-test-jail-"))
        probe = self.compile("int main(void) { return 0; }", "probe")
        self.jail = sandbox.open_jail(self.root, tasks.ROOT / "harness" / "include", None, limits)
        self.jail.runtime = jail.runtime_libraries(probe)
        self.work = self.root / "0000-mallory-conv1d"
        self.work.mkdir()

    def compile(self, body: str, name: str = "attack") -> Path:
        src = self.tmp / f"{name}.c"
        src.write_text(PRELUDE + textwrap.dedent(body))
        exe = self.tmp / name
        subprocess.run(["gcc", "-O1", "-o", str(exe), str(src)], check=True, capture_output=True)
        return exe

    def close(self) -> None:
        """The jail given up and its work root removed."""
        sandbox.confine(None)
        protocol.clear(self.root)

    def __enter__(self) -> "Box":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def run(self, body: str, timeout: float = 30, view: str = "run") -> sandbox.Run:
        self.runs = getattr(self, "runs", 0) + 1
        exe = self.jail.expose(self.compile(body, f"attack{self.runs}"))
        return sandbox.run([str(exe)], self.work, self.tmp / "log", timeout=timeout, view=view, read_only=(exe,))


def small_limits(**changes) -> Limits:
    """Limits small enough for the tests to reach them quickly, with `changes` (Limits' fields)."""
    return Limits(**{**dict(processes=64, memory_bytes=256 << 20, disk_bytes=64 << 20, files=500, tmp_bytes=16 << 20),
                     **changes})


SYSTEM_PYTHON = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable
"""A Python another user can run where the tests run as root (a virtual environment's may live in
root's home); what runs on it needs only the standard library."""


def as_user(uid: int):
    """A preexec_fn: the child runs as uid and gid `uid`, with no supplementary groups."""
    def drop():
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
    return drop
