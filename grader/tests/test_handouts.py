"""handouts.py: every handout renders, says what the task files say, quotes the CPU loop, opens in
headless Chromium without console messages and prints to the expected pages. No GPU needed.

Needs Jinja2, markdown and pypdf (grader/requirements-handouts.txt) and Chromium; tools/test.sh
installs them. Elsewhere the tests that need one are skipped with the reason; in CI (CI=true) a
missing one fails."""
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grader import tasks

ROOT = tasks.ROOT
NAMES = tasks.registry()
IN_CI = os.environ.get("CI") == "true"


def need(what: str, why: str):
    """Skip (fail in CI) when an instructor-side tool is missing."""
    if IN_CI:
        pytest.fail(f"{why} is missing in CI: tools/test.sh installs it")
    pytest.skip(f"needs {why}")


try:
    from grader import handouts
    import jinja2  # noqa: F401
    import markdown  # noqa: F401
    HAVE_JINJA = True
except ImportError:
    HAVE_JINJA = False


@pytest.fixture(autouse=True)
def _jinja():
    if not HAVE_JINJA:
        need("jinja2", "Jinja2 and markdown (pip install -r grader/requirements-handouts.txt)")


def chromium() -> str:
    path = handouts.find_chromium()
    if path is None:
        need("chromium", "Chromium (apt-get install chromium)")
    return path


def pypdf_module():
    """pypdf, which reads the printed handouts back (skip, or fail in CI, without it)."""
    try:
        import pypdf
    except ImportError:
        need("pypdf", "pypdf (pip install -r grader/requirements-handouts.txt)")
    return pypdf


def copy_kit(dest: Path) -> Path:
    """What the handouts are made of (registry, gpus.json, task files, problem.cu and the headers
    with the CPU loops, templates), copied."""
    for name in NAMES:
        (dest / "assignments" / name).mkdir(parents=True, exist_ok=True)
        for f in (ROOT / "assignments" / name).iterdir():
            if f.is_file() and (f.name in ("task.json", "problem.cu") or f.suffix in (".h", ".cuh")):
                shutil.copy(f, dest / "assignments" / name / f.name)
    for f in ("registry.txt", "gpus.json"):
        shutil.copy(ROOT / "assignments" / f, dest / "assignments" / f)
    shutil.copytree(ROOT / "handouts", dest / "handouts")
    return dest


def number(x) -> str:
    return f"{round(x):,}" if float(x).is_integer() or abs(x) >= 1000 else f"{x:.4g}"


@pytest.fixture(scope="session")
def rendered(tmp_path_factory):
    """The kit's handouts, rendered once (with the PDFs where Chromium is), into a folder of the test
    session's own: not build/handouts, which another test process may be rendering at the same time."""
    if not HAVE_JINJA:
        need("jinja2", "Jinja2 and markdown")
    out = tmp_path_factory.mktemp("handouts")
    handouts.build(out, pdf=handouts.find_chromium() is not None)
    return out


# ---------------------------------------------------------------------------------------------

def test_every_assignment_has_a_markdown_and_an_html_handout_and_the_index_links_each(rendered):
    index = (rendered / "index.html").read_text()
    for name in NAMES:
        md = (rendered / f"{name}.md").read_text()
        assert md.startswith(f"# {tasks.load(name).title}\n")
        assert "<h1" in (rendered / f"{name}.html").read_text()
        assert f'href="{name}.html"' in index and f'href="{name}.md"' in index


