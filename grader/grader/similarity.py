"""The similarity verb: the submissions of each assignment compared with each other, with the
hidden reference and with the lecture's examples (slides_examples/), for the TA.

  python -m grader similarity OUT [--threshold 0.6]    on a batch's output (its records name the files)
  make batch SUBMISSIONS=... SIMILARITY=1             the same, right after the batch

Fingerprints are copydetect's: winnowed k-grams of the Pygments token stream (its CUDA lexer), with
identifiers, comments and whitespace taken out, so that renaming, reformatting, reordering functions
or changing a constant does not hide a copy. The student template and the code the handouts quote
count for nothing. A pair's score is the larger of its two shares: how much of one file is found in
the other (a kernel copied into a longer file still scores high).

Each file is given to copydetect as its skeleton(): the tokens, and so the scores, are the same, and
the time is linear in the file's length (it was quadratic on some texts: 80 KB of "#/*", 40 s). Only
the first CAP characters of a file are compared; the report names the files that are longer.

What it shows is evidence for a person to read, never a verdict: two students may write much the same
short kernel from the same lecture, and a copy retyped with care may score low.

Writes OUT/similarity/<assignment>.html (the pairs at or above the threshold, ranked, each with both
files side by side and the shared code marked) and OUT/similarity/summary.json; the ranked table goes
into summary.md. A match with the reference is flagged as such, for the TA only: no student's report
or Gradescope file mentions similarity. Needs copydetect (pip install copydetect); a batch without
SIMILARITY needs nothing new.
"""
from __future__ import annotations

import hashlib
import html
import io
import itertools
import json
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from . import tasks
from .report import atomic_write, one_line
from .similarity_text import origin, skeleton

THRESHOLD = 0.6
"""Measured on the kit's own kernels (grader/tests/test_similarity.py): independently written
solutions of trmm, reduce and conv1d share at most half of a file (the handout's loop, the usual
cudaMalloc/cudaMemcpy lines); renamed, reordered, re-commented copies, or with another tile size,
0.72 or more."""
MIN_SHARED = 250
"""...and a pair is reported only when the code they share is at least this many tokens long (about
ten lines): a naive kernel of ten lines shares 70% of itself with the lecture's naive DGEMM, as every
student's would."""
NOISE, GUARANTEE = 25, 30
"""copydetect's defaults: matches shorter than NOISE filtered characters are ignored, and any match
of GUARANTEE or more is found."""

KINDS = ("classmates", "reference", "lecture")
CAP = 256 * 1024
"""Characters of a file compared: the rest is left out, and the report names the file. Five times the
kit's longest kernel (47 KB); a few seconds of lexing at most, whatever the file holds."""


@dataclass
class Pair:
    a: str
    """A student (the one listed first)."""
    b: str
    """Another student, "reference", or "lecture: FILE"."""
    kind: str
    """classmates, reference or lecture."""
    score: float
    """The larger of the two shares."""
    shares: tuple
    """How much of a is found in b, and of b in a (fractions of their tokens)."""
    marked: tuple = field(default=(), repr=False)
    """(code, shared slices) of a and of b, for the side-by-side view."""


@dataclass
class Result:
    assignment: str
    compared: int
    """Submissions compared."""
    pairs: list
    """Pairs at or above the threshold, highest score first."""
    seconds: float
    threshold: float
    cut: list = field(default_factory=list)
    """Submissions longer than CAP: only their first CAP characters were compared."""


def _stable_hash(text: str) -> int:
    """The k-grams' hash: the same in every run (Python's own hash() of a string changes from one
    process to the next, and with it which fingerprints winnowing keeps, and the scores)."""
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little", signed=True)


def _copydetect():
    try:
        import copydetect  # noqa: F401  (imported here: only this verb needs it)
        from copydetect import CodeFingerprint, compare_files, utils
        from copydetect.utils import highlight_overlap
    except ImportError:
        raise tasks.TaskError("the similarity report needs copydetect: python3 -m pip install copydetect") from None
    utils.hash = _stable_hash  # what its hashed_kgrams() calls: a report is the same however often it is made
    return CodeFingerprint, compare_files, highlight_overlap


def boilerplate(name: str) -> list:
    """What every submission may share: the student template and the code the handouts quote."""
    from .handouts import BEGIN, END  # the markers only (no Jinja2 needed for them)
    texts = []
    template = tasks.ROOT / "student_template" / name / "kernel.cu"
    if template.is_file():
        texts.append(template.read_text(errors="replace"))
    for f in sorted((tasks.ROOT / "assignments" / name).glob("*")):
        if f.suffix in (".h", ".cuh", ".cu") and f.is_file():
            text = f.read_text(errors="replace")
            while BEGIN in text and END in text[text.index(BEGIN):]:
                start = text.index(BEGIN)
                end = text.index(END, start)
                texts.append(text[start + len(BEGIN):end])
                text = text[end + len(END):]
    return texts


