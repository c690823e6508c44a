"""report.py, from recorded results (tests/fixtures/*.json): no GPU needed."""

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
EXAMPLES = HERE.parent
FIXTURES = HERE / "fixtures"
GOLDEN = HERE / "golden"
DRIVER = "570.00"

_spec = importlib.util.spec_from_file_location("slides_report", EXAMPLES / "report.py")
report = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(report)


def fixture(name):
    return json.loads((FIXTURES / f"{name}.json").read_text())


def write(tmp_path, *names, extra=()):
    out = tmp_path / "out"
    rc = report.main(["--no-plot", "--driver", DRIVER, "--out", str(out), *extra,
                      *[str(FIXTURES / f"{n}.json") for n in names]])
    return rc, out


def row_of(markdown, version):
    for line in markdown.splitlines():
        if line.startswith(f"| {version} |"):
            return [c.strip() for c in line.strip("|").split(" | ")]
    raise AssertionError(f"no row for version {version}")


def family(versions, peak="fp32", name="NVIDIA H200"):
    return {"family": "matmul", "peak": peak, "device": {"name": name}, "versions": versions}


def ver(k, rate, status="passed", prog=True, unit="GFLOPS"):
    return {"version": k, "name": f"v{k}", "status": status, "in_progression": prog,
            "ms": 1.0 if status == "passed" else 0, "rate": rate, "unit": unit}


GOLDEN_CASES = {"h200_matmul": "matmul", "h200_reduction": "reduction", "h200_jacobi": "jacobi",
                "unknown_dgemm": "dgemm"}


@pytest.mark.parametrize("case", sorted(GOLDEN_CASES))
def test_each_family_table_matches_its_golden_markdown(tmp_path, case):
    rc, out = write(tmp_path, case)
    assert rc == 0
    got = (out / f"{GOLDEN_CASES[case]}.md").read_text()
    assert got == (GOLDEN / f"{case}.md").read_text()


def test_step_and_cumulative_speedups_compare_with_the_previous_and_the_first_version_that_passed():
    rows = report.compute_rows(family([ver(1, 10.0), ver(2, 20.0), ver(3, 0, "failed"), ver(4, 80.0)]), None)
    assert [r["step"] for r in rows] == [None, 2.0, None, 4.0]
    assert [r["cumulative"] for r in rows] == [1.0, 2.0, None, 8.0]


def test_speedups_compare_rates_so_rows_timed_at_different_sizes_compare_fairly():
    # v1 took longer on a smaller problem: its rate, not its time, is what v2 is compared with.
    slow = dict(ver(1, 0.5), ms=500.0, size="n=256")
    fast = dict(ver(2, 500.0), ms=40.0, size="n=2048")
    rows = report.compute_rows(family([slow, fast]), None)
    assert rows[1]["step"] == pytest.approx(1000.0)


def test_an_aside_gets_no_speedups_and_does_not_break_the_chain():
    rows = report.compute_rows(family([ver(1, 10.0), ver(2, 1000.0, prog=False), ver(3, 20.0)]), None)
    assert rows[1]["step"] is None and rows[1]["cumulative"] is None
    assert rows[2]["step"] == 2.0 and rows[2]["cumulative"] == 2.0


def test_a_failed_version_is_listed_as_failed_and_never_timed(tmp_path):
    # The fixture's failed v3 still carries a time and a rate; neither may appear.
    data = fixture("h200_reduction")
    assert data["versions"][2]["status"] == "failed" and data["versions"][2]["ms"] == 2.5
    _, out = write(tmp_path, "h200_reduction")
    row = row_of((out / "reduction.md").read_text(), 3)
    assert row[3] == "**failed**"
    assert row[4:8] == ["—"] * 4
    assert "2.50" not in " ".join(row) and "859" not in " ".join(row)
    assert "check failed" in row[8]


def test_the_version_after_a_failed_one_is_compared_with_the_last_that_passed(tmp_path):
    _, out = write(tmp_path, "h200_reduction")
    row = row_of((out / "reduction.md").read_text(), 4)
    assert row[5] == "4.00x"  # over v2 (537 GB/s), not over the failed v3
    assert row[6] == "8.00x"