@pytest.mark.parametrize("name", NAMES)
def test_the_handout_states_what_the_task_file_says(rendered, name):
    task = tasks.load(name)
    data, md = task.data, (rendered / f"{name}.md").read_text()
    assert data["statement"].strip() in md
    assert f"{task.entry_point};" in md
    assert f"`{data['metric']['work']}`" in md and f"**{task.metric}**" in md
    for g in task.graded:
        per = float(data["metric"].get("per", 1))
        assert f"| {g.case.describe()} | {number(round(task.work(g.case.params) * per))} |" in md
        assert f"{g.runs} timed calls" in md
    for c in task.cases:
        assert f"| `{c.id}` | {c.describe()} |" in md
    for c in task.hidden:
        assert f"`{c.id}`" not in md and str(c.seed) not in md
    assert f"at most **{task.tolerance}**" in md and data["tolerance"]["why"] in md
    p = task.points
    assert f"**{p['correctness'] + p['performance']} points**: {p['correctness']} for correctness, " \
           f"{p['performance']} for performance" in md
    perf = data["performance"]
    for i, t in enumerate(perf["tiers"], 1):
        assert f"| {i} | {number(round(100 * t['fraction'], 4))}% of {perf['baseline']} | {t['points']} |" in md
    for model, prof in perf.get("gpus", {}).items():
        rates = prof["rates"] if isinstance(prof["rates"], dict) else {task.graded[0].case.id: prof["rates"]}
        for gid, r in rates.items():
            assert f"| {model} | {gid} | " + " | ".join(number(x) for x in r) + " |" in md
        assert prof["source"] in md
    others = [m for m in json.loads((ROOT / "assignments" / "gpus.json").read_text())["gpus"] if m not in perf.get("gpus", {})]
    lead = "On any other GPU" if perf.get("gpus") else "On every GPU"
    listed = f" ({', '.join(others)})" if others else ""  # every GPU may have a profile
    assert f"{lead}{listed} the thresholds are derived on the spot" in " ".join(md.split())
    assert f"make grade A={name}" in md


def test_changing_a_threshold_a_size_or_the_points_in_a_task_file_changes_the_handout(tmp_path):
    root = copy_kit(tmp_path / "kit")
    path = root / "assignments" / "trmm" / "task.json"
    data = json.loads(path.read_text())
    old = data["performance"]["gpus"]["H200"]["rates"]
    data["performance"]["gpus"] = {"H200": data["performance"]["gpus"]["H200"]}  # not the estimates made from it
    data["performance"]["gpus"]["H200"]["rates"] = [1111, 2222, 3333, 44444]
    data["performance"]["gpus"]["L4"] = {"rates": [5, 6, 7, 8], "source": "a made-up profile"}
    data["cases"][2].update(id="n99", n=99)
    data["points"] = {"correctness": 30, "performance": 50}
    path.write_text(json.dumps(data))
    handouts.build(tmp_path / "out", root, pdf=False)
    md = (tmp_path / "out" / "trmm.md").read_text()
    assert "| H200 | n4096 | 1,111 | 2,222 | 3,333 | 44,444 |" in md
    assert "| L4 | n4096 | 5 | 6 | 7 | 8 |" in md and "a made-up profile" in md
    assert number(old[0]) not in md
    assert ", L4," not in " ".join(md.split()) and "| `n99` | n=99 |" in md and "`n100`" not in md
    assert "**80 points**: 30 for correctness" in md
    html = (tmp_path / "out" / "trmm.html").read_text()
    assert "<td>44,444</td>" in html


@pytest.mark.parametrize("name", NAMES)
def test_the_sequential_code_is_quoted_from_cpu_reference_h_between_the_markers(rendered, name):
    header = handouts.sequential_header(ROOT / "assignments" / name)
    assert header.name == "cpu_reference.h"
    lines = header.read_text().splitlines()
    begin, end = lines.index(handouts.BEGIN), lines.index(handouts.END)
    quoted = "\n".join(lines[begin + 1:end])
    assert f"```cpp\n{quoted}\n```" in (rendered / f"{name}.md").read_text()
    assert f"lines {begin + 2}-{end}" in (rendered / f"{name}.md").read_text()


def test_editing_the_cpu_loop_changes_the_handout(tmp_path):
    root = copy_kit(tmp_path / "kit")
    header = root / "assignments" / "reduce" / "cpu_reference.h"
    header.write_text(header.read_text().replace("double s = 0;", "double s = 0;  // edited"))
    handouts.build(tmp_path / "out", root, pdf=False)
    assert "double s = 0;  // edited" in (tmp_path / "out" / "reduce.md").read_text()


def test_a_cpu_reference_without_markers_is_an_error_that_names_the_header(tmp_path):
    root = copy_kit(tmp_path / "kit")
    header = root / "assignments" / "matmul" / "cpu_reference.h"
    header.write_text(header.read_text().replace(handouts.END, ""))
    with pytest.raises(handouts.HandoutError, match=re.escape(str(header)) + ".*handout: end"):
        handouts.build(tmp_path / "out", root, pdf=False)


