"""Handouts: every assignment's handout rendered from the templates in handouts/ into Markdown,
HTML and PDF, plus a course-level index page.

  python -m grader handouts [--out DIR] [--no-pdf]      (make handouts)

Everything a handout states comes from the kit itself: the task file (statement, entry point,
cases, FLOP formula, tolerance, points, tiers and per-GPU thresholds), assignments/gpus.json, and
the sequential loop quoted from assignments/<name>/cpu_reference.h between the lines
`// handout: begin` and `// handout: end`. Change a size or a threshold and render again.

Instructor-side only: needs Jinja2 and markdown (grader/requirements-handouts.txt), and Chromium
(Debian's `chromium`) for the PDFs. The grading itself never imports this module.
"""
from __future__ import annotations

import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import traceback
from pathlib import Path

from . import gpu, tasks

TEMPLATES = tasks.ROOT / "handouts"
"""The templates: handout.md.j2, page.html.j2, index.html.j2, README.student.md.j2."""

BEGIN, END = "// handout: begin", "// handout: end"
EXIT_CANNOT_RENDER = 2

UNITS = {"GFLOPS": "FLOPs", "GB/s": "bytes", "MLUPS": "lattice-site updates"}
"""What a metric's work formula counts."""


class HandoutError(Exception):
    """A handout that cannot be rendered; the message names the file (and line) at fault."""


def _modules():
    try:
        import jinja2
        import markdown
    except ImportError as e:
        raise HandoutError(f"rendering handouts needs Jinja2 and markdown ({e.name} is missing): "
                           "pip install -r grader/requirements-handouts.txt") from None
    return jinja2, markdown


def environment(templates: Path = TEMPLATES):
    """A Jinja2 environment over `templates` in which an undefined name is an error."""
    jinja2, _ = _modules()
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates)),
        undefined=jinja2.StrictUndefined,
        autoescape=jinja2.select_autoescape(enabled_extensions=("html.j2",), default_for_string=False),
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def render(env, template: str, /, **context) -> str:
    """`template` rendered; a syntax error, an undefined name or a failing expression is a
    HandoutError that starts with the template's path and line."""
    jinja2, _ = _modules()
    try:
        return env.get_template(template).render(**context)
    except jinja2.TemplateSyntaxError as e:
        where = e.filename or template
        raise HandoutError(f"{where}:{e.lineno}: template syntax error: {e.message}") from None
    except jinja2.TemplateNotFound as e:
        raise HandoutError(f"template {e.name!r} not found in {env.loader.searchpath[0]}") from None
    except Exception as e:  # UndefinedError, or an expression that raised: find the template's frame
        frames = [f for f in traceback.extract_tb(e.__traceback__) if f.filename.endswith(".j2")]
        where = f"{frames[-1].filename}:{frames[-1].lineno}" if frames else template
        what = "undefined value" if isinstance(e, jinja2.UndefinedError) else type(e).__name__
        raise HandoutError(f"{where}: {what}: {e}") from None


# ---------------------------------------------------------------------------------------------
# What a handout says, from the kit's files.

def sequential_code(header: Path, root: Path = tasks.ROOT) -> dict:
    """The lines between the handout markers of a cpu_reference.h: {code, path, first, last}."""
    try:
        lines = header.read_text().splitlines()
    except OSError as e:
        raise HandoutError(f"cannot read {header}: {e.strerror}") from None
    starts = [i for i, line in enumerate(lines) if line.strip() == BEGIN]
    ends = [i for i, line in enumerate(lines) if line.strip() == END]
    if len(starts) != 1 or len(ends) != 1 or ends[0] <= starts[0] + 1:
        raise HandoutError(f"{header}: needs one '{BEGIN}' line and one '{END}' line after it, "
                           "around the sequential loop the handout quotes")
    code = textwrap.dedent("\n".join(lines[starts[0] + 1:ends[0]])).strip("\n")
    try:
        path = header.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        path = str(header)
    return {"code": code, "path": path, "first": starts[0] + 2, "last": ends[0]}