def test_a_two_gpu_version_that_cannot_run_is_listed_as_skipped_with_its_reason(tmp_path):
    _, out = write(tmp_path, "h200_jacobi")
    row = row_of((out / "jacobi.md").read_text(), 5)
    assert row[3] == "skipped"
    assert "needs two GPUs (found 1)" in row[8]


def test_a_version_the_program_never_reached_is_listed_as_not_run(tmp_path):
    _, out = write(tmp_path, "unknown_dgemm")
    row = row_of((out / "dgemm.md").read_text(), 4)
    assert row[3] == "not run" and "see its log" in row[8]


def test_an_unknown_gpu_shows_n_a_for_the_peak_and_says_why(tmp_path):
    _, out = write(tmp_path, "unknown_dgemm")
    md = (out / "dgemm.md").read_text()
    assert '"NVIDIA Fancy Future GPU" is not in assignments/gpus.json' in md
    for v in (1, 2, 3):
        assert row_of(md, v)[7] == "n/a"


def test_percent_of_peak_uses_the_familys_peak_from_gpus_json(tmp_path):
    gpus = report.load_gpus()
    assert report.peak_for("NVIDIA H200", "fp32", gpus) == (gpus["H200"]["fp32"] * 1000.0, "H200")
    assert report.peak_for("NVIDIA H200", "dram", gpus) == (float(gpus["H200"]["dram"]), "H200")
    _, out = write(tmp_path, "h200_matmul")
    rate = fixture("h200_matmul")["versions"][3]["rate"]
    expected = report.fmt_pct(100.0 * rate / (gpus["H200"]["fp32"] * 1000.0))
    assert row_of((out / "matmul.md").read_text(), 4)[7] == expected


def test_a_rate_in_another_unit_than_the_peak_gets_no_percentage():
    rows = report.compute_rows(family([ver(1, 100.0, unit="GB/s")], peak="fp32"), 67000.0)
    assert rows[0]["peak_pct"] is None


def test_the_header_names_the_gpu_driver_cuda_version_and_date(tmp_path):
    _, out = write(tmp_path, "h200_matmul")
    header = (out / "matmul.md").read_text().splitlines()[2]
    for part in ("NVIDIA H200", "driver 570.00", "CUDA runtime 13.0", "2026-11-22 01:30 UTC"):
        assert part in header


def test_the_index_links_every_family_and_names_the_missing_ones(tmp_path):
    out = tmp_path / "out"
    rc = report.main(["--no-plot", "--driver", DRIVER, "--out", str(out),
                      str(FIXTURES / "h200_matmul.json"), str(FIXTURES / "h200_jacobi.json"),
                      str(tmp_path / "conv1d.json")])
    assert rc == 0
    index = (out / "README.md").read_text()
    assert "[matmul.md](matmul.md)" in index and "[jacobi.md](jacobi.md)" in index
    assert "| conv1d |" in index and "no results" in index
    assert index.index("## matmul") < index.index("## jacobi")  # the lectures' order


def test_strict_fails_when_a_version_of_a_progression_failed_but_not_for_a_skip(tmp_path):
    assert write(tmp_path / "a", "h200_reduction", extra=["--strict"])[0] == 1
    assert write(tmp_path / "b", "h200_jacobi", "h200_matmul", extra=["--strict"])[0] == 0
    assert write(tmp_path / "c", "h200_reduction")[0] == 0  # without --strict: the tables only


def test_the_results_folder_is_named_after_the_gpu():
    assert report.slug("NVIDIA H200") == "nvidia-h200"
    assert report.slug("NVIDIA H100 80GB HBM3") == "nvidia-h100-80gb-hbm3"
    assert report.slug("Tesla V100-SXM2-16GB") == "tesla-v100-sxm2-16gb"
    assert report.slug("") == "unknown-gpu"


def test_without_matplotlib_the_markdown_is_written_and_one_line_says_why(tmp_path):
    fake = tmp_path / "fake" / "matplotlib"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('no matplotlib here')\n")
    out = tmp_path / "out"
    env = dict(os.environ, PYTHONPATH=str(fake.parent))
    p = subprocess.run([sys.executable, str(EXAMPLES / "report.py"), "--driver", DRIVER, "--out", str(out),
                        str(FIXTURES / "h200_matmul.json")], capture_output=True, text=True, env=env)
    assert p.returncode == 0, p.stderr
    lines = [l for l in p.stdout.splitlines() if l.startswith("report: matplotlib")]
    assert len(lines) == 1 and "not installed" in lines[0]
    assert (out / "matmul.md").exists() and not (out / "matmul.png").exists()
    assert "matmul.png" not in (out / "README.md").read_text()