def others(name: str) -> dict:
    """label -> file compared with every submission: the hidden reference and the lecture's examples."""
    found = {}
    ref = tasks.ROOT / "reference" / name / "kernel.cu"
    if ref.is_file():
        found["reference"] = ref
    for f in sorted((tasks.ROOT / "slides_examples").glob("*.cu")):
        found[f"lecture: {f.name}"] = f
    return found


def compare(name: str, students: dict, threshold: float = THRESHOLD) -> Result:
    """Every pair of `students` (name -> kernel.cu), and every student against the reference and the
    lecture's examples, for assignment `name`."""
    CodeFingerprint, compare_files, _ = _copydetect()
    import numpy as np  # copydetect's own dependency
    t0 = time.monotonic()
    k, w = NOISE, GUARANTEE - NOISE + 1

    def fingerprint(label, path, common=None, text=None):
        try:
            if text is None:
                with open(path, encoding="utf-8") as f:
                    text = f.read(CAP + 1)  # one more: the report tells which files are longer
        except (OSError, UnicodeDecodeError):
            return None
        code, where = skeleton(text[:CAP])
        fp = CodeFingerprint(label, k, w, boilerplate=common, language="cuda", fp=io.StringIO(code))
        fp.text, fp.where, fp.cut = text[:CAP], where, len(text) > CAP
        return fp

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # copydetect warns of every pair that shares nothing
        hashes = set()
        for i, text in enumerate(boilerplate(name)):
            hashes |= set(fingerprint(f"boilerplate{i}", None, text=text).hashes)
        bp = np.array(sorted(hashes), dtype=np.int64)
        prints = {s: fingerprint(s, p, bp) for s, p in sorted(students.items())}
        prints = {s: fp for s, fp in prints.items() if fp is not None}
        extra = {label: fingerprint(label, p, bp) for label, p in others(name).items()}
        pairs = []

        def one(a, b, kind, fa, fb):
            if fa is None or fb is None or not len(fa.hashes) or not len(fb.hashes):
                return
            shared, (sa, sb), (slices_a, slices_b) = compare_files(fa, fb)
            score = max(sa, sb)
            if score >= threshold and shared >= MIN_SHARED:
                pairs.append(Pair(a, b, kind, float(score), (float(sa), float(sb)),
                                  ((fa.text, origin(fa.where, slices_a)), (fb.text, origin(fb.where, slices_b)))))

        for a, b in itertools.combinations(prints, 2):
            one(a, b, "classmates", prints[a], prints[b])
        for a in prints:
            for label, fb in extra.items():
                one(a, label, "reference" if label == "reference" else "lecture", prints[a], fb)
    pairs.sort(key=lambda p: (-p.score, p.a, p.b))
    return Result(name, len(prints), pairs, time.monotonic() - t0, threshold, [s for s, fp in prints.items() if fp.cut])


SIDE_BY_SIDE = 200
"""Pairs shown side by side in the HTML report (all of them are in its table)."""


def _side_by_side(p: Pair) -> str:
    _, _, highlight = _copydetect()

    def code(raw, slices):
        marked, _ = highlight(raw, slices, "<mark>", "</mark>", escape_html=True)
        return f"<pre>{marked}</pre>"
    (ra, sa), (rb, sb) = p.marked
    return (f'<table class="pair"><tr><th>{html.escape(p.a)}</th><th>{html.escape(p.b)}</th></tr>'
            f"<tr><td>{code(ra, sa)}</td><td>{code(rb, sb)}</td></tr></table>")


# ---------------------------------------------------------------------------------------------
# On a batch's output.

