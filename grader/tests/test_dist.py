"""dist.py and hidden cases: the student kit holds what a student needs and nothing of the
references or the hidden cases (checked by content), builds, and says so when there is no GPU;
hidden cases are graded only when asked. No GPU needed (tools/gpu_dist_check.sh grades the kit
on a GPU)."""
import copy
import json
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from grader import cli, gpu, tasks
from grader.tasks import TaskError

ROOT = tasks.ROOT
NAMES = tasks.registry()
IN_CI = os.environ.get("CI") == "true"

try:
    from grader import dist, handouts
    import jinja2  # noqa: F401
    import markdown  # noqa: F401
    HAVE_JINJA = True
except ImportError:
    HAVE_JINJA = False


@pytest.fixture(scope="module")
def kit(tmp_path_factory):
    """The student kit, built by `python -m grader dist` and unpacked; its top folder."""
    if not HAVE_JINJA:
        if IN_CI:
            pytest.fail("Jinja2/markdown are missing in CI: tools/test.sh installs them")
        pytest.skip("needs Jinja2 and markdown (pip install -r grader/requirements-handouts.txt)")
    tmp = tmp_path_factory.mktemp("dist")
    tarball = tmp / "kit.tar.gz"
    if handouts.find_chromium() is None and not IN_CI:
        dist.build(tarball, pdf=False)  # the PDFs are tested where Chromium is (test_handouts.py)
    else:
        r = subprocess.run([sys.executable, "-m", "grader", "dist", "--out", str(tarball)], capture_output=True,
                           text=True, env=dict(os.environ, PYTHONPATH=str(ROOT / "grader")), timeout=600)
        assert r.returncode == 0, r.stderr
    with tarfile.open(tarball) as tar:
        names = tar.getnames()
        assert all(n == dist.NAME or n.startswith(dist.NAME + "/") for n in names), names
        tar.extractall(tmp / "unpacked", filter="data") if hasattr(tarfile, "data_filter") else tar.extractall(tmp / "unpacked")
    return tmp / "unpacked" / dist.NAME


def files(folder: Path):
    return sorted(p for p in folder.rglob("*") if p.is_file())


def text_files(folder: Path):
    """(path, text) of every file that decodes as UTF-8 (all but the PDFs)."""
    out = []
    for p in files(folder):
        try:
            out.append((p, p.read_text()))
        except UnicodeDecodeError:
            assert p.suffix == ".pdf", f"unexpected binary file {p}"
    return out


# ---------------------------------------------------------------------------------------------
# What is in the kit.

def test_the_kit_holds_the_makefile_harness_grader_skeletons_task_files_and_handouts(kit):
    want = ["Makefile", "README.md", "assignments/registry.txt", "assignments/gpus.json",
            "grader/grader/__main__.py", "grader/grader/grade.py", "harness/include/kit.cuh",
            "harness/include/cuda_check.cuh", "handouts/index.html"]
    for name in NAMES:
        want += [f"assignments/{name}/task.json", f"assignments/{name}/problem.cu",
                 f"student_template/{name}/kernel.cu", f"handouts/{name}.md", f"handouts/{name}.html"]
        want += [f"assignments/{name}/{h.name}" for h in (ROOT / "assignments" / name).glob("*.h*")]
    missing = [w for w in want if not (kit / w).is_file()]
    assert not missing
    for name in NAMES:
        assert (kit / "student_template" / name / "kernel.cu").read_text() == \
            (ROOT / "student_template" / name / "kernel.cu").read_text()


def test_the_kit_has_no_reference_tests_ci_tools_or_slides_folders(kit):
    rel = [p.relative_to(kit).parts for p in files(kit)]
    for parts in rel:
        assert "reference" not in parts, parts
        assert parts[0] not in ("tools", ".ci", "slides_examples", "build", "grades", ".venv"), parts
        assert not (parts[0] == "assignments" and len(parts) > 2 and parts[2] == "tests"), parts
        assert not (parts[0] == "grader" and parts[1] != "grader"), parts  # the package, not its tests
        assert parts[:2] != ("harness", "tests"), parts
        assert "__pycache__" not in parts
    assert not (kit / "assignments" / "README.md").exists()


def test_the_students_readme_gives_the_commands_and_links_every_handout(kit):
    readme = (kit / "README.md").read_text()
    assert f"tar xzf {dist.NAME}.tar.gz" in readme and "make grade A=" in readme and "no CUDA GPU" in readme
    for name in NAMES:
        assert f"(handouts/{name}.html)" in readme
    assert "reference/" not in readme


# ---------------------------------------------------------------------------------------------
# No reference code, by content.

def code_lines(text: str, strip_comments: bool) -> list:
    """The lines that say something, whitespace collapsed: no blank lines, lone braces or
    preprocessor lines; without comments when asked."""
    if strip_comments:
        text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
        text = re.sub(r"//[^\n]*", "", text)
    out = []
    for line in text.splitlines():
        line = " ".join(line.split())
        if len(line) < 4 or line.startswith("#") or not re.search(r"[A-Za-z0-9]", line):
            continue
        out.append(line)
    return out


