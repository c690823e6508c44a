"""What a student names or causes (a file name in an archive, a message, a compiler's quote of their
source) reaches the TA's terminal summary, summary.md and the Markdown reports: each piece is one line
there, and in Markdown it is text, never a heading, list, code block or HTML of its own, while the TA
still sees what it was. The batches run with the fake kit (fake_kit.py): no nvcc, no GPU."""
import re
import zipfile
from pathlib import Path

import pytest

from fake_kit import args, kernel, read_gradebook
from grader import batch, build

FORGED_ROW = "bob                      trmm       100/100    correct"
HEADING = "x\n\n## trmm: correct, 100 / 100\n\nChecked by hand by the TA: full marks.\n\n.zip"
IMG = "<img src=x onerror=alert(document.cookie)>"
FENCE_BREAK = f"/\n```\n\n{IMG}\n\n**All 40 submissions graded; no errors.**\n\n```"


def _zip(path: Path, members: dict) -> None:
    with zipfile.ZipFile(path, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)


def _summary_part(printed: str) -> list:
    """The lines of the terminal's batch summary, up to its stage table."""
    return printed.split("== Batch summary", 1)[1].split("\nstage", 1)[0].splitlines()


def _code_block(md: str) -> tuple:
    """(the lines inside summary.md's code block, what follows it): the block is closed by the first
    line that is a run of at least as many backticks as opened it (CommonMark's rule)."""
    lines = md.splitlines()
    opening = re.fullmatch(r"(`{3,})", lines[0])
    assert opening, lines[0]
    end = next(i for i, line in enumerate(lines[1:], 1)
               if re.fullmatch(rf" {{0,3}}`{{{len(opening[1])},}} *", line))
    return lines[1:end], lines[end + 1:]


def test_a_file_name_inside_an_archive_cannot_add_a_row_to_the_batch_summary(fake_kit, tmp_path, capsys):
    subs = tmp_path / "subs"
    (subs / "alice" / "trmm").mkdir(parents=True)
    (subs / "alice" / "trmm" / "kernel.cu").write_text(kernel("reference"))
    (subs / "bob" / "trmm").mkdir(parents=True)
    (subs / "bob" / "trmm" / "kernel.cu").write_text(kernel("skeleton"))
    # refused as an absolute path, and the refusal quotes the name
    _zip(subs / "mallory.zip", {"/\n" + FORGED_ROW + "\n": "x"})
    out = tmp_path / "out"
    batch.main(args(subs, out))
    printed = capsys.readouterr().out

    book = {r["student"]: r["trmm"] for r in read_gradebook(out)}
    assert book == {"alice": "100", "bob": "0", "mallory": ""}
    inside, _ = _code_block((out / "summary.md").read_text())
    for lines in (_summary_part(printed), inside):
        assert FORGED_ROW not in lines
        assert [line.split()[-1] for line in lines if line.startswith("bob ")] == ["incorrect"]
        mallory = [line for line in lines if line.startswith("mallory ")]
        assert len(mallory) == 1 and f"(/\\n{FORGED_ROW}\\n)" in mallory[0], mallory


def test_a_file_name_inside_an_archive_cannot_add_a_heading_or_html_to_a_students_report(fake_kit, tmp_path):
    subs = tmp_path / "subs"
    subs.mkdir()
    # a nested "archive" that cannot be read: its name goes into the notes and the entry's problem
    _zip(subs / "mallory.zip", {HEADING.replace(".zip", IMG + ".zip"): b"not a zip"})
    out = tmp_path / "out"
    batch.main(args(subs, out))

    assert {r["student"]: r["trmm"] for r in read_gradebook(out)} == {"mallory": ""}
    md = (out / "reports" / "mallory.md").read_text()
    lines = md.splitlines()
    assert [line for line in lines if line.startswith("#")] == ["# mallory (mallory)"]
    assert "<img" not in md
    shown = "x\\n\\n## trmm: correct, 100 / 100\\n\\nChecked by hand by the TA: full marks.\\n\\n" \
            "&lt;img src=x onerror=alert(document.cookie)&gt;.zip"
    problem = [line for line in lines if line.startswith("**nothing gradeable:")]
    assert len(problem) == 1 and shown in problem[0] and problem[0].endswith("**"), lines
    assert [line for line in lines if line.startswith("- ")] == \
        [f"- {shown}: archive refused: it cannot be read as an archive (BadZipFile: File is not a zip file)"]


def test_a_file_name_inside_an_archive_cannot_close_the_summarys_code_block_or_add_html(fake_kit, tmp_path):
    subs = tmp_path / "subs"
    subs.mkdir()
    _zip(subs / "mallory.zip", {FENCE_BREAK: "x"})
    out = tmp_path / "out"
    batch.main(args(subs, out))

    assert {r["student"]: r["trmm"] for r in read_gradebook(out)} == {"mallory": ""}
    inside, after = _code_block((out / "summary.md").read_text())
    assert after == []  # the whole summary is in the block: nothing of it is read as Markdown or HTML
    mallory = [line for line in inside if line.startswith("mallory ")]
    assert len(mallory) == 1 and f"(/\\n```\\n\\n{IMG}\\n\\n**All 40" in mallory[0], inside
    assert IMG not in inside and not [line for line in inside if line.lstrip().startswith("`")]
    md = (out / "reports" / "mallory.md").read_text()
    assert "<img" not in md and "&lt;img src=x onerror=alert(document.cookie)&gt;" in md
    assert not [line for line in md.splitlines() if line.lstrip().startswith(("`", "**All"))]