def sequential_header(folder: Path) -> Path:
    """The header whose marked lines the handout quotes: assignments/<name>/cpu_reference.h, or
    else the first header with markers that problem.cu includes, directly or not (an assignment
    that shares another one's CPU loop)."""
    own = folder / "cpu_reference.h"
    queue, seen = [own if own.is_file() else folder / "problem.cu"], set()
    while queue:
        path = queue.pop(0).resolve()
        if path in seen or not path.is_file():
            continue
        seen.add(path)
        text = path.read_text()
        if BEGIN in text:
            return path
        queue += [path.parent / m for m in re.findall(r'^\s*#\s*include\s+"([^"]+)"', text, re.M)]
    return own  # sequential_code() says what is missing


def _per(x: float) -> str:
    """1e9 as "10^9"; other scales as numbers."""
    e = round(math.log10(x)) if x > 0 else 0
    return f"10^{e}" if x > 1 and 10.0 ** e == x else _number(x)


def _number(x: float) -> str:
    """12,345 for whole numbers and anything above 1,000, else up to 4 significant digits."""
    if float(x).is_integer() or abs(x) >= 1000:
        return f"{round(x):,}"
    return f"{x:.4g}"


def _gpus(root: Path) -> dict:
    path = root / "assignments" / "gpus.json"
    try:
        return gpu.table(root)
    except (OSError, ValueError, KeyError) as e:
        raise HandoutError(f"cannot read the GPU list {path}: {e}") from None


def _peak(metric: str, kind: str, entry: dict):
    """The GPU's datasheet bound in the metric's unit, where the two are comparable."""
    if kind not in entry:
        return None
    if metric == "GFLOPS" and kind in ("fp64", "fp32"):
        return entry[kind] * 1000.0
    if metric == "GB/s" and kind == "dram":
        return float(entry[kind])
    return None


def context(task: tasks.Task, root: Path = tasks.ROOT) -> dict:
    """Everything handout.md.j2 needs, taken from the task file, gpus.json and the CPU reference."""
    data = task.data
    if not data.get("statement"):
        raise HandoutError(f"{task.folder / 'task.json'}: needs a \"statement\" (Markdown: what the "
                           "assignment computes), which the handout shows first")
    metric = data["metric"]
    per = float(metric.get("per", 1.0))
    raw = {c["id"]: c for c in data["cases"]}
    cases = []
    for c in task.cases:
        if c.hidden:
            continue
        notes = [raw[c.id][k] for k in ("why",) if k in raw[c.id]]
        cases.append({"id": c.id, "sizes": c.describe(), "reference": c.reference, "scored": c.scored,
                      "tolerance": c.tol, "own_tolerance": "tolerance" in raw[c.id], "note": " ".join(notes)})
    scored = [c for c in cases if c["scored"]]
    graded = []
    for g in task.graded:
        work = task.work(g.case.params) * per  # returned values (jacobi's sweeps) at their bound
        work = round(work) if abs(work - round(work)) <= 1e-9 * abs(work) else work
        nbytes = task.bytes(g.case.params)
        graded.append({"id": g.case.id, "sizes": g.case.describe(), "warmup": g.warmup, "runs": g.runs,
                       "work": _number(work), "work_scaled": _number(work / per),
                       "bytes": _number(nbytes) if nbytes else None})
    perf = data["performance"]
    tiers = [{"fraction": t["fraction"], "percent": _number(round(100 * t["fraction"], 4)), "points": t["points"]}
             for t in perf["tiers"]]
    known = _gpus(root)
    profiles = []
    for model, prof in perf.get("gpus", {}).items():
        rates = prof["rates"] if isinstance(prof["rates"], dict) else {graded[0]["id"]: prof["rates"]}
        peak = _peak(metric["name"], metric["peak"], known.get(model, {}))
        profiles.append({
            "model": model, "source": prof.get("source", "(no source given)"),
            "peak": _number(peak) if peak is not None else None,
            "rows": [{"case": gid, "rates": [_number(r) for r in rates[gid]]} for gid in (g["id"] for g in graded)],
        })
    unprofiled = [m for m in known if m not in perf.get("gpus", {})]
    return {
        "name": task.name,
        "title": task.title,
        "statement": data["statement"].strip(),
        "entry_point": task.entry_point,
        "sequential": sequential_code(sequential_header(task.folder), root),
        "metric": {"name": metric["name"], "work": metric["work"], "per": _per(per),
                   # bytes beside the rate, unless the rate is already in bytes
                   "bytes": metric.get("bytes") if metric["name"] != "GB/s" else None, "peak": metric["peak"],
                   "least_bytes": metric.get("least_bytes"), "least_why": metric.get("least_why"),
                   "unit": UNITS.get(metric["name"], "units of work"),
                   "returned": metric.get("returned", {})},
        "tolerance": {"rel": task.tolerance, "why": data["tolerance"]["why"]},
        "tiers_why": perf.get("why", ""),
        "cases": cases,
        "hidden_count": len(task.hidden),
        "graded": graded,
        "points": {"correctness": task.points["correctness"], "performance": task.points["performance"],
                   "total": task.points["correctness"] + task.points["performance"],
                   "share": _number(round(task.points["correctness"] / len(scored), 2)) if scored else "0"},
        "scored_count": len(scored),
        "sanitize": task.sanitize[1] if task.sanitize else [],
        "timeouts": task.timeouts,
        "baseline": perf["baseline"],
        "tiers": tiers,
        "profiles": profiles,
        "unprofiled": unprofiled,
        "skeleton": f"student_template/{task.name}/kernel.cu",
    }


