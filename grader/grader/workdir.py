"""Work folders in the temp folder, and the sweep of those a killed grader left behind.

A grading keeps its plans, results, logs and the outputs of the code under test (256 MiB for one
dump of conv1d's large case) in a fresh folder, which it deletes when it ends: done, failed,
Ctrl-C or TERM. A grader killed with -9, or by the kernel's out-of-memory killer, cannot, and a TA
who stops a batch that way every week would fill the disk. So each folder holds a file naming the
process that made it (and the host, since a temp folder may be shared with containers whose
process numbers mean something else), and each new work folder first deletes those whose owner
is gone. A folder kept on purpose (`grade --keep`) drops that file and is never swept.

Code under test runs in a folder inside a work folder (new_jailed), never in the work folder itself:
a jail is handed the folder it runs in, and a program there could replace the owner file with a pipe
that the next sweep would block on, delete it (kept for good), or keep the folder from every sweep
(the folder becomes the jail's user's).
"""
import os
import socket
import stat
import tempfile
from pathlib import Path
from typing import Optional

from . import protocol

OWNER = ".kit-owner"
"""The file in a work folder that names its owner: "<pid> <hostname>"."""
PREFIX = "kit-"
"""Every work folder's name starts with this, so the sweep looks at nothing else."""


def new(prefix: str) -> Path:
    """A fresh work folder named <prefix>XXXXXXXX in the temp folder, owned by this process;
    first deletes the folders of owners that are gone."""
    assert prefix.startswith(PREFIX), prefix
    sweep()
    d = Path(tempfile.mkdtemp(prefix=prefix)).resolve()
    (d / OWNER).write_text(f"{os.getpid()} {socket.gethostname()}\n")
    return d


def new_jailed(prefix: str) -> Path:
    """A fresh folder `work` for code under test, inside a work folder of new(prefix) that stays the
    grader's; removed with it: protocol.clear(work.parent). The jail's user may go through the work
    folder to `work` (a jail is set up as that user), not list it."""
    top = new(prefix)
    os.chmod(top, 0o711)
    work = top / "work"
    work.mkdir()
    return work


def keep(d: Path) -> None:
    """Keeps `d` for good: no later sweep deletes it."""
    (d / OWNER).unlink(missing_ok=True)


def sweep(root: Optional[Path] = None) -> list:
    """Deletes the work folders in `root` (the temp folder) whose owner, a process of this host
    and user, no longer runs. Returns the folders deleted."""
    root = Path(root or tempfile.gettempdir())
    host, uid = socket.gethostname(), os.getuid()
    gone = []
    for d in root.glob(PREFIX + "*"):
        try:
            st = d.lstat()
        except OSError:
            continue  # gone meanwhile
        if not (stat.S_ISDIR(st.st_mode) and st.st_uid == uid):
            continue  # not a work folder, or not ours
        who = owner(d)  # None: one kept on purpose, or one being made right now
        if who is not None and who[1] == host and not _running(who[0]):
            protocol.clear(d)
            gone.append(d)
    return gone


def owner(d: Path) -> Optional[tuple]:
    """(pid, host) that the work folder `d`'s owner file names, or None. Read never through a link,
    never from a pipe (which would block the reader for good)."""
    try:
        pid_text, host = protocol.read_regular(d / OWNER, 256).decode().split()
        return int(pid_text), host
    except (ValueError, UnicodeDecodeError):
        return None


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: running
        return True
    return True