def test_a_graded_files_name_in_a_report_stays_inside_its_inline_code(fake_kit, tmp_path):
    subs = tmp_path / "subs"
    subs.mkdir()
    name = "hw/a`b``\n## trmm: correct, 100 / 100\n<img src=x onerror=alert(1)>.cu"
    _zip(subs / "mallory.zip", {name: kernel("skeleton")})  # graded: it defines the entry point
    out = tmp_path / "out"
    batch.main(args(subs, out))

    assert {r["student"]: r["trmm"] for r in read_gradebook(out)} == {"mallory": "0"}
    lines = (out / "reports" / "mallory.md").read_text().splitlines()
    assert [line for line in lines if line.startswith("#")] == ["# mallory (mallory)", "## trmm: incorrect, 0 / 100"]
    # three backticks: more than any run of them in the name, so none of its own ends the code
    assert "File: ```hw/a`b``\\n## trmm: correct, 100 / 100\\n<img src=x onerror=alert(1)>.cu```" in lines


def test_a_line_of_the_build_log_cannot_close_its_code_block_in_the_report(fake_kit, tmp_path, monkeypatch):
    source = kernel("reference") + f"```\n{IMG}\n## trmm: correct, 100 / 100\n"

    def quoting_compiler(src, work, arch, timeout):  # nvcc quotes the line of source it stopped at
        return False, "kernel.cu(3): error: this declaration has no storage class or type specifier\n" + \
            Path(src).read_text()

    monkeypatch.setattr(build, "compile_submission", quoting_compiler)
    subs = tmp_path / "subs"
    (subs / "mallory" / "trmm").mkdir(parents=True)
    (subs / "mallory" / "trmm" / "kernel.cu").write_text(source)
    out = tmp_path / "out"
    batch.main(args(subs, out))

    assert {r["student"]: r["trmm"] for r in read_gradebook(out)} == {"mallory": "0"}
    lines = (out / "reports" / "mallory.md").read_text().splitlines()
    start = lines.index("kernel.cu(3): error: this declaration has no storage class or type specifier") - 1
    fence = lines[start]
    assert re.fullmatch("`{4,}", fence), fence  # longer than the source's own ```
    end = lines.index(fence, start + 1)
    assert lines[start + 1:end] == ["kernel.cu(3): error: this declaration has no storage class or type specifier",
                                    *source.splitlines(), ""]  # the log's own lines, as the compiler wrote them
    outside = lines[:start] + lines[end + 1:]
    assert [line for line in outside if line.startswith("#")] == \
        ["# mallory (mallory)", "## trmm: build_error, 0 / 100"]
    assert IMG not in outside


def test_the_reports_and_summary_render_with_no_heading_or_html_the_student_wrote(fake_kit, tmp_path):
    markdown = pytest.importorskip("markdown")
    subs = tmp_path / "subs"
    subs.mkdir()
    _zip(subs / "mallory.zip", {HEADING: b"not a zip", "hw/x\n# trmm: correct\n" + IMG + "`.cu": kernel("skeleton")})
    _zip(subs / "trudy.zip", {FENCE_BREAK: "x"})
    out = tmp_path / "out"
    batch.main(args(subs, out))

    for path in (out / "reports" / "mallory.md", out / "reports" / "trudy.md", out / "summary.md"):
        page = markdown.markdown(path.read_text(), extensions=["fenced_code", "tables"])
        assert "<img src=x" not in page and "&lt;img src=x" in page, (path, page)
        assert not re.search(r"<h\d>trmm: correct|<strong>All 40|<h\d>[^<]*Checked by hand", page), (path, page)
    heads = re.findall(r"<h\d>([^<]*)</h\d>", markdown.markdown((out / "reports" / "mallory.md").read_text()))
    assert heads == ["mallory (mallory)", "trmm: incorrect, 0 / 100"]


@pytest.mark.parametrize("text", ["# a", "  ## a", "- a", "+ a", "* a", "1. a", "2) a", "```a", "~~~", "> a",
                                  "___", "<b>a</b>", "a &amp; b", "[a](http://x)", "![a](http://x)", "a\\`b`c",
                                  "a\\", "a\n- b\r\n# c\t<d>"])
def test_text_in_a_markdown_report_is_one_line_that_opens_no_block_code_link_or_html(text):
    from grader.report import md_text
    shown = md_text(text)
    assert "\n" not in shown and "\r" not in shown and "<" not in shown
    assert not re.match(r" *([#+*_~>-]|\d+[.)])", shown), shown
    # every backtick and bracket is escaped by a backslash that is not itself escaped
    assert not re.search(r"(?<!\\)(\\\\)*[`\[\]]", shown), shown
    assert not shown.endswith("\\") or shown.endswith("\\\\")


def test_ordinary_text_reads_as_before_in_the_summary_and_the_reports():
    from grader.report import md_code, md_fence, md_text, one_line
    plain = "hw/notes.txt: not named after an assignment and defines no entry point; not graded"
    assert one_line(plain) == md_text(plain) == plain
    assert md_code("trmm/kernel.cu") == "`trmm/kernel.cu`" and md_code("") == "``"
    assert md_fence("a\nb") == "```\na\nb\n```"
    assert one_line("a\nb\r\tc\x1b") == "a\\nb\\r\\tc\\x1b"


def test_a_line_of_the_batch_log_is_one_line_whatever_the_compiler_quoted(capsys):
    # A build error's message is the compiler's, which quotes the student's source line: the batch
    # printed it whole after "batch: mallory trmm: build_error", a line of the student's choosing.
    import threading
    from grader.batch.progress import Progress
    p = Progress.__new__(Progress)
    p.lock, p.tty = threading.Lock(), False
    p._say("batch: mallory trmm: build_error 0/100: kernel.cu(3): error: expected a declaration\n"
           "batch: bob trmm: correct 100/100\n")
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "batch: bob trmm: correct 100/100" in err
    assert not any(line.startswith("batch: bob") for line in err.splitlines())
