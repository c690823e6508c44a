#!/usr/bin/env python3
"""report.py: the lecture examples' results as Markdown tables and PNG plots, per GPU.

    python3 report.py [--out DIR] [--driver TEXT] [--gpus FILE] [--no-plot] [--strict] FAMILY.json ...

Reads the JSON that each example writes with --json FILE and writes, into DIR (default
results/<gpu-slug>/ next to this file):

    <family>.md    a header (GPU, driver, CUDA version, date, the peak used) and the table:
                   version, size, time, rate, step speedup, cumulative speedup, % of peak, notes
    <family>.png   a bar chart of the rates (log scale when they span more than 20x); only where
                   matplotlib is installed, and one line says so where it is not
    README.md      the index: every family's table and plot on one page
    driver.txt     the driver version used in the headers (from --driver or nvidia-smi), read
                   back when the tables are redrawn on a machine without the GPU

Speedups compare rates (work per second), so that rows timed at different sizes (a one-thread
version at a small n) compare fairly. Step: over the previous version of the progression that
passed. Cumulative: over the first that passed. A version that failed its check is listed as
failed, with no time. An aside (not in the progression) gets no speedups.

The peak is the GPU's datasheet value in assignments/gpus.json, looked up by the device name
the driver reports; for a GPU not listed there, % of peak is "n/a" and the header says why.
--strict exits with status 1 when a version of a progression failed or did not run.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
GPUS_JSON = HERE.parent / "assignments" / "gpus.json"

TITLES = {
    "matmul": "matrix multiply, FP32",
    "dgemm": "matrix multiply, FP64 (the course's DGEMM report)",
    "conv1d": "1D convolution, FP32",
    "reduction": "the sum of 2^28 doubles (the course's reduction report)",
    "jacobi": "Jacobi iteration for the 3D Poisson problem, FP64",
}
ORDER = ["matmul", "dgemm", "conv1d", "reduction", "jacobi"]

# peak kind -> (the rate's unit, factor from the gpus.json value to that unit, label, gpus.json unit)
PEAKS = {
    "fp64": ("GFLOPS", 1000.0, "FP64", "TFLOPS"),
    "fp32": ("GFLOPS", 1000.0, "FP32", "TFLOPS"),
    "dram": ("GB/s", 1.0, "DRAM bandwidth", "GB/s"),
}

DASH = "—"


def slug(name: str) -> str:
    """The results folder of a GPU: 'NVIDIA H200' -> 'nvidia-h200'."""
    s = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    return s or "unknown-gpu"


def load_gpus(path: Path = GPUS_JSON) -> dict:
    try:
        return json.loads(Path(path).read_text())["gpus"]
    except (OSError, ValueError, KeyError):
        return {}


def peak_for(device_name: str, kind: str, gpus: dict):
    """(peak in the rate's unit, model) for a device name, or (None, None) if it is not listed."""
    for model, entry in gpus.items():
        if device_name in entry.get("names", []) and kind in PEAKS and kind in entry:
            return float(entry[kind]) * PEAKS[kind][1], model
    return None, None


def is_timed(r: dict, check_only: bool = False) -> bool:
    return r.get("status") == "passed" and not check_only and float(r.get("ms", 0)) > 0


def compute_rows(data: dict, peak) -> list:
    """The table's rows, with step and cumulative speedups and % of peak (None where n/a)."""
    check_only = bool(data.get("check_only"))
    unit_of_peak = PEAKS.get(data.get("peak", ""), (None,))[0]
    rows, first, prev = [], None, None
    for r in data.get("versions", []):
        row = dict(r)
        row["timed"] = is_timed(r, check_only)
        row["step"] = row["cumulative"] = row["peak_pct"] = None
        in_prog = r.get("in_progression", True)
        if row["timed"]:
            rate = float(r["rate"])
            if peak and r.get("unit") == unit_of_peak:  # a version on two GPUs against two GPUs' peak
                row["peak_pct"] = 100.0 * rate / (peak * int(r.get("gpus", 1)))
            if in_prog:
                if first is None:
                    first = rate
                    row["cumulative"] = 1.0
                else:
                    row["step"] = rate / prev
                    row["cumulative"] = rate / first
                prev = rate
        rows.append(row)
    return rows


def fmt_num(x: float) -> str:
    if x >= 100:
        return f"{x:,.0f}"
    if x >= 10:
        return f"{x:.1f}"
    if x >= 1:
        return f"{x:.2f}"
    return f"{x:.3g}"


def fmt_ms(ms: float) -> str:
    if ms >= 100:
        return f"{ms:.0f}"
    if ms >= 10:
        return f"{ms:.1f}"
    if ms >= 1:
        return f"{ms:.2f}"
    return f"{ms:.3f}"


def fmt_speedup(x) -> str:
    if x is None:
        return DASH
    if x >= 100:
        return f"{x:,.0f}x"
    if x >= 10:
        return f"{x:.1f}x"
    if x >= 0.1:
        return f"{x:.2f}x"
    return f"{x:.2g}x"  # a slowdown keeps two significant digits: 0.0038x, never 0.00x


def fmt_pct(p) -> str:
    if p is None:
        return "n/a"
    if p < 0.01:
        return "<0.01%"
    if p < 1:
        return f"{p:.2f}%"
    return f"{p:.1f}%"


def row_cells(row: dict, peak_known: bool, check_only: bool) -> list:
    status = row.get("status", "not run")
    note = row.get("note", "") or ""
    name = row["name"] if row.get("in_progression", True) else f"*{row['name']}* (aside)"
    size = row.get("size") or DASH
    if row["timed"]:
        time, rate = fmt_ms(float(row["ms"])), f"{fmt_num(float(row['rate']))} {row['unit']}"
        pct = fmt_pct(row["peak_pct"]) if peak_known else "n/a"
        return [str(row["version"]), name, size, time, rate, fmt_speedup(row["step"]),
                fmt_speedup(row["cumulative"]), pct, note]
    if status == "passed":  # --check-only
        label = "passed, not timed"
    elif status == "failed":
        label = "**failed**"
    elif status == "skipped":
        label = "skipped"
    else:
        label = "not run"
        stop = "the program stopped before this version: see its log"
        note = f"{note}; {stop}" if note else stop
    return [str(row["version"]), name, size, label, DASH, DASH, DASH, DASH, note]


def device_line(data: dict, driver: str | None) -> str:
    dev = data.get("device", {})
    drv = driver or f"CUDA driver API {dev.get('driver_api', '?')}"
    count = dev.get("count", 1)
    gpus = f" (x{count} in this machine)" if count and count > 1 else ""
    return (f"GPU: **{dev.get('name', '?')}**{gpus}, compute capability {dev.get('compute_capability', '?')}, "
            f"{dev.get('sms', '?')} SMs · driver {drv} · CUDA runtime {dev.get('runtime', '?')} · "
            f"{data.get('date', '?')}")


def peak_line(data: dict, peak, model) -> str:
    kind = data.get("peak", "")
    name = data.get("device", {}).get("name", "?")
    if kind not in PEAKS:
        return "% of peak: n/a (no peak kind recorded)."
    unit, factor, label, src_unit = PEAKS[kind]
    if peak is None:
        return (f"% of peak: **n/a**: \"{name}\" is not in assignments/gpus.json (add it there, "
                f"with its datasheet peaks, to get this column).")
    return (f"Peak: {label} {peak / factor:g} {src_unit} ({model} datasheet, assignments/gpus.json); "
            f"% of peak = rate / peak.")


FOOTNOTE = (
    "Time: median over the timed runs, L2 cache flushed before each (the notes say where a "
    "version was timed once). Step speedup: rate over the previous version of the progression "
    "that passed; cumulative: over the first. Rates, not times, are compared, so rows at "
    "different sizes compare fairly. A version that fails its check is listed as failed and "
    "never timed."
)


def table(data: dict, rows: list, peak) -> str:
    head = ["#", "version", "size", "time (ms)", "rate", "step speedup", "cumulative speedup",
            "% of peak", "notes"]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(["---:", "---", "---", "---:", "---:", "---:", "---:", "---:", "---"]) + "|"]
    for row in rows:
        cells = row_cells(row, peak is not None, bool(data.get("check_only")))
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines)