# ---------------------------------------------------------------------------------------------
# Rendering.

def find_chromium():
    """The Chromium (or Chrome) binary: $CHROMIUM, else the first on PATH; None if there is none."""
    env = os.environ.get("CHROMIUM")
    if env:
        return env if shutil.which(env) else None
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    return None


def chromium_command(chromium: str, profile: Path, *args: str) -> list:
    """Headless Chromium with its own profile folder (so that several can run at once)."""
    return [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
            "--disable-dev-shm-usage", f"--user-data-dir={profile}", *args]


def print_pdfs(pages: list, chromium: str, timeout: float = 180) -> None:
    """Prints each (html, pdf) pair with headless Chromium, all at once."""
    with tempfile.TemporaryDirectory(prefix="handouts-chromium-") as tmp:
        procs = []
        for i, (html, pdf) in enumerate(pages):
            pdf.unlink(missing_ok=True)
            cmd = chromium_command(chromium, Path(tmp) / str(i), "--no-pdf-header-footer",
                                   f"--print-to-pdf={pdf}", html.resolve().as_uri())
            procs.append((pdf, subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)))
        for pdf, p in procs:
            try:
                out, _ = p.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                raise HandoutError(f"Chromium did not print {pdf} within {timeout:.0f} s") from None
            if p.returncode != 0 or not pdf.is_file() or pdf.stat().st_size == 0:
                tail = out.decode(errors="replace").strip().splitlines()[-3:]
                raise HandoutError(f"Chromium could not print {pdf} (exit {p.returncode}): {' / '.join(tail)}")


def code_highlighting() -> tuple:
    """(markdown extensions, CSS) that colour the code blocks with Pygments; none where Pygments
    is missing (the code is then plain, and still all there)."""
    try:
        from pygments.formatters import HtmlFormatter
    except ImportError:
        return [], ""
    return ["codehilite"], HtmlFormatter(style="friendly").get_style_defs(".codehilite")


# ---------------------------------------------------------------------------------------------
# Print checks: what a page cut off or pushed into the margin.

MARGIN_PT = 14 / 25.4 * 72
"""The left and right page margins of style.css (14 mm), in PDF points."""
_PAGE_NUMBER = re.compile(r"page \d+ of \d+")


def code_lines(html: str) -> list:
    """Every non-blank line of the page's code blocks (<pre>), as the reader should see it."""
    import html as html_lib
    lines = []
    for block in re.findall(r"<pre[^>]*>(.*?)</pre>", html, re.S):
        text = html_lib.unescape(re.sub(r"<[^>]+>", "", block))
        lines += [line for line in text.splitlines() if line.strip()]
    return lines