RUN = 4
"""Consecutive code lines that make a match. Three-line runs of common CUDA idiom (a barrier, a
`thread 0` branch, an accumulator) occur in independently written code, such as the checker's own
baseline kernels; four do not, anywhere in this kit."""


def windows(lines: list, k: int = RUN) -> set:
    return {tuple(lines[i:i + k]) for i in range(len(lines) - k + 1)}


def reference_runs() -> dict:
    """Every run of RUN consecutive code lines of every reference/<name>/kernel.cu (comments, which
    restate the public problem, left out)."""
    return {name: windows(code_lines((ROOT / "reference" / name / "kernel.cu").read_text(), True))
            for name in NAMES if (ROOT / "reference" / name / "kernel.cu").is_file()}


def leaks(folder: Path) -> list:
    """(file, reference, lines) for every run of reference code found in a text file under folder."""
    refs = reference_runs()
    found = []
    for path, text in text_files(folder):
        have = windows(code_lines(text, False)) | windows(code_lines(text, True))
        for name, runs in refs.items():
            for run in sorted(have & runs)[:1]:
                found.append((str(path), name, run))
    return found


def test_no_run_of_four_reference_code_lines_appears_anywhere_in_the_kit(kit):
    assert reference_runs(), "no reference kernels to compare with"
    assert all(len(r) > 20 for r in reference_runs().values())
    assert leaks(kit) == []


def test_the_content_check_finds_reference_code_pasted_into_a_skeleton(kit, tmp_path):
    import shutil
    copy_ = tmp_path / "kit"
    shutil.copytree(kit, copy_)
    ref = code_lines((ROOT / "reference" / "reduce" / "kernel.cu").read_text(), True)
    middle = len(ref) // 2
    skeleton = copy_ / "student_template" / "trmm" / "kernel.cu"
    skeleton.write_text(skeleton.read_text() + "\n// pasted\n" + "\n".join("    " + l for l in ref[middle:middle + RUN]) + "\n")
    found = leaks(copy_)
    assert [(Path(f).name, name) for f, name, _ in found] == [("kernel.cu", "reduce")]


# ---------------------------------------------------------------------------------------------
# Hidden cases: not in the kit; graded only when asked.

def test_the_kits_task_files_are_the_public_cases_only_with_everything_else_unchanged(kit):
    for name in NAMES:
        mine = json.loads((ROOT / "assignments" / name / "task.json").read_text())
        theirs = json.loads((kit / "assignments" / name / "task.json").read_text())
        assert theirs == dict(mine, cases=[c for c in mine["cases"] if not c.get("hidden")])
        assert tasks.load(name, kit).hidden == []


def test_no_hidden_case_id_or_seed_appears_in_any_file_of_the_kit(kit):
    hidden = [c for n in NAMES for c in tasks.load(n).hidden]
    assert hidden, "the task files should have hidden cases to check"
    for path, text in text_files(kit):
        for c in hidden:
            assert f'"{c.id}"' not in text and f"`{c.id}`" not in text, (path, c.id)
            assert not re.search(rf"\b{c.seed}\b", text), (path, c.seed)


def test_removing_hidden_cases_keeps_every_other_character_of_the_task_file():
    text = ('{\n  "title": "x",\n  "cases": [\n    {"id": "a", "seed": 1},\n'
            '    {"id": "h", "seed": 2, "hidden": true},\n    {"id": "b", "seed": 3,\n     "why": "two lines"},\n'
            '    {"id": "last", "seed": 4, "hidden": true}\n  ],\n  "graded": {"id": "a"}\n}\n')
    assert dist.strip_hidden(text) == ('{\n  "title": "x",\n  "cases": [\n    {"id": "a", "seed": 1},\n'
                                       '    {"id": "b", "seed": 3,\n     "why": "two lines"}\n  ],\n'
                                       '  "graded": {"id": "a"}\n}\n')
    plain = '{"cases": [{"id": "a", "seed": 1}]}'
    assert dist.strip_hidden(plain) is plain


def test_hidden_cases_are_left_out_of_grading_unless_asked_for():
    for name in NAMES:
        public, everything = tasks.load(name), tasks.load(name, include_hidden=True)
        assert all(not c.hidden for c in public.cases)
        assert [c.id for c in everything.cases if c.hidden] == [c.id for c in public.hidden]
        assert len(everything.cases) == len(public.cases) + len(public.hidden)


def test_a_hidden_graded_case_or_a_hidden_flag_that_is_not_a_boolean_is_refused():
    data = json.loads((ROOT / "assignments" / "trmm" / "task.json").read_text())
    bad = copy.deepcopy(data)
    graded = next(c for c in bad["cases"] if c["id"] == bad["graded"]["id"])
    graded.update(id="hidden-9", hidden=True)
    bad["graded"]["id"] = "hidden-9"
    with pytest.raises(TaskError, match="graded case 'hidden-9' is hidden"):
        tasks.parse("trmm", ROOT, bad, "t.json")
    bad = copy.deepcopy(data)
    bad["cases"][0]["hidden"] = "yes"
    with pytest.raises(TaskError, match="hidden must be true or false"):
        tasks.parse("trmm", ROOT, bad, "t.json")


