"""The disk's reserve (limits.Limits.disk_reserve_bytes): disk that no look at a run can count, a
deleted file held by a mapping alone or in flight in a socket, still cannot fill the disk holding the
work folder. Each test is an attack that succeeds without the reserve. The work folder is a disk of its
own (a tmpfs of 1 GiB, with a reserve of 768 MiB), so that no test beside it moves its free space.
Needs bubblewrap, gcc and root (to mount it)."""
import os
import shutil
import subprocess

import pytest

from grader import judged
from grader.limits import DiskLow, Limits
from jail_box import Box, small_limits

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None or shutil.which("gcc") is None,
                                reason="needs bubblewrap (apt-get install bubblewrap) and gcc")

@pytest.fixture
def reserved(tmp_path):
    """A jail with small limits whose work folder is a disk of 1 GiB with a reserve of 768 MiB: the
    attacks hold 480 MiB."""
    if os.geteuid() != 0:
        pytest.skip("needs root, to give the work folder a disk of its own")
    with Box(tmp_path, small_limits(memory_bytes=1 << 30, disk_reserve_bytes=768 << 20)) as b:
        mount = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1g,mode=0755", "kit-test-disk", str(b.work)],
                               capture_output=True, text=True)
        if mount.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {mount.stderr.strip()}")
        try:
            yield b
        finally:
            subprocess.run(["umount", "-l", str(b.work)], check=False)


def tempfile_free(path) -> int:
    s = os.statvfs(path)
    return s.f_bavail * s.f_frsize


HOLD = """
    /* Ten deleted files of 48 MiB, each written through `hold` and then kept by it alone, 100 ms apart. */
    static int attack(int (*hold)(int fd, size_t bytes)) {
        for (int f = 0; f < 10; f++) {
            int fd = open("held.bin", O_CREAT | O_RDWR | O_TRUNC, 0644);
            unlink("held.bin");
            if (fd < 0 || hold(fd, 48 << 20)) { printf("hold: %s\\n", strerror(errno)); return 1; }
            usleep(100000);
        }
        printf("held 480 MiB out of sight\\n");
        fflush(stdout);
        sleep(2);
        return 0;
    }
"""


def test_files_held_by_mappings_alone_cannot_fill_the_disk(reserved):
    # Mapped shared, written through the mapping, then closed: the file is in no folder and no
    # descriptor table, and a look cannot read a CUDA program's mappings without waiting on them.
    r = reserved.run(HOLD + """
        #include <sys/mman.h>
        static int by_mapping(int fd, size_t bytes) {
            if (ftruncate(fd, bytes)) return -1;
            char* p = mmap(0, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
            if (p == MAP_FAILED) return -1;
            for (size_t i = 0; i < bytes; i += 4096) p[i] = 1;
            return close(fd);
        }
        int main(void) { return attack(by_mapping); }""")
    assert "out of sight" not in r.output, r
    assert r.stopped_for.startswith("ran while the disk holding its work folder fell below"), r
    assert not judged.over_own_limit(judged.STOPPED + r.stopped_for)  # a batch runs it again, alone


def test_files_in_flight_in_a_socket_cannot_fill_the_disk(reserved):
    # Written, sent over a socket pair it never reads, then closed: the file's only reference is the
    # message in the socket's queue.
    r = reserved.run(HOLD + """
        static int pair[2];
        static int in_flight(int fd, size_t bytes) {
            static char buf[1 << 20];
            for (size_t i = 0; i < bytes; i += sizeof buf) if (write(fd, buf, sizeof buf) < 0) return -1;
            char c = 0, room[CMSG_SPACE(sizeof(int))];
            struct iovec iov = {&c, 1};
            struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = room, .msg_controllen = sizeof room};
            struct cmsghdr* h = CMSG_FIRSTHDR(&m);
            h->cmsg_level = SOL_SOCKET; h->cmsg_type = SCM_RIGHTS; h->cmsg_len = CMSG_LEN(sizeof(int));
            memcpy(CMSG_DATA(h), &fd, sizeof fd);
            if (sendmsg(pair[0], &m, 0) != 1) return -1;
            return close(fd);
        }
        int main(void) {
            if (socketpair(AF_UNIX, SOCK_DGRAM, 0, pair)) { printf("socketpair: %s\\n", strerror(errno)); return 1; }
            return attack(in_flight);
        }""")
    assert "out of sight" not in r.output, r
    assert r.stopped_for.startswith("ran while the disk holding its work folder fell below"), r


def test_nothing_is_run_on_a_disk_already_below_its_reserve_and_the_message_says_how_to_make_room(tmp_path):
    # A stop for the reserve must be the run's own doing: on a disk that is short before the run starts,
    # every run would be stopped, and each a student's runtime error.
    with Box(tmp_path, Limits(disk_reserve_bytes=tempfile_free(tmp_path) + (1 << 40))) as box:
        with pytest.raises(DiskLow, match=r"has less than [0-9.,]+ GiB free, .*: make room there, or point TMPDIR"):
            box.run("int main(void) { return 0; }")