def pdf_problems(pdf: Path, html: str) -> list:
    """What does not print whole in `pdf`, the print of the page `html`: a code line missing from
    the PDF's text (cut off at the edge of its box) and a word beyond a side margin. Needs
    pdftotext (poppler-utils); a HandoutError names it where it is missing."""
    if shutil.which("pdftotext") is None:
        raise HandoutError("checking the PDFs needs pdftotext (Debian: apt-get install poppler-utils)")
    import html as html_lib
    boxes = subprocess.run(["pdftotext", "-bbox", str(pdf), "-"], capture_output=True, text=True, check=True).stdout
    problems, words = [], []
    for width, page in re.findall(r'<page width="([\d.]+)" height="[\d.]+">(.*?)</page>', boxes, re.S):
        right = float(width) - MARGIN_PT
        for x0, x1, word in re.findall(r'<word xMin="([\d.]+)" yMin="[\d.]+" xMax="([\d.]+)" yMax="[\d.]+">(.*?)</word>', page):
            word = html_lib.unescape(word)
            words.append(word)
            if float(x1) > right + 1 or float(x0) < MARGIN_PT - 1:
                problems.append(f"{pdf.name}: '{word}' runs into the margin (x {float(x0):.0f}-{float(x1):.0f} pt of {float(width):.0f})")
    # Word by word: the PDF's reading order may take a column of comments apart from its code, and
    # a word wrapped at the edge of its box comes back in two pieces, one after the other.
    text = _PAGE_NUMBER.sub("", "".join(words))
    for line in code_lines(html):
        cut = [w for w in line.split() if w not in text]
        if cut:
            problems.append(f"{pdf.name}: code line not printed whole ({cut[0]!r} is missing): {line.strip()[:90]}")
    return problems


def page(env, md: str, title: str, index: str = "index.html") -> str:
    """The HTML page (page.html.j2) of the Markdown `md`, its code highlighted where Pygments is."""
    _, markdown = _modules()
    from markupsafe import Markup  # installed with Jinja2
    highlight, code_css = code_highlighting()
    body = markdown.markdown(md, extensions=["tables", "fenced_code", "sane_lists", "toc", *highlight])
    return render(env, "page.html.j2", title=title, body=Markup(body), index=index, code_css=Markup(code_css))


def build(out: Path, root: Path = tasks.ROOT, templates: Path = None, pdf: bool = True) -> list:
    """Renders every handout and the index into `out`; returns the files written."""
    templates = templates or root / "handouts"
    chromium = None
    if pdf:
        chromium = find_chromium()
        if chromium is None:
            raise HandoutError("the PDFs need Chromium, which is not installed (Debian: apt-get install "
                               "chromium); `make handouts NO_PDF=1` (--no-pdf) renders Markdown and HTML only")
    env = environment(templates)
    out.mkdir(parents=True, exist_ok=True)
    written, pages, entries = [], [], []
    for name in tasks.registry(root):
        task = tasks.load(name, root)
        ctx = context(task, root)
        md = render(env, "handout.md.j2", **ctx)
        html = page(env, md, task.title)
        for suffix, text in ((".md", md), (".html", html)):
            path = out / f"{name}{suffix}"
            path.write_text(text)
            written.append(path)
        pages.append((out / f"{name}.html", out / f"{name}.pdf"))
        entries.append({"name": name, "title": task.title, "metric": ctx["metric"]["name"],
                        "entry_point": task.entry_point, "points": ctx["points"]["total"],
                        "graded": ", ".join(g["sizes"] for g in ctx["graded"]), "pdf": pdf})
    index = out / "index.html"
    index.write_text(render(env, "index.html.j2", assignments=entries))
    written.append(index)
    if pdf:
        print_pdfs(pages, chromium)
        written += [p for _, p in pages]
    return written


def main(args) -> int:
    out = args.out or tasks.ROOT / "build" / "handouts"
    try:
        written = build(out, templates=args.templates, pdf=not args.no_pdf)
    except HandoutError as e:
        print(f"grader: {e}", file=sys.stderr)
        return EXIT_CANNOT_RENDER
    print(f"handouts: {len(written)} files in {out} (open {out / 'index.html'})")
    return 0