def test_with_matplotlib_every_family_gets_a_png_plot(tmp_path):
    if report.load_pyplot() is None:
        pytest.skip("matplotlib is not installed (pip install matplotlib): the plots cannot be drawn")
    out = tmp_path / "out"
    assert report.main(["--driver", DRIVER, "--out", str(out), *[str(p) for p in sorted(FIXTURES.glob("*.json"))]]) == 0
    for fam in ("matmul", "dgemm", "reduction", "jacobi"):
        assert (out / f"{fam}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"![{fam}]({fam}.png)" in (out / "README.md").read_text()


def test_the_json_the_examples_write_is_what_the_report_reads(tmp_path):
    """common.cuh's writer, built on the host (no GPU): every status, quotes, an infinite error."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc not found: cannot build common.cuh's JSON writer")
    exe, js = tmp_path / "json_writer", tmp_path / "matmul.json"
    subprocess.run([nvcc, "-std=c++17", "-arch=sm_90", f"-I{EXAMPLES.parent / 'harness' / 'include'}",
                    str(HERE / "json_writer.cu"), "-o", str(exe)], check=True, capture_output=True, timeout=300)
    subprocess.run([str(exe), str(js)], check=True, timeout=60)
    data = json.loads(js.read_text())  # valid JSON despite inf and quotes
    assert [v["status"] for v in data["versions"]] == ["passed", "failed", "passed", "not run", "skipped"]
    out = tmp_path / "out"
    assert report.main(["--no-plot", "--driver", DRIVER, "--out", str(out), str(js)]) == 0
    md = (out / "matmul.md").read_text()
    assert row_of(md, 1)[4] == "11,000 GFLOPS"
    assert row_of(md, 2)[3] == "**failed**"
    assert row_of(md, 3)[3] == "passed, not timed"  # a zero time is never shown as a rate
    assert row_of(md, 4)[3] == "not run" and "(aside)" in row_of(md, 4)[1]
    assert row_of(md, 5)[3] == "skipped"


def test_a_slowdown_keeps_two_significant_digits_instead_of_printing_zero():
    assert report.fmt_speedup(0.0038) == "0.0038x"
    assert report.fmt_speedup(0.79) == "0.79x"
    assert report.fmt_speedup(2.14) == "2.14x"


def test_a_version_on_two_gpus_is_held_against_two_gpus_peak():
    one, two = ver(1, 3000.0, unit="GB/s"), dict(ver(2, 6000.0, unit="GB/s"), gpus=2)
    rows = report.compute_rows(family([one, two], peak="dram"), 4800.0)
    assert rows[0]["peak_pct"] == pytest.approx(62.5) and rows[1]["peak_pct"] == pytest.approx(62.5)


def test_the_plot_draws_a_peak_line_per_gpu_count_with_its_legend_below_the_bars_and_nothing_cut(tmp_path):
    plt = report.load_pyplot()
    if plt is None:
        pytest.skip("matplotlib is not installed (pip install matplotlib): the plots cannot be drawn")
    data = family([ver(1, 3000.0, unit="GB/s"), dict(ver(2, 6000.0, unit="GB/s"), gpus=2)], peak="dram")
    data["family"] = "jacobi"
    drawn = {}
    real_savefig = plt.Figure.savefig

    def keep(fig, path, **kw):
        drawn["fig"] = fig
        fig.canvas.draw()
        ax = fig.axes[0]
        drawn["legend_below"] = ax.get_legend().get_window_extent().y1 < ax.get_window_extent().y0
        drawn["tight"] = kw.get("bbox_inches") == "tight"
        drawn["lines"] = [line.get_label() for line in fig.axes[0].get_lines()]
        return real_savefig(fig, path, **kw)

    plt.Figure.savefig = keep
    try:
        report.plot(data, report.load_gpus(), tmp_path / "jacobi.png", plt)
    finally:
        plt.Figure.savefig = real_savefig
    assert drawn["tight"]  # the saved image grows to hold the whole title and legend
    assert drawn["legend_below"]
    assert any("(2 GPUs)" in label for label in drawn["lines"]) and len(drawn["lines"]) == 2