def test_a_task_file_without_a_statement_is_an_error_that_names_it(tmp_path):
    root = copy_kit(tmp_path / "kit")
    path = root / "assignments" / "syr2k" / "task.json"
    data = json.loads(path.read_text())
    del data["statement"]
    path.write_text(json.dumps(data))
    with pytest.raises(handouts.HandoutError, match=re.escape(str(path)) + ".*statement"):
        handouts.build(tmp_path / "out", root, pdf=False)


def broken_templates(tmp_path, line: int, text: str) -> Path:
    """A copy of the templates with `text` put in at `line` of handout.md.j2."""
    folder = tmp_path / "templates"
    shutil.copytree(ROOT / "handouts", folder)
    path = folder / "handout.md.j2"
    lines = path.read_text().splitlines(keepends=True)
    lines.insert(line - 1, text + "\n")
    path.write_text("".join(lines))
    return path


def test_a_template_syntax_error_names_the_template_file_and_line(tmp_path):
    path = broken_templates(tmp_path, 12, "{% if %}")
    with pytest.raises(handouts.HandoutError, match=re.escape(f"{path}:12: template syntax error")):
        handouts.build(tmp_path / "out", templates=path.parent, pdf=False)


def test_an_undefined_name_in_a_template_names_the_file_and_line(tmp_path):
    path = broken_templates(tmp_path, 20, "Sizes: {{ no_such_value }}")
    with pytest.raises(handouts.HandoutError, match=re.escape(f"{path}:20: undefined value") + ".*no_such_value"):
        handouts.build(tmp_path / "out", templates=path.parent, pdf=False)


def test_the_handouts_command_exits_2_on_a_template_error_and_says_where(tmp_path):
    path = broken_templates(tmp_path, 7, "{{ title | no_such_filter }}")
    r = subprocess.run([sys.executable, "-m", "grader", "handouts", "--templates", str(path.parent),
                        "--out", str(tmp_path / "out"), "--no-pdf"], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=str(ROOT / "grader")))
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith(f"grader: {path}:7:"), r.stderr
    assert "Traceback" not in r.stderr


# ---------------------------------------------------------------------------------------------
# Chromium: the pages as a browser shows them, and the PDFs.

CONSOLE = re.compile(r":CONSOLE[:(]|Uncaught")


def screenshot(browser: str, html: Path, png: Path, profile: Path):
    """Starts headless Chromium taking a screenshot of `html`; returns the process."""
    png.parent.mkdir(parents=True, exist_ok=True)
    png.unlink(missing_ok=True)
    cmd = handouts.chromium_command(browser, profile, "--enable-logging=stderr", "--v=0", "--hide-scrollbars",
                                    "--window-size=1100,2400", f"--screenshot={png}", html.resolve().as_uri())
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def png_size(path: Path):
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")


def test_every_html_page_opens_in_headless_chromium_without_console_messages(rendered, tmp_path):
    browser = chromium()
    pages = [rendered / f"{n}.html" for n in NAMES] + [rendered / "index.html"]
    shots = rendered / "screenshots"
    procs = [(html, shots / f"{html.stem}.png", screenshot(browser, html, shots / f"{html.stem}.png", tmp_path / html.stem))
             for html in pages]
    for html, png, p in procs:
        log, _ = p.communicate(timeout=120)
        assert p.returncode == 0, log
        console = [line for line in log.splitlines() if CONSOLE.search(line)]
        assert not console, f"{html.name}: {console}"
        assert png_size(png) == (1100, 2400)
        # a blank page compresses to a few KB; a rendered handout is tens of KB
        assert png.stat().st_size > 20_000, f"{png} looks blank ({png.stat().st_size} bytes)"


def test_the_console_check_catches_a_page_that_logs_an_error(tmp_path):
    browser = chromium()
    bad = tmp_path / "bad.html"
    bad.write_text("<!doctype html><p>x</p><script>console.error('broken'); no_such_function();</script>")
    p = screenshot(browser, bad, tmp_path / "bad.png", tmp_path / "profile")
    log, _ = p.communicate(timeout=120)
    found = [line for line in log.splitlines() if CONSOLE.search(line)]
    assert any("broken" in line for line in found) and any("Uncaught" in line for line in found), log