def test_grade_with_hidden_grades_the_hidden_cases_too(monkeypatch):
    seen = []

    class Stop(Exception):
        pass

    def fake_grade(task, src, info, options):
        seen.append([c.id for c in task.cases])
        raise Stop

    monkeypatch.setattr(cli.gpu, "detect", lambda: None)
    monkeypatch.setattr(cli, "grade", fake_grade)
    for argv in (["grade", "trmm"], ["grade", "trmm", "--hidden"]):
        with pytest.raises(Stop):
            cli.main(argv)
    hidden = [c.id for c in tasks.load("trmm").hidden]
    assert hidden and not set(hidden) & set(seen[0]) and set(hidden) <= set(seen[1])


def test_make_grade_passes_hidden_1_on_to_the_grader():
    def dry(*extra):
        return subprocess.run(["make", "-n", "-C", str(ROOT), "grade", "A=trmm", *extra],
                              capture_output=True, text=True, check=True).stdout
    assert "--hidden" in dry("HIDDEN=1")
    assert "--hidden" not in dry() and "--hidden" not in dry("HIDDEN=0")


# ---------------------------------------------------------------------------------------------
# The kit works: it builds, and without a GPU it says so.

def test_the_unpacked_kit_builds_the_harness_for_one_assignment(kit):
    # One assignment (reduce: CUB, the heaviest headers) shows that the kit's Makefile, harness and
    # assignment files compile on their own; the others share every file but problem.cu, which
    # the kit's own C++ tests compile from the same sources.
    jobs = len(os.sched_getaffinity(0))
    r = subprocess.run(["make", "-C", str(kit), f"-j{jobs}", "harness", "A=reduce", "ARCH=sm_90"],
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert (kit / "build" / "sm_90" / "reduce" / "checker").is_file()
    assert (kit / "build" / "sm_90" / "reduce" / "problem_runner.o").is_file()


def test_make_grade_in_the_kit_without_a_gpu_says_there_is_no_gpu(kit):
    try:
        gpu.detect()
        pytest.skip("this machine has a GPU: tools/gpu_dist_check.sh grades the kit there")
    except gpu.NoGpu:
        pass
    r = subprocess.run(["make", "-C", str(kit), "grade", "A=reduce"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and "grader: no CUDA GPU" in r.stderr, r.stdout + r.stderr
    r = subprocess.run([sys.executable, "-m", "grader", "grade", "reduce"], cwd=kit, capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=str(kit / "grader")), timeout=300)
    assert r.returncode == 2 and r.stderr.startswith("grader: no CUDA GPU"), r.stderr


def test_every_target_the_kits_make_help_names_works_there_and_none_is_the_instructors(kit):
    shown = subprocess.run(["make", "-s", "-C", str(kit), "help"], capture_output=True, text=True, check=True).stdout
    targets = sorted({line.split()[2] for line in shown.splitlines() if line.strip().startswith("#   make ")})
    assert targets == ["clean", "grade", "harness"], shown
    for t in targets:
        r = subprocess.run(["make", "-n", "-C", str(kit), t, "A=reduce", "ARCH=sm_90"], capture_output=True, text=True)
        assert r.returncode == 0, (t, r.stderr)
    for word in ("test", "handouts", "dist", "batch", "bench", "slides", "HIDDEN"):
        assert word not in shown, word


@pytest.mark.parametrize("grader_exit,make_ok", [(0, True), (1, True), (2, False)])
def test_make_grade_ends_cleanly_once_a_grading_completed_whatever_the_score(kit, tmp_path, grader_exit, make_ok):
    fake = tmp_path / "python3"  # stands for the grader: "arch" answers, "grade" ends with grader_exit
    fake.write_text(f'#!/bin/sh\ncase "$*" in *" arch"*) echo sm_90;; *) echo "Score: 60 / 100"; exit {grader_exit};; esac\n')
    fake.chmod(0o755)
    r = subprocess.run(["make", "-C", str(kit), "grade", "A=reduce", f"PYTHON={fake}"], capture_output=True, text=True)
    assert (r.returncode == 0) == make_ok, r.stdout + r.stderr
    assert ("***" in r.stderr) == (not make_ok), r.stderr  # make's error line ("make[1]: ***" under make test)


def test_the_students_readme_prints_whole_with_every_code_line_inside_the_page(kit, tmp_path):
    """The kit's README, printed as the handouts are: no command cut at the edge of its box."""
    import shutil
    browser = handouts.find_chromium()
    if browser is None or shutil.which("pdftotext") is None:
        if IN_CI:
            pytest.fail("Chromium and pdftotext are installed by tools/test.sh in CI")
        pytest.skip("needs Chromium and pdftotext (apt-get install chromium poppler-utils)")
    html = handouts.page(handouts.environment(), (kit / "README.md").read_text(), "README")
    (tmp_path / "README.html").write_text(html)
    handouts.print_pdfs([(tmp_path / "README.html", tmp_path / "README.pdf")], browser)
    problems = handouts.pdf_problems(tmp_path / "README.pdf", html)
    assert not problems, "\n".join(problems)
