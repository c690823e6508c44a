"""A class's submissions: one entry per student in a folder, each a folder, a .zip or a .tar.gz,
plain or in Gradescope's or an LMS's export layout, holding kernel.cu files for some assignments.

Which assignment a .cu file is for, first rule that decides:
  1. a folder on its path named like the assignment (trmm/kernel.cu, hw/Trmm/src/kernel.cu);
  2. its file name: the assignment's name, alone or joined with _ or - (trmm.cu, trmm_kernel.cu,
     kernel-trmm.cu);
  3. the entry point it defines (a .cu defining `void trmm(...) {` is for trmm), when it defines
     exactly one assignment's.
Where two files claim one assignment, one named kernel.cu wins, then the shorter path; the entry
notes the others. Files no rule places are noted and not graded. An entry with no file for any
assignment is listed as "nothing gradeable", with the reason.

Layouts recognised:
  - a folder or archive per student, named after the student (alice/, bob.zip, carol.tar.gz);
  - Gradescope's "Export Submissions": submission_<id>/ folders beside a submission_metadata.yml
    that names each folder's submitters (the whole export may also be one .zip in the folder);
  - Canvas's bulk download: files named <student>_<late_>?<userid>_<submissionid>_<file> (grouped
    by student; a file may itself be a .zip or a .tar.gz);
  - Moodle's: folders named "<Full Name>_<id>_assignsubmission_file_".

Archives are opened by archives.extract, which trusts nothing in them.
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Optional

from . import cpp_text
from .archives import MAX_DEPTH, Refused, archive_stem, charge, extract, is_archive, new_budget

MAX_SOURCE_BYTES = 4 << 20
"""A .cu file larger than this is not a kernel.cu (noted, not graded)."""
_CANVAS = re.compile(r"^(?P<student>[A-Za-z0-9]+)_(?:late_)?(?P<uid>\d+)_(?P<sub>\d+)_(?P<file>.+)$", re.I)
_MOODLE = re.compile(r"^(?P<name>.+?)_(?P<uid>\d+)_assignsubmission_\w*$")


@dataclass
class Member:
    id: str
    """Who, as the gradebook names them (Gradescope's SID or email, the LMS's user, the entry's name)."""
    name: str = ""
    email: str = ""


@dataclass
class Entry:
    student: str
    """The entry's id: a file-name-safe word, unique in the batch (records/<student>/...)."""
    source: str
    """What it came from, relative to the submissions folder."""
    layout: str
    """folder, zip, tar.gz, gradescope, canvas or moodle."""
    members: list = field(default_factory=list)
    """The students it belongs to (several for a group submission); each gets a gradebook row."""
    files: dict = field(default_factory=dict)
    """assignment -> the .cu file graded for it (extracted under the staging folder)."""
    shown: dict = field(default_factory=dict)
    """assignment -> that file's path as the student named it, inside the entry."""
    notes: list = field(default_factory=list)
    """What the TA should know: ignored files, refused archives, ambiguities."""
    problem: str = ""
    """Why nothing is gradeable ("" when something is)."""

    @property
    def name(self) -> str:
        return " & ".join(m.name or m.id for m in self.members) or self.student


def sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _fresh(path: Path) -> Path:
    """path, or path-2, path-3, ... (before its suffix) where it is taken: names that differ only in letters safe_id drops
    (王伟.zip and 李娜.zip, Zoë and Zoé) get folders of their own."""
    k, out = 2, path
    while out.exists():
        out, k = path.with_name(f"{path.stem}-{k}{path.suffix}"), k + 1
    return out


def safe_id(text: str) -> str:
    word = re.sub(r"[^A-Za-z0-9._-]+", "_", text.strip()).strip("._-")
    return word[:80] or "student"


# ---------------------------------------------------------------------------------------------
# Which file is for which assignment.

def entry_name(entry_point: str) -> str:
    """The function name in an entry point's signature: `void trmm(int n, ...)` -> trmm."""
    return entry_point.split("(")[0].split()[-1]


def assign(files: list, entry_points: dict) -> tuple:
    """({assignment: (file, shown path)}, notes) for the .cu files found in an entry, given as
    (path, path inside the entry); entry_points maps each assignment to its entry point."""
    names = {a.lower(): a for a in entry_points}
    claims = {}  # assignment -> [(rule, file, shown)]
    notes = []
    for f, rel in files:
        rel = PurePosixPath(rel)
        if f.stat().st_size > MAX_SOURCE_BYTES:
            notes.append(f"{rel}: larger than {MAX_SOURCE_BYTES >> 20} MiB, not graded")
            continue
        found, rule = None, 0
        for part in reversed(rel.parts[:-1]):  # 1. the nearest folder named like an assignment
            if part.lower() in names:
                found, rule = names[part.lower()], 1
                break
        if not found:  # 2. the file name: the longest assignment name in it, as a whole word
            stem = PurePosixPath(rel.name).stem.lower()
            hits = [a for low, a in names.items()
                    if re.search(r"(^|[_\-. ])" + re.escape(low) + r"($|[_\-. ])", stem)]
            longest = [a for a in hits if len(a) == max(map(len, hits))] if hits else []
            if len(longest) == 1:
                found, rule = longest[0], 2
        if not found:  # 3. the entry point it defines
            text = cpp_text.as_preprocessed(f.read_text(errors="replace"))
            defined = [a for a, ep in entry_points.items()
                       # no parenthesis inside the parameter list: with one allowed, text like
                       # trmm(trmm(trmm(... took quadratic time (a parameter list holds none)
                       if re.search(r"\b" + re.escape(entry_name(ep)) + r"\s*\([^;{}()]*\)\s*\{", text)]
            if len(defined) == 1:
                found, rule = defined[0], 3
            elif len(defined) > 1:
                notes.append(f"{rel}: defines the entry points of {', '.join(defined)}; put it in a folder "
                             f"named after one assignment; not graded")
                continue
        if not found:
            notes.append(f"{rel}: not named after an assignment and defines no entry point; not graded")
            continue
        claims.setdefault(found, []).append((rule, f, rel))
    chosen = {}
    for a, cands in claims.items():
        cands.sort(key=lambda c: (c[0], c[2].name != "kernel.cu", len(c[2].parts), str(c[2])))
        chosen[a] = (cands[0][1], str(cands[0][2]))
        for _, _, other in cands[1:]:
            notes.append(f"{other}: another file for {a}; graded {cands[0][2]} instead")
    return chosen, notes


def walk(root: Path) -> tuple:
    """(files, too_deep): the regular files under root in a stable order, skipping links and hidden
    names (.git, __MACOSX); and the folders not entered for lying more than MAX_DEPTH below root. One
    loop, no recursion: 1,200 nested folders beside kernel.cu raised RecursionError out of a walk that
    recursed (pathlib's, before Python 3.12)."""
    files, too_deep = [], []
    stack = [(str(root), 0)]
    while stack:
        folder, depth = stack.pop()
        try:
            with os.scandir(folder) as it:
                found = list(it)
        except OSError:
            continue
        for e in found:
            if e.name.startswith((".", "__MACOSX")) or e.is_symlink():
                continue
            if e.is_dir(follow_symlinks=False):
                if depth < MAX_DEPTH:
                    stack.append((e.path, depth + 1))
                else:
                    too_deep.append(Path(e.path))
            elif e.is_file(follow_symlinks=False):
                files.append(Path(e.path))
    return sorted(files), sorted(too_deep)


def sources(files: list) -> list:
    """The .cu files among `files`."""
    return [p for p in files if p.suffix.lower() == ".cu"]


def fill(entry: Entry, root: Path, entry_points: dict, staging: Path) -> Entry:
    """Places the entry's .cu files, those of the archives inside it too (one level, unpacked under
    staging, never beside the student's files); sets entry.problem when nothing is gradeable, or when
    its files cannot be read."""
    try:
        return _fill(entry, root, entry_points, staging)
    except OSError as e:
        entry.problem = f"nothing gradeable: its files could not be read ({type(e).__name__})"
        return entry


def _fill(entry: Entry, root: Path, entry_points: dict, staging: Path) -> Entry:
    budget = new_budget()
    found, too_deep = walk(root)
    entry.notes += [f"{d.relative_to(root)}: more than {MAX_DEPTH} folders deep, not read" for d in too_deep[:1]]
    files = [(f, str(f.relative_to(root))) for f in sources(found)]
    for arch in [p for p in found if is_archive(p)]:
        rel = arch.relative_to(root)
        inner = _fresh(staging / safe_id(str(rel)))
        try:
            extract(arch, inner, budget)
        except Refused as e:
            entry.notes.append(f"{rel}: archive refused: {e}")
            continue
        inside, too_deep = walk(inner)
        entry.notes += [f"{rel}/{d.relative_to(inner)}: more than {MAX_DEPTH} folders deep, not read"
                        for d in too_deep[:1]]
        files += [(f, f"{rel}/{f.relative_to(inner)}") for f in sources(inside)]
    chosen, notes = assign(files, entry_points)
    entry.notes += notes
    for a, (f, shown) in sorted(chosen.items()):
        entry.files[a] = f
        entry.shown[a] = shown
    if not chosen:
        refused = [n for n in entry.notes if "refused" in n]
        if refused:
            entry.problem = "nothing gradeable: " + refused[0]
        elif not files:
            entry.problem = "nothing gradeable: no .cu file in it"
        else:
            entry.problem = ("nothing gradeable: no .cu file is named after an assignment or defines an "
                             "entry point (" + ", ".join(sorted(entry_points)) + ")")
    return entry


# ---------------------------------------------------------------------------------------------
# The submissions folder.

def gradescope_metadata(path: Path) -> dict:
    """submission folder -> [Member] from Gradescope's submission_metadata.yml (its own small YAML
    subset, read without a YAML library: the grader is standard-library only)."""
    out, current, member = {}, None, None
    for raw in path.read_text(errors="replace").splitlines():
        if not raw.strip() or raw.startswith(("---", "#")):
            continue
        indent = len(raw) - len(raw.lstrip())
        line = raw.strip()
        if indent == 0 and line.endswith(":"):
            current, member = line[:-1].strip().strip("'\""), None
            out[current] = []
            continue
        if current is None:
            continue
        m = re.match(r"^(-\s+)?:?(name|sid|email):\s*(.*)$", line)
        if m:
            value = m.group(3).strip().strip("'\"")
            if m.group(1) or member is None:
                member = Member("")
                out[current].append(member)
            setattr(member, {"sid": "id"}.get(m.group(2), m.group(2)), value)
        elif line.startswith("-") and ":submitters:" not in line:
            member = None
    # Without an SID, an email's local part names the student, unless another's is the same (bob@uni.edu
    # and a bob@gmail.com enrolled beside him): then the whole address does, or the gradebooks would hold
    # two rows for "bob" and the LMS would give one of the two grades to both.
    members = [m for ms in out.values() for m in ms]
    local = [m.email.split("@")[0] if m.email and not m.id else "" for m in members]
    taken = Counter((m.id or part or m.name).lower() for m, part in zip(members, local))
    for m, part in zip(members, local):
        m.id = m.id or (m.email if part and taken[part.lower()] > 1 else part) or m.name
    return out


def _find_export(root: Path) -> Optional[Path]:
    """The folder holding submission_metadata.yml: root itself or its only subfolder."""
    if (root / "submission_metadata.yml").is_file():
        return root
    subs = [p for p in root.iterdir() if p.is_dir() and not p.name.startswith((".", "__MACOSX"))]
    if len(subs) == 1 and (subs[0] / "submission_metadata.yml").is_file():
        return subs[0]
    return None


def discover(folder: Path, entry_points: dict, staging: Path) -> list:
    """Every entry in the submissions folder, with its files placed (see the module's doc).
    Archives are unpacked under staging, which the caller keeps out of the submissions' reach."""
    folder = Path(folder)
    staging.mkdir(parents=True, exist_ok=True)
    raw = []  # (student, source, layout, root or None, members, notes, problem)

    def add_export(export: Path, source_prefix: str):
        meta = gradescope_metadata(export / "submission_metadata.yml")
        for sub in sorted(p for p in export.iterdir() if p.is_dir() and not p.name.startswith(".")):
            members = meta.get(sub.name) or [Member(sub.name)]
            raw.append((members[0].id, f"{source_prefix}{sub.name}", "gradescope", sub, members, [], ""))
        for missing in sorted(set(meta) - {p.name for p in export.iterdir()}):
            members = meta[missing]
            raw.append((members[0].id if members else missing, f"{source_prefix}{missing}", "gradescope", None,
                        members, [], "nothing gradeable: Gradescope lists this submission but its folder is missing"))

    export = _find_export(folder)
    if export is not None:
        add_export(export, "" if export == folder else f"{export.name}/")
        items = []
    else:
        items = sorted(p for p in folder.iterdir() if not p.name.startswith(".") and p.name != "__MACOSX")
    canvas = {}
    for item in items:
        if item.is_symlink():
            raw.append((item.name, item.name, "link", None, [Member(item.name)], [],
                        "nothing gradeable: a symbolic link, not followed"))
        elif item.is_dir():
            m = _MOODLE.match(item.name)
            if m:
                raw.append((m.group("name"), item.name, "moodle", item, [Member(m.group("uid"), m.group("name"))], [], ""))
            else:
                raw.append((item.name, item.name, "folder", item, [Member(item.name)], [], ""))
        elif item.is_file() and (is_archive(item) or item.suffix.lower() == ".cu"):
            m = _CANVAS.match(item.name)
            if m:
                canvas.setdefault((m.group("student"), m.group("uid")), []).append((item, m.group("file")))
            elif is_archive(item):
                dest = _fresh(staging / "archives" / safe_id(item.name))
                try:
                    extract(item, dest)
                except Refused as e:
                    raw.append((archive_stem(item), item.name, _layout(item), None, [Member(archive_stem(item))], [],
                                f"nothing gradeable: the archive was refused: {e}"))
                    continue
                # Gradescope's export downloaded as one archive is the whole class: read as such only
                # when it is all the folder holds. A student's archive is that student's entry, whatever
                # metadata it carries (its own submission_metadata.yml would name other students).
                inner = _find_export(dest) if len(items) == 1 else None
                if inner is not None:
                    add_export(inner, f"{item.name}:")
                    continue
                raw.append((archive_stem(item), item.name, _layout(item), dest, [Member(archive_stem(item))], [], ""))
            elif item.stat().st_size > MAX_SOURCE_BYTES:  # not copied: a file of any size could fill the disk
                raw.append((item.stem, item.name, "file", None, [Member(item.stem)], [],
                            f"nothing gradeable: larger than {MAX_SOURCE_BYTES >> 20} MiB"))
            else:  # a lone .cu named after the student
                dest = _fresh(staging / "loose" / safe_id(item.name))
                dest.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(item, dest / "kernel.cu")
                raw.append((item.stem, item.name, "file", dest, [Member(item.stem)], [], ""))
        else:
            raw.append((item.name, item.name, "file", None, [Member(item.name)], [],
                        "nothing gradeable: not a folder, a .zip, a .tar.gz or a .cu file"))
    for (student, uid), got in sorted(canvas.items()):
        dest = staging / "canvas" / safe_id(f"{student}_{uid}")
        notes = []
        budget = new_budget()  # one for all of a student's uploads: each its own let 12 zips write 756 MiB
        for item, name in got:
            if is_archive(item):
                try:
                    extract(item, _fresh(dest / safe_id(archive_stem(Path(name)))), budget)
                except Refused as e:
                    notes.append(f"{item.name}: archive refused: {e}")
            elif item.stat().st_size > MAX_SOURCE_BYTES:
                notes.append(f"{item.name}: not copied: larger than {MAX_SOURCE_BYTES >> 20} MiB")
            else:
                trial = dict(budget)  # taken only where it fits: a smaller upload after it still may
                try:
                    charge(trial, 1, item.stat().st_size, item.name)
                except Refused as e:
                    notes.append(f"{item.name}: not copied: {e}")
                    continue
                budget.update(trial)
                dest.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(item, _fresh(dest / safe_id(name)))
        raw.append((student, ", ".join(i.name for i, _ in got), "canvas", dest if dest.exists() else None,
                    [Member(uid, student)], notes, ""))

    entries, used = [], set()
    for student, source, layout, root, members, notes, problem in raw:
        sid = base = safe_id(student)
        k = 2
        while sid.lower() in used:
            sid, k = f"{base}-{k}", k + 1
        used.add(sid.lower())
        e = Entry(sid, source, layout, members or [Member(sid)], notes=list(notes), problem=problem)
        if root is not None and not problem:
            fill(e, root, entry_points, staging / "fill" / sid)
        elif not problem:
            e.problem = "nothing gradeable: " + (notes[0] if notes else "nothing in it")
        entries.append(e)
    return entries


def _layout(item: Path) -> str:
    return "zip" if item.name.lower().endswith(".zip") else "tar.gz"
