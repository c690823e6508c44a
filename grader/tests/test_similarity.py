"""The code-similarity report (similarity.py), on a generated class of 40 entries: 24 independently
written solutions of trmm, reduce and conv1d (fixtures/similarity/), and 16 planted copies (verbatim,
renamed, reordered and re-commented, a changed constant, a copy of the hidden reference, a copy of a
lecture kernel). Every planted copy must be reported, against what it was copied from, and no pair of
independent solutions. No GPU needed."""
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from grader import batch, similarity, tasks

pytest.importorskip("copydetect", reason="the similarity report needs copydetect (pip install copydetect)")

ROOT = tasks.ROOT
INDEPENDENT = Path(__file__).parent / "fixtures" / "similarity"
KEEP = set("""auto break case char const constexpr continue default do double else enum extern float for if inline
int long namespace return short signed sizeof static struct switch template typename unsigned using void volatile
while bool true false nullptr size_t __global__ __device__ __host__ __shared__ __constant__ __restrict__
__forceinline__ __syncthreads include define pragma unroll""".split())


def renamed(text: str, keep: set = frozenset()) -> str:
    """Every identifier the code defines or uses renamed (keywords and `keep` aside): a thorough disguise."""
    names = {}

    def sub(m):
        w = m.group(0)
        if w in KEEP or w in keep or w.startswith(("cuda", "CUDA", "__")):
            return w
        return names.setdefault(w, f"q{len(names)}_{w[::-1]}")
    out = []
    for line in text.splitlines():
        out.append(line if line.lstrip().startswith("#include") else re.sub(r"\b[A-Za-z_]\w*\b", sub, line))
    return "\n".join(out) + "\n"


