"""Student archives (.zip, .tar.gz, .tar), opened without trusting them: an absolute path, a `..`,
a path more than MAX_DEPTH folders deep, a link or a device, more than MAX_FILES files or more than
MAX_BYTES bytes in all refuses the whole archive (Refused, saying why), before or while a byte of it is written.
A .tar.gz is gzip only, and its tar is read as a stream of at most twice MAX_BYTES (_Capped); a zip's list
of files is read only where it is at most MAX_LIST bytes (_zip_list_bytes)."""
from __future__ import annotations

import gzip
import io
import re
import stat
import struct
import tarfile
import zipfile
from pathlib import Path, PurePosixPath
from typing import Optional

MAX_FILES = 2000
MAX_BYTES = 64 << 20
MAX_DEPTH = 32
"""Folders a path in an archive may go down: a path a thousand folders deep is longer than a path
may be, and walking it recurses as deep."""
MAX_LIST = MAX_FILES << 10
"""Bytes of a zip's central directory (its list of files), 1 KiB per file allowed: zipfile reads the list
whole and keeps an object per file before the first file is looked at (a 15 MB list of 300,000 empty
files took 130 MB more of the grader's memory)."""
ARCHIVES = (".zip", ".tar.gz", ".tgz", ".tar")


def new_budget() -> dict:
    """What one entry's archives may unpack to, all of them together: extract() counts down."""
    return {"files": MAX_FILES, "bytes": MAX_BYTES}


class Refused(Exception):
    """An archive that is not opened; the message says why."""


def charge(budget: dict, files: int, nbytes: int, name: str) -> None:
    """Takes `files` files and `nbytes` bytes (at `name`) from an entry's budget (new_budget), refusing
    (Refused) past either."""
    budget["files"] -= files
    budget["bytes"] -= nbytes
    if budget["files"] < 0:
        raise Refused(f"it holds more than {MAX_FILES} files")
    if budget["bytes"] < 0:
        raise Refused(f"it unpacks to more than {MAX_BYTES >> 20} MiB (at {name})")


def is_archive(path: Path) -> bool:
    return path.name.lower().endswith(ARCHIVES)


def archive_stem(path: Path) -> str:
    low = path.name.lower()
    for ext in ARCHIVES:
        if low.endswith(ext):
            return path.name[:-len(ext)]
    return path.stem


class _Capped(io.RawIOBase):
    """A tar's bytes, after gzip, refused past `cap` in all: a header may declare a gigabyte (a long name,
    a pax record) that tarfile reads whole into memory before any limit on the members sees it."""

    def __init__(self, raw, cap: int):
        self.raw, self.left, self.cap = raw, cap, cap

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        want = self.left + 1 if n is None or n < 0 else min(n, self.left + 1)
        data = self.raw.read(want)
        if len(data) > self.left:
            raise Refused(f"it unpacks to more than {self.cap >> 20} MiB of tar")
        self.left -= len(data)
        return data


def _tar_bytes(archive: Path):
    """A .tar.gz's bytes through gzip (whatever else they are: tarfile would open bzip2 and xz too), or
    a .tar's; tarfile reads them as a stream (mode "r|") through _Capped."""
    return gzip.open(archive, "rb") if archive.name.lower().endswith((".gz", ".tgz")) else open(archive, "rb")