def submissions_of(out: Path) -> dict:
    """assignment -> {student: file} from a batch's output: the copy it kept of each file it graded
    (sources/), else the file its record names; not the files no longer in the class folder (the
    state's set_aside: a renamed folder would pair a student's old file with their new one)."""
    found = {}
    try:
        aside = set(json.loads((out / "state.json").read_text()).get("set_aside", {}))
    except (OSError, ValueError, AttributeError):
        aside = set()
    for rec in sorted((out / "records").glob("*/*.json")):
        if f"{rec.parent.name}/{rec.stem}" in aside:
            continue
        try:
            data = json.loads(rec.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        a, student = data.get("assignment"), rec.parent.name
        kept = out / "sources" / student / f"{a}.cu"
        path = kept if kept.is_file() else Path(data.get("submission") or "/nonexistent")
        if a and path.is_file():
            found.setdefault(a, {})[student] = path
    return found


def run(out: Path, threshold: float = THRESHOLD, say=print) -> list:
    """The report of every assignment graded in the batch at `out`; returns the Results."""
    results = []
    for name, students in sorted(submissions_of(out).items()):
        r = compare(name, students, threshold)
        results.append(r)
        write(out, r)
        say(f"similarity: {name}: {r.compared} submissions, {len(r.pairs)} pairs at or above {threshold:g} "
            f"({r.seconds:.1f} s): {out / 'similarity' / (name + '.html')}")
        if r.cut:
            say(f"similarity: {name}: {_cut(r)}")
    atomic_write(out / "similarity" / "summary.json", json.dumps(
        [{"assignment": r.assignment, "compared": r.compared, "threshold": r.threshold, "seconds": r.seconds,
          "pairs": [{"a": p.a, "b": p.b, "kind": p.kind, "score": p.score, "shares": p.shares} for p in r.pairs],
          "cut": r.cut, "cap_characters": CAP}
         for r in results], indent=1) + "\n")
    return results


_FLAG = {"classmates": "", "reference": "COPY OF THE HIDDEN REFERENCE", "lecture": "lecture code"}


def _cut(r: Result) -> str:
    return (f"only the first {CAP // 1024} KiB of {len(r.cut)} submission(s) compared, the rest of each left out: "
            + ", ".join(one_line(s) for s in r.cut))


def write(out: Path, r: Result) -> None:
    def link(i):
        return f'<a href="#p{i + 1}">side by side</a>' if i < SIDE_BY_SIDE else ""
    rows = "".join(f'<tr><td>{i + 1}</td><td>{p.score:.2f}</td><td>{html.escape(p.a)}</td><td>{html.escape(p.b)}</td>'
                   f'<td>{_FLAG[p.kind]}</td><td>{link(i)}</td></tr>' for i, p in enumerate(r.pairs))
    bodies = "".join(f'<h2 id="p{i + 1}">{i + 1}. {html.escape(p.a)} / {html.escape(p.b)}: {p.score:.2f} '
                     f'({p.shares[0]:.0%} of the first found in the second, {p.shares[1]:.0%} the other way)'
                     f'{" - " + _FLAG[p.kind] if _FLAG[p.kind] else ""}</h2>{_side_by_side(p)}'
                     for i, p in enumerate(r.pairs[:SIDE_BY_SIDE]))
    cut = f"<p><b>{html.escape(_cut(r))}</b></p>\n" if r.cut else ""
    page = f"""<!doctype html><html><head><meta charset="utf-8"><title>Similarity: {r.assignment}</title>
<style>body{{font-family:sans-serif;margin:1.5em}} table{{border-collapse:collapse}} td,th{{border:1px solid #ccc;
padding:.2em .5em;vertical-align:top}} table.pair{{width:100%;table-layout:fixed}} pre{{white-space:pre-wrap;
font-size:12px;margin:0}} mark{{background:#ffd54f}}</style></head><body>
<h1>Similarity: {r.assignment}</h1>
<p>{r.compared} submissions compared with each other, with the hidden reference and with the lecture's examples;
pairs whose score (the larger share of one file found in the other, identifiers, comments and layout left out,
the student template and the handout's code not counted) is {r.threshold:g} or more. Evidence for a person to
read, not a verdict. For the TA only.</p>
{cut}<table><tr><th>#</th><th>score</th><th>submission</th><th>matches</th><th></th><th></th></tr>{rows}</table>
{bodies or "<p>No pair at or above the threshold.</p>"}</body></html>
"""
    atomic_write(out / "similarity" / f"{r.assignment}.html", page)


def summary_lines(results: list, limit: int = 20) -> list:
    """The ranked table for summary.md."""
    lines = ["", "== Similarity (for the TA: evidence to read, not a verdict)"]
    for r in results:
        lines += ["", f"{r.assignment}: {r.compared} submissions, {len(r.pairs)} pairs at or above {r.threshold:g}"
                      f" (similarity/{r.assignment}.html)"]
        if r.cut:
            lines.append(f"  {_cut(r)}")
        for i, p in enumerate(r.pairs[:limit]):
            lines.append(f"  {i + 1:>3}. {p.score:.2f}  {p.a:<24} {p.b:<24} {_FLAG[p.kind]}".rstrip())
        if len(r.pairs) > limit:
            lines.append(f"  ... {len(r.pairs) - limit} more in the HTML report")
    return lines


_MARK = "<!-- similarity -->"


def require() -> None:
    """TaskError now, before a batch grades anything, if the report could not be made afterwards."""
    _copydetect()


def report(out: Path, threshold: float = THRESHOLD, say=print) -> list:
    """The reports of a batch's output, and the ranked table in its summary.md (replacing an earlier one)."""
    if not (out / "records").is_dir():
        raise tasks.TaskError(f"{out} is not a batch's output (it has no records/ folder)")
    results = run(out, threshold, say)
    text = "\n".join(summary_lines(results)).strip()
    summary = out / "summary.md"
    old = summary.read_text().split(_MARK, 1)[0].rstrip("\n") if summary.is_file() else ""
    atomic_write(summary, (old + "\n\n" if old else "") + f"{_MARK}\n```\n{text}\n```\n")
    say(text)
    return results


def main(args) -> int:
    report(args.out, args.threshold)
    return 0