@pytest.mark.parametrize("name", NAMES)
def test_the_pdf_starts_with_the_problem_and_puts_the_grading_on_a_later_page(rendered, name):
    chromium()
    pypdf = pypdf_module()
    task = tasks.load(name)
    pages = [" ".join(re.sub(r"page \d+ of \d+", "", p.extract_text() or "").split())
             for p in pypdf.PdfReader(rendered / f"{name}.pdf").pages]
    assert 2 <= len(pages) <= 8, f"{name}.pdf has {len(pages)} pages"
    assert pages[0].startswith(task.title)
    rubric = [i for i, text in enumerate(pages) if text.startswith("Rubric")]
    assert rubric and rubric[0] >= 1, "the rubric should open a page of its own"
    for prof in task.data["performance"].get("gpus", {}).values():  # the thresholds are in the grading part
        rates = prof["rates"] if isinstance(prof["rates"], list) else next(iter(prof["rates"].values()))
        assert number(rates[-1]) in " ".join(pages[rubric[0]:])


def pdftotext():
    if shutil.which("pdftotext") is None:
        need("pdftotext", "pdftotext (apt-get install poppler-utils)")


@pytest.mark.parametrize("name", NAMES)
def test_every_code_line_of_the_pdf_handout_prints_whole_and_no_word_runs_into_the_margin(rendered, name):
    chromium()
    pdftotext()
    problems = handouts.pdf_problems(rendered / f"{name}.pdf", (rendered / f"{name}.html").read_text())
    assert not problems, "\n".join(problems)


def test_the_print_check_finds_a_code_line_cut_at_the_edge_and_a_table_in_the_margin(tmp_path):
    """The check above can fail: a page whose code scrolls (as on screen) and whose table is wider
    than the paper, printed the same way."""
    browser = chromium()
    pdftotext()
    long = "int entry(" + ", ".join(f"double* argument_{i}" for i in range(12)) + ");"
    html = (f"<!doctype html><style>@page {{ size: A4; margin: 16mm 14mm; }} pre {{ overflow-x: auto; }}</style>"
            f"<pre>short line();\n{long}</pre><table><tr><td style='white-space: nowrap'>{'wide ' * 60}</td></tr></table>")
    page = tmp_path / "clipped.html"
    page.write_text(html)
    handouts.print_pdfs([(page, tmp_path / "clipped.pdf")], browser)
    problems = handouts.pdf_problems(tmp_path / "clipped.pdf", html)
    assert any("not printed whole" in p and "int entry(" in p for p in problems), problems
    assert any("runs into the margin" in p for p in problems), problems
    assert not any("short line" in p for p in problems)


def test_headings_are_never_the_last_line_of_a_pdf_page(rendered):
    """A heading stays with what follows it: no page of any handout ends on one."""
    chromium()
    pypdf = pypdf_module()
    for name in NAMES:
        headings = {h.strip() for h in re.findall(r"^#+ (.+)$", (rendered / f"{name}.md").read_text(), re.M)}
        for i, page in enumerate(pypdf.PdfReader(rendered / f"{name}.pdf").pages):
            lines = [line.strip() for line in (page.extract_text() or "").splitlines() if line.strip()]
            lines = [line for line in lines if not re.fullmatch(r"page \d+ of \d+", line)]
            assert lines and lines[-1] not in headings, f"{name}.pdf page {i + 1} ends on the heading {lines[-1]!r}"


def test_every_pdf_page_is_numbered(rendered):
    chromium()
    pypdf = pypdf_module()
    for name in NAMES:
        pages = pypdf.PdfReader(rendered / f"{name}.pdf").pages
        for i, page in enumerate(pages):
            assert f"page {i + 1} of {len(pages)}" in (page.extract_text() or ""), f"{name}.pdf page {i + 1}"


def test_code_blocks_are_highlighted_in_the_html_handout(rendered):
    pytest.importorskip("pygments", reason="Pygments colours the code (pip install -r grader/requirements-handouts.txt)")
    html = (rendered / "trmm.html").read_text()
    assert 'class="codehilite"' in html and ".codehilite .k" in html  # a keyword's colour, and its rule


def test_counts_of_calls_are_written_in_the_singular_for_one(rendered):
    text = (rendered / "jacobi.md").read_text()
    assert "1 warm-up call," in text and "1 warm-up calls" not in text


def test_make_handouts_and_dist_pass_no_pdf_on():
    for target in ("handouts", "dist"):
        dry = subprocess.run(["make", "-n", target, "NO_PDF=1"], cwd=ROOT, capture_output=True, text=True)
        assert dry.returncode == 0 and f"-m grader {target}" in dry.stdout and "--no-pdf" in dry.stdout, dry.stdout