def _zip_list_bytes(archive: Path) -> int:
    """The most bytes zipfile may read as a zip's list of files: what its end record declares, or a
    ZIP64 end record (the one before its locator, or the one the locator points at: Pythons differ).
    0 where there is no end record (zipfile then says the file is not a zip)."""
    with open(archive, "rb") as f:
        size = f.seek(0, 2)
        start = max(0, size - 22 - 0xFFFF)  # the end record is 22 bytes and a comment of up to 64 KiB
        f.seek(start)
        tail = f.read()
        at = tail.rfind(b"PK\x05\x06", 0, max(0, len(tail) - 18))  # the last one with room for its 22 bytes
        if at < 0:
            return 0
        declared = struct.unpack_from("<L", tail, at + 12)[0]
        sizes = []
        locator_at = start + at - 20
        if locator_at >= 0:
            f.seek(locator_at)
            locator = f.read(20)
            if locator[:4] == b"PK\x06\x07":
                for record_at in (locator_at - 56, struct.unpack_from("<Q", locator, 8)[0]):
                    if 0 <= record_at < size:
                        f.seek(record_at)
                        record = f.read(56)
                        if len(record) == 56 and record[:4] == b"PK\x06\x06":
                            sizes.append(struct.unpack_from("<Q", record, 40)[0])
        if not sizes or declared != 0xFFFFFFFF:  # 0xFFFFFFFF: "in the ZIP64 record"
            sizes.append(declared)
        return max(sizes)


def _check_name(name: str) -> PurePosixPath:
    if "\\" in name or name.startswith("/") or re.match(r"^[A-Za-z]:", name):
        raise Refused(f"it holds an absolute path ({name})")
    p = PurePosixPath(name)
    if ".." in p.parts:
        raise Refused(f"it holds a path that leaves the archive ({name})")
    if len(p.parts) > MAX_DEPTH:
        raise Refused(f"it holds a path {len(p.parts) - 1} folders deep, more than {MAX_DEPTH} ({name[:60]}...)")
    return p


def extract(archive: Path, dest: Path, budget: Optional[dict] = None) -> None:
    """Extracts a .zip, .tar.gz or .tar into dest, refusing (Refused) anything unsafe. `budget`
    ({"files": n, "bytes": n}) is shared with the archives nested in the same entry."""
    budget = budget if budget is not None else new_budget()
    dest.mkdir(parents=True, exist_ok=True)

    def copy(src, target: Path, name: str, declared: int):
        if declared > budget["bytes"]:  # refused before a byte is written, and nothing taken
            charge(dict(budget), 0, declared, name)
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(target, "wb") as out:
            while True:
                chunk = src.read(1 << 16)
                if not chunk:
                    break
                charge(budget, 0, len(chunk), name)  # what is actually read counts, not what the header claims
                out.write(chunk)

    low = archive.name.lower()
    try:
        if low.endswith(".zip"):
            listed = _zip_list_bytes(archive)
            if listed > MAX_LIST:
                raise Refused(f"its list of files takes {listed / (1 << 20):.1f} MiB, more than the "
                              f"{MAX_LIST / (1 << 20):.1f} MiB that {MAX_FILES} files may")
            with zipfile.ZipFile(archive) as z:
                for info in z.infolist():
                    p = _check_name(info.filename)
                    mode = info.external_attr >> 16
                    if stat.S_ISLNK(mode):
                        raise Refused(f"it holds a symbolic link ({info.filename})")
                    charge(budget, 1, 0, info.filename)
                    if info.is_dir():
                        continue
                    with z.open(info) as src:
                        copy(src, dest.joinpath(*p.parts), info.filename, info.file_size)
        else:
            with _tar_bytes(archive) as raw, tarfile.open(fileobj=_Capped(raw, 2 * MAX_BYTES), mode="r|") as t:
                for m in t:
                    p = _check_name(m.name)
                    if m.issym() or m.islnk():
                        raise Refused(f"it holds a link ({m.name})")
                    if not (m.isfile() or m.isdir()):
                        raise Refused(f"it holds a device or special file ({m.name})")
                    charge(budget, 1, 0, m.name)
                    if m.isdir():
                        continue
                    src = t.extractfile(m)
                    if src is not None:
                        copy(src, dest.joinpath(*p.parts), m.name, m.size)
    except Refused:
        raise
    except Exception as e:  # whatever zipfile or tarfile raise on a file built to break them: this entry's
        # problem, never the class's (an encrypted zip raised RuntimeError, Deflate64 NotImplementedError,
        # a pax record declaring 10^23 bytes OverflowError, each out of the batch)
        raise Refused(f"it cannot be read as an archive ({type(e).__name__}: {e})") from None