def reordered(text: str) -> str:
    """Top-level functions in the opposite order, each announced first; new comments; another indent."""
    text = re.sub(r"//[^\n]*", "", text)
    chunks = re.split(r"\n(?=(?:template <[^\n]*\n)?(?:__global__|__device__|__inline__|static|void|double)\b[^\n]*\{\n)", text)
    head, funcs = chunks[0], chunks[1:]
    protos = [f.split("{", 1)[0].rstrip() + ";" for f in funcs if not f.startswith("template")]
    body = "\n".join(reversed(funcs))
    body = "\n".join(("  " * ((len(l) - len(l.lstrip())) // 4)) + l.lstrip() for l in body.splitlines())
    return head + "\n// forward declarations, as I like them\n" + "\n".join(protos) + "\n\n" + body + "\n"


def lecture_code(file: str, *functions: str) -> str:
    """Functions of a lecture file, cut out as a student would paste them (with what they use)."""
    text = (ROOT / "slides_examples" / file).read_text()
    out = []
    for name in functions:
        start = text.rindex("\n", 0, text.index(f" {name}(")) + 1
        out.append(text[start:text.index("\n}\n", start) + 3])
    return "\n".join(out)


def make_class(folder: Path) -> tuple:
    """(submissions {student: (assignment, file)}, planted {(student, source): kind})."""
    subs, planted = {}, {}
    n = 0

    def add(assignment, text, source=None, kind=None):
        nonlocal n
        n += 1
        student = f"s{n:02d}"
        path = folder / student / "kernel.cu"
        path.parent.mkdir(parents=True)
        path.write_text(text)
        subs[student] = (assignment, path)
        if source:
            planted[(student, source)] = kind
        return student

    owner = {}
    for a in ("trmm", "reduce", "conv1d"):
        for f in sorted((INDEPENDENT / a).glob("*.cu")):
            owner[(a, f.stem)] = add(a, f.read_text())
    text = lambda a, stem: (INDEPENDENT / a / f"{stem}.cu").read_text()
    ref = lambda a: (ROOT / "reference" / a / "kernel.cu").read_text()
    # trmm: verbatim, renamed, reordered, another tile size, the reference renamed.
    add("trmm", text("trmm", "naive_2d"), owner[("trmm", "naive_2d")], "classmates")
    add("trmm", renamed(text("trmm", "grid_stride"), {"trmm"}), owner[("trmm", "grid_stride")], "classmates")
    add("trmm", reordered(text("trmm", "four_columns")), owner[("trmm", "four_columns")], "classmates")
    add("trmm", renamed(text("trmm", "tiled16").replace("T = 16", "T = 32"), {"trmm"}), owner[("trmm", "tiled16")],
        "classmates")
    add("trmm", renamed(ref("trmm"), {"trmm"}), "reference", "reference")
    # reduce: verbatim, renamed, reordered, the reference renamed, a lecture kernel pasted in.
    add("reduce", text("reduce", "shared_tree"), owner[("reduce", "shared_tree")], "classmates")
    add("reduce", renamed(text("reduce", "persistent_counter"), {"reduce_sum"}), owner[("reduce", "persistent_counter")],
        "classmates")
    add("reduce", reordered(text("reduce", "kahan_blocks")), owner[("reduce", "kahan_blocks")], "classmates")
    add("reduce", renamed(ref("reduce"), {"reduce_sum"}), "reference", "reference")
    add("reduce", '#include "cuda_check.cuh"\n#define BS 256\n\n' +
        lecture_code("reduction.cu", "load_two", "warp_reduce_smem", "reduce_unroll_last_warp") +
        "\nvoid reduce_sum(long long n, const double* x, double* sum) {\n"
        "    cudaMemset(sum, 0, sizeof(double));\n"
        "    reduce_unroll_last_warp<<<(n + 511) / 512, BS>>>(n, x, sum);\n}\n", "lecture: reduction.cu", "lecture")
    # conv1d: verbatim, renamed, reordered, a changed constant, the reference renamed, a lecture kernel.
    add("conv1d", text("conv1d", "shared_halo"), owner[("conv1d", "shared_halo")], "classmates")
    add("conv1d", renamed(text("conv1d", "warp_window"), {"conv1d"}), owner[("conv1d", "warp_window")], "classmates")
    add("conv1d", reordered(text("conv1d", "split_edges")), owner[("conv1d", "split_edges")], "classmates")
    add("conv1d", text("conv1d", "mask_in_shared").replace("384", "256"), owner[("conv1d", "mask_in_shared")],
        "classmates")
    add("conv1d", renamed(ref("conv1d"), {"conv1d"}), "reference", "reference")
    add("conv1d", '#include "cuda_check.cuh"\n#define BLOCK 256\n#define MAX_MASK 255\n__constant__ float Mc[MAX_MASK];\n\n' +
        lecture_code("conv1d.cu", "conv1d_tiled", "conv1d_tiled_const") +
        "\nvoid conv1d(int n, int w, const float* N, const float* M, float* P) {\n"
        "    cudaMemcpyToSymbol(Mc, M, w * sizeof(float), 0, cudaMemcpyDeviceToDevice);\n"
        "    conv1d_tiled_const<<<(n + BLOCK - 1) / BLOCK, BLOCK, (BLOCK + w - 1) * sizeof(float)>>>(n, w, N, P);\n}\n", "lecture: conv1d.cu", "lecture")
    return subs, planted


def batch_output(tmp_path: Path, subs: dict) -> Path:
    """A batch's output as the similarity verb reads it: a record per graded file."""
    out = tmp_path / "out"
    for student, (a, path) in subs.items():
        rec = out / "records" / student / f"{a}.json"
        rec.parent.mkdir(parents=True, exist_ok=True)
        rec.write_text(json.dumps({"assignment": a, "submission": str(path), "verdict": "correct"}))
    (out / "summary.md").write_text("```\n== Batch summary\n```\n")
    return out


@pytest.fixture(scope="module")
def reported(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("class")
    subs, planted = make_class(tmp / "class")
    out = batch_output(tmp, subs)
    t0 = time.monotonic()
    results = similarity.report(out, say=lambda line: None)
    return SimpleNamespace(subs=subs, planted=planted, out=out, results={r.assignment: r for r in results},
                           seconds=time.monotonic() - t0)


def test_the_generated_class_has_40_entries_24_of_them_independent(reported):
    assert len(reported.subs) == 40
    assert len(reported.planted) == 16


def test_every_planted_copy_is_reported_against_its_source_with_its_kind(reported):
    found = {}
    for r in reported.results.values():
        for p in r.pairs:
            found[(p.a, p.b)] = found[(p.b, p.a)] = p
    missing = [(s, src, kind) for (s, src), kind in reported.planted.items()
               if (s, src) not in found or found[(s, src)].kind != kind]
    assert not missing, missing
    assert all(found[k].score >= similarity.THRESHOLD for k in reported.planted)


def test_no_pair_of_independent_solutions_is_reported_nor_one_with_the_lecture_or_reference(reported):
    independent = {s for s, _ in reported.subs.items()} - {s for s, _ in reported.planted}
    sources = {src for _, src in reported.planted}
    wrong = [(p.a, p.b, round(p.score, 2)) for r in reported.results.values() for p in r.pairs
             if p.a in independent and (p.b in independent or p.kind != "classmates") and p.b not in sources
             and p.a not in sources]
    assert not wrong, wrong


def test_the_html_report_shows_both_files_side_by_side_with_the_shared_code_marked(reported):
    page = (reported.out / "similarity" / "trmm.html").read_text()
    assert "<mark>" in page and 'class="pair"' in page
    assert "COPY OF THE HIDDEN REFERENCE" in page
    assert "not a verdict" in page


def test_the_ranked_table_goes_into_the_batch_summary_once_however_often_it_is_made(reported):
    similarity.report(reported.out, say=lambda line: None)
    text = (reported.out / "summary.md").read_text()
    assert text.count("== Similarity") == 1 and "== Batch summary" in text
    assert "trmm: 13 submissions" in text


def test_a_class_of_300_is_compared_in_well_under_a_minute(tmp_path):
    files = sorted(INDEPENDENT.glob("trmm/*.cu"))
    students = {}
    for i in range(300):  # each a thoroughly renamed independent solution, with a constant of its own
        p = tmp_path / f"s{i:03d}.cu"
        p.write_text(renamed(files[i % len(files)].read_text(), {"trmm"}).replace("256", str(64 + i)))
        students[f"s{i:03d}"] = p
    t0 = time.monotonic()
    r = similarity.compare("trmm", students)
    assert time.monotonic() - t0 < 30
    assert r.compared == 300


def test_a_batch_asked_for_a_similarity_report_without_copydetect_stops_before_grading(monkeypatch, tmp_path):
    def missing():
        raise tasks.TaskError("the similarity report needs copydetect: python3 -m pip install copydetect")
    monkeypatch.setattr(similarity, "_copydetect", missing)
    monkeypatch.setattr(batch.gpu_mod, "detect", lambda: pytest.fail("nothing may be graded"))
    (tmp_path / "class").mkdir()
    args = SimpleNamespace(submissions=tmp_path / "class", out=tmp_path / "out", jobs=1, assignments=["trmm"],
                           regrade=None, regrade_all=False, timed_runs=None, no_reference=True, no_isolation=True,
                           memory_gib=16, similarity=True, threshold=None)
    with pytest.raises(tasks.TaskError, match="copydetect"):
        batch.main(args)


def test_the_verb_without_copydetect_says_how_to_get_it_in_one_line(monkeypatch, tmp_path, capsys):
    from grader import cli

    def missing():
        raise tasks.TaskError("the similarity report needs copydetect: python3 -m pip install copydetect")
    monkeypatch.setattr(similarity, "_copydetect", missing)
    out = batch_output(tmp_path, {"s01": ("trmm", INDEPENDENT / "trmm" / "tiled16.cu")})
    assert cli.main(["similarity", str(out)]) == 2
    assert capsys.readouterr().err.strip() == "grader: the similarity report needs copydetect: python3 -m pip install copydetect"


def test_the_verb_on_a_folder_that_is_not_a_batchs_output_says_so(tmp_path, capsys):
    from grader import cli
    assert cli.main(["similarity", str(tmp_path)]) == 2
    assert "is not a batch's output" in capsys.readouterr().err


def test_the_same_class_gives_the_same_scores_in_another_process(reported):
    code = ("import json, sys; from pathlib import Path; from grader import similarity; "
            "r = similarity.compare('trmm', {k: Path(v) for k, v in json.loads(sys.argv[1]).items()}); "
            "print(json.dumps([[p.a, p.b, round(p.score, 6)] for p in r.pairs]))")
    students = {s: str(p) for s, (a, p) in reported.subs.items() if a == "trmm"}
    runs = [subprocess.run([sys.executable, "-c", code, json.dumps(students)], capture_output=True, text=True,
                           env={**os.environ, "PYTHONPATH": str(ROOT / "grader"), "PYTHONHASHSEED": seed},
                           check=True).stdout for seed in ("1", "2")]
    assert runs[0] == runs[1] and json.loads(runs[0])


class Deadline(Exception):
    pass


def timed(call, seconds: float):
    """(what call() returns, the CPU seconds it took); Deadline if it takes longer than `seconds` (a lexer
    that is quadratic again would hold the suite for hours). CPU time, not wall time: the other tests
    may run beside this one (make test's workers), and their load is not the lexer's."""
    def stop(*_):
        raise Deadline(f"still running after {seconds} s")
    old = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        t0 = time.thread_time()
        return call(), time.thread_time() - t0
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def test_a_file_built_to_slow_the_lexer_is_compared_in_linear_time(tmp_path):
    # "#/*" repeated: Pygments' lexer searched for the comment's end from every "#" to the end of the file
    # (80 KB: 40 s, 160 KB: minutes); a copy with it after the code is still found.
    code = (INDEPENDENT / "trmm" / "tiled16.cu").read_text()
    took = {}
    for kb in (80, 160):
        students = {"alice": tmp_path / f"alice{kb}.cu", "mallory": tmp_path / f"mallory{kb}.cu"}
        students["alice"].write_text(code)
        students["mallory"].write_text(code + "#/*" * (kb * 1024 // 3))
        r, took[kb] = timed(lambda: similarity.compare("trmm", students), 30)
        pair, = [p for p in r.pairs if p.kind == "classmates"]
        assert (pair.a, pair.b) == ("alice", "mallory")
        (text, slices), _ = pair.marked
        assert text == code and 0 <= slices.min() and slices.max() <= len(code)  # the file's own code marked
    assert took[160] < 5, took
    assert took[160] < 2.5 * took[80] + 0.5, took  # twice the file, twice the time (four times: quadratic)


SLOW_SHAPES = {"#/*": ("#/*", ""), "a function's ( after each {": ("{a b(", ""), "raw strings with no end": ('R"(', ""),
               "includes with no >": ("#include <\n", ""), "comments in preprocessor lines": ('#define S "/*"\n', ""),
               "blank lines": ("\n", "x"), "a run of spaces": (" ", "a")}
"""name: (what is repeated, what is around it)."""


@pytest.mark.parametrize("shape", SLOW_SHAPES)
def test_other_texts_that_slowed_the_lexer_take_time_linear_in_their_length(shape):
    from copydetect.utils import filter_code
    unit, around = SLOW_SHAPES[shape]
    # Four times the text: four times the time if linear, sixteen if quadratic; the line between is
    # drawn at eight, far from both (a machine busy with the class's builds made a linear 2x read 3x).
    # Each size's better of two runs: a pause of the machine's is not the lexer's.
    took = {}
    for n in (25_000, 100_000):
        text = around + unit * (n // len(unit)) + around
        took[n] = min(timed(lambda: filter_code(similarity.skeleton(text)[0], "kernel.cu", "cuda"), 20)[1]
                      for _ in range(2))
    assert took[100_000] < 8 * took[25_000] + 0.1, took


EDGES = """// it's a header; with "quotes" ) {
#include <cuda_runtime.h>  // the runtime's
#define M /* mid */ 128
#define LONGMAC(a, b) \\
    do { a = b; } while (0) // done
#if 0
  this isn't code /* with a comment
  */ and more
#endif
void k(float* a,   // a (input) { read }
       float* b) {                                      /* b's */
    char c = '\\'', d = '"'; const char* s = "a // b /* c */ \\" d";
    auto r = R"x(raw // string /* with ) stuff)x"; int big = 1'000'000;
  label:\t\tb[0] = a[0];
}
void f(int n /* size; */) {
}
""" + "/* " + "a long comment, it's longer than LONG; (see f) { " * 8 + "*/\n"


def test_the_lexer_makes_the_same_tokens_of_a_files_skeleton_as_of_the_file():
    from copydetect.utils import filter_code
    texts = {"edges": EDGES, "edges, one line apart": EDGES.replace("\n", "\n\n\n   ")}
    for f in [*sorted(INDEPENDENT.glob("*/*.cu")), *sorted(ROOT.glob("reference/*/kernel.cu")),
              *sorted(ROOT.glob("slides_examples/*.cu")), *sorted(ROOT.glob("student_template/*/kernel.cu"))]:
        texts[str(f.relative_to(ROOT))] = f.read_text()
    assert len(texts) > 40
    tokens = lambda text: filter_code(text, "kernel.cu", "cuda")[0]  # noqa: E731
    differ = [name for name, text in texts.items() if tokens(similarity.skeleton(text)[0]) != tokens(text)]
    assert not differ, differ


def test_only_the_first_part_of_a_very_long_file_is_compared_and_the_report_says_so(tmp_path):
    code = (INDEPENDENT / "trmm" / "tiled16.cu").read_text()
    (tmp_path / "a.cu").write_text(code)
    (tmp_path / "b.cu").write_text(code + "int pad;\n" * (similarity.CAP // 9))
    r = similarity.compare("trmm", {"alice": tmp_path / "a.cu", "bob": tmp_path / "b.cu"})
    assert r.cut == ["bob"] and [(p.a, p.b) for p in r.pairs if p.kind == "classmates"] == [("alice", "bob")]
    assert any("only the first 256 KiB of 1 submission(s) compared" in line and "bob" in line
               for line in similarity.summary_lines([r]))
    similarity.write(tmp_path, r)
    assert "only the first 256 KiB of 1 submission(s) compared, the rest of each left out: bob" in \
        (tmp_path / "similarity" / "trmm.html").read_text()