def family_markdown(data: dict, driver: str | None, gpus: dict, level: int = 1) -> str:
    fam = data["family"]
    peak, model = peak_for(data.get("device", {}).get("name", ""), data.get("peak", ""), gpus)
    rows = compute_rows(data, peak)
    h = "#" * level
    parts = [
        f"{h} {fam}: {TITLES.get(fam, fam)}",
        "",
        device_line(data, driver),
        "",
        peak_line(data, peak, model) + (" A version on several GPUs is held against that many times the peak."
                                        if peak and any(int(r.get("gpus", 1)) > 1 for r in rows) else ""),
        "",
        table(data, rows, peak),
        "",
        FOOTNOTE,
    ]
    if data.get("check_only"):
        parts += ["", "Run with --check-only: every version checked, none timed."]
    return "\n".join(parts) + "\n"


def load_pyplot():
    """matplotlib.pyplot with a file-only backend, or None where matplotlib is missing."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        return plt
    except ImportError:
        return None


def plot(data: dict, gpus: dict, path: Path, plt) -> None:
    peak, _ = peak_for(data.get("device", {}).get("name", ""), data.get("peak", ""), gpus)
    rows = compute_rows(data, peak)
    labels, rates, colors, texts = [], [], [], []
    unit = next((r["unit"] for r in rows if r["timed"]), "")
    for r in rows:
        labels.append(f"v{r['version']} {r['name']}" + ("" if r.get("in_progression", True) else " (aside)"))
        if r["timed"]:
            rates.append(float(r["rate"]))
            colors.append("tab:blue" if r.get("in_progression", True) else "tab:gray")
            cum = fmt_speedup(r["cumulative"]) if r["cumulative"] is not None else ""
            texts.append(f" {fmt_num(float(r['rate']))}" + (f" ({cum})" if cum else ""))
        else:
            rates.append(0.0)
            colors.append("white")
            texts.append(" " + ("FAILED" if r.get("status") == "failed" else r.get("status", "not run")))
    positive = [x for x in rates if x > 0]
    fig, ax = plt.subplots(figsize=(9, 0.55 * len(rows) + 1.6))
    y = list(range(len(rows)))[::-1]
    log = bool(positive) and max(positive) / min(positive) > 20
    floor = min(positive) / 3 if positive else 1.0
    bars = [x if x > 0 else (floor if log else 0) for x in rates]
    ax.barh(y, bars, color=colors, edgecolor="tab:blue")
    if log:
        ax.set_xscale("log")
    for yi, b, t in zip(y, bars, texts):  # on white, so that a peak line behind stays readable
        ax.annotate(t.strip(), (b, yi), xytext=(5, 0), textcoords="offset points", va="center", fontsize=8,
                    zorder=3, bbox=dict(facecolor="white", edgecolor="none", pad=0.3, alpha=0.9))
    peaks = []
    if peak and unit == PEAKS[data["peak"]][0]:
        counts = sorted({int(r.get("gpus", 1)) for r in rows if r["timed"]} or {1})
        for k, style in zip(counts, ("--", ":")):
            label = f"datasheet peak: {fmt_num(peak * k)} {unit}" + (f" ({k} GPUs)" if k > 1 else "")
            ax.axvline(peak * k, color="tab:red", linestyle=style, linewidth=1, label=label, zorder=1)
            peaks.append(peak * k)
        # Below the axis, out of the bars and their labels.
        ax.legend(loc="upper right", bbox_to_anchor=(1, -0.14 if len(rows) > 3 else -0.25), fontsize=8, frameon=False)
    ax.set_yticks(y)
    ax.set_yticklabels(labels, fontsize=8)
    ax.set_xlabel(unit + (" (log scale)" if log else ""))
    if positive:
        hi = max(positive + peaks)
        ax.set_xlim(right=hi * (8 if log else 1.35))
    dev = data.get("device", {}).get("name", "?")
    ax.set_title(f"{data['family']}: {TITLES.get(data['family'], '')}\non {dev}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight")  # the whole title and legend, never cut
    plt.close(fig)


def nvidia_smi_driver() -> str | None:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    line = out.stdout.strip().splitlines()[0].strip() if out.returncode == 0 and out.stdout.strip() else ""
    return line or None


def index_markdown(datas: list, missing: list, driver: str | None, gpus: dict, plots: bool) -> str:
    first = datas[0] if datas else {}
    name = first.get("device", {}).get("name", "?")
    parts = [f"# Lecture examples on {name}", "", device_line(first, driver), "",
             "Each family's progression, measured on this GPU by `make -C slides_examples bench`. "
             "Every version was checked against a CPU reference before it was timed.", ""]
    parts.append("| family | versions | passed | failed | skipped / not run | table | plot |")
    parts.append("|---|---:|---:|---:|---:|---|---|")
    for d in datas:
        vs = d.get("versions", [])
        count = lambda s: sum(1 for v in vs if v.get("status") == s)
        other = len(vs) - count("passed") - count("failed")
        plot_cell = f"[{d['family']}.png]({d['family']}.png)" if plots else DASH
        parts.append(f"| {d['family']} | {len(vs)} | {count('passed')} | {count('failed')} | {other} | "
                     f"[{d['family']}.md]({d['family']}.md) | {plot_cell} |")
    for m in missing:
        parts.append(f"| {m} | {DASH} | {DASH} | {DASH} | {DASH} | no results: the program wrote none (see its log) | {DASH} |")
    for d in datas:
        parts += ["", family_markdown(d, driver, gpus, level=2).rstrip()]
        if plots:
            parts += ["", f"![{d['family']}]({d['family']}.png)"]
    return "\n".join(parts) + "\n"


def family_key(data: dict):
    fam = data.get("family", "")
    return (ORDER.index(fam) if fam in ORDER else len(ORDER), fam)


def problems(data: dict) -> list:
    """Versions of the progression that failed or did not run (skipped ones are not problems)."""
    out = []
    for v in data.get("versions", []):
        if not v.get("in_progression", True):
            continue
        if v.get("status") in ("failed", "not run"):
            out.append(f"{data['family']} v{v['version']} ({v['name']}): {v.get('status')}: {v.get('note', '')}")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("json", nargs="+", type=Path, help="the examples' --json files")
    ap.add_argument("--out", type=Path, help="output folder (default: results/<gpu-slug>/ here)")
    ap.add_argument("--driver", help="driver version to print (default: nvidia-smi's, else the JSON's driver API)")
    ap.add_argument("--gpus", type=Path, default=GPUS_JSON, help="the GPU table (default: assignments/gpus.json)")
    ap.add_argument("--no-plot", action="store_true", help="write the Markdown only")
    ap.add_argument("--strict", action="store_true", help="exit 1 if a version of a progression failed or did not run")
    args = ap.parse_args(argv)

    datas, missing = [], []
    for p in args.json:
        if not p.exists():
            missing.append(p.stem)
            continue
        try:
            datas.append(json.loads(p.read_text()))
        except ValueError as e:
            print(f"report: {p}: not valid JSON ({e})", file=sys.stderr)
            missing.append(p.stem)
    if not datas:
        print("report: no results to report (" + ", ".join(str(p) for p in args.json) + ")", file=sys.stderr)
        return 1
    datas.sort(key=family_key)
    gpus = load_gpus(args.gpus)
    out = args.out or HERE / "results" / slug(datas[0].get("device", {}).get("name", ""))
    out.mkdir(parents=True, exist_ok=True)
    # The driver: --driver, else nvidia-smi's, else the one recorded when the results were made
    # (driver.txt, so that the tables can be redrawn on a machine without the GPU).
    saved = out / "driver.txt"
    driver = args.driver or nvidia_smi_driver()
    if driver:
        saved.write_text(driver + "\n")
    elif saved.exists():
        driver = saved.read_text().strip() or None

    plt = None
    if not args.no_plot:
        plt = load_pyplot()
        if plt is None:
            print("report: matplotlib is not installed, so no PNG plots (pip install matplotlib); "
                  "the Markdown tables are written.")
    for d in datas:
        (out / f"{d['family']}.md").write_text(family_markdown(d, driver, gpus))
        if plt is not None:
            plot(d, gpus, out / f"{d['family']}.png", plt)
    (out / "README.md").write_text(index_markdown(datas, missing, driver, gpus, plt is not None))
    print(f"report: wrote {out}/README.md and {len(datas)} table(s)" + (" and plots" if plt else ""))

    bad = [p for d in datas for p in problems(d)] + [f"{m}: no results" for m in missing]
    for b in bad:
        print(f"report: {b}")
    return 1 if (args.strict and bad) else 0


if __name__ == "__main__":
    sys.exit(main())
