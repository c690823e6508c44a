"""For instructors: each assignment across the class, from a batch's records. Into OUT/class/:

  README.md                   per assignment: how many were graded and correct, the scores' and the
                              rates' spread, how many reached each performance tier; the pictures
  <a>-scores.svg              the scores, ten points to a bar
  <a>-rates-<case>.svg        every correct submission's rate as a dot, the tiers and the reference
  <a>-roofline.svg            with --profile: each profiled submission's longest kernel on the GPU's
                              roofline, the reference's too

Nothing here names a student: the page can be shown to the class.
"""
from __future__ import annotations

import html
import json
import statistics
from pathlib import Path

from .. import svg
from ..profile.roofline import svg as roofline_svg
from ..profile.run import peaks


def write(out: Path, task_of: dict, gpu) -> Path:
    """Writes OUT/class/ from OUT/records/ and OUT/reference/; returns its README."""
    folder = out / "class"
    folder.mkdir(parents=True, exist_ok=True)
    md = ["# The class, per assignment", "",
          f"From the batch's records ({gpu.name}). No student is named here.", ""]
    for a, task in task_of.items():
        recs = [json.loads(p.read_text()) for p in sorted((out / "records").glob(f"*/{a}.json"))]
        recs = [r for r in recs if r.get("verdict") != "not_graded"]
        if not recs:
            continue
        ref_path = out / "reference" / f"{a}.json"
        ref = json.loads(ref_path.read_text()) if ref_path.is_file() else {}
        scores = [float(r.get("score", 0)) for r in recs]
        correct = [r for r in recs if r.get("verdict") == "correct"]
        md += [f"## {a}", "", f"{len(recs)} graded, {len(correct)} correct; scores: median {round(_median(scores), 1):g}, "
               f"quartiles {_quartiles(scores)} of {task.max_score:g}.", "", f"![{a}: scores]({a}-scores.svg)", ""]
        (folder / f"{a}-scores.svg").write_text(_histogram(f"{a}: scores of {len(recs)} submissions", scores,
                                                           task.max_score))
        md += ["| graded case | correct and timed | rate: median (min - max) | per tier (points: count) |",
               "| --- | --- | --- | --- |"]
        for g in task.graded:
            perf = [p for r in correct for p in r.get("performance", []) if p.get("case_id") == g.case.id]
            if not perf:
                md.append(f"| {g.case.id} | 0 | - | - |")
                continue
            rates = [float(p["rate"]) for p in perf]
            th = next((p.get("thresholds") for p in perf if p.get("thresholds")), None) or {}
            tiers = list(zip(th.get("rates", []), th.get("points", [])))
            counts = ", ".join(f"{pts:g}: {sum(1 for p in perf if abs(float(p.get('points') or 0) - pts) < 1e-9)}"
                               for _, pts in tiers)
            counts = (f"0: {sum(1 for p in perf if not p.get('points'))}, " if tiers else "") + counts
            md.append(f"| {g.case.id} | {len(perf)} | {_median(rates):,.0f} ({min(rates):,.0f} - {max(rates):,.0f}) "
                      f"{task.metric} | {counts or '-'} |")
            ref_rate = next((p["rate"] for p in ref.get("performance", []) if p.get("case_id") == g.case.id), None)
            name = f"{a}-rates-{g.case.id}.svg"
            (folder / name).write_text(_strip(f"{a}, {g.case.describe()}: rates of {len(rates)} correct submissions",
                                              task.metric, rates, tiers, ref_rate))
            md += ["", f"![{a}: rates at {g.case.id}]({name})", ""]
        points = [(f"submission {i + 1}", "submission", k.get("intensity"), (k.get("gflops") or 0) * 1e9)
                  for i, k in enumerate(_main_kernels(correct))]
        points += [("reference", "reference", k.get("intensity"), (k.get("gflops") or 0) * 1e9)
                   for k in _main_kernels([ref] if ref else [])]
        if any(ai and f for _, _, ai, f in points):
            name = f"{a}-roofline.svg"
            (folder / name).write_text(roofline_svg(f"{a}: the class on the roofline of {gpu.name}",
                                                    peaks(task, gpu), points, key=False))
            md += ["", f"![{a}: the class on the roofline]({name})", ""]
        md.append("")
    readme = folder / "README.md"
    readme.write_text("\n".join(md).rstrip() + "\n")
    return readme


def _main_kernels(recs: list) -> list:
    """The longest kernel of each profiled record."""
    return [r["profile"]["kernels"][0] for r in recs if (r.get("profile") or {}).get("kernels")]


def _median(xs: list) -> float:
    return statistics.median(xs) if xs else 0.0


def _quartiles(xs: list) -> str:
    if len(xs) < 2:
        return f"{xs[0]:g} - {xs[0]:g}" if xs else "-"
    q = statistics.quantiles(xs, n=4, method="inclusive")
    return f"{round(q[0], 1):g} - {round(q[2], 1):g}"


def _histogram(title: str, scores: list, top: float) -> str:
    """Scores in ten bars (the last holds full marks)."""
    bins = [0] * 10
    for s in scores:
        bins[min(9, int(10 * s / top))] += 1 if top > 0 else 0
    left, width, height, base = 40, 400, 160, 190
    tallest = max(bins) or 1
    out = svg.start(left + width + 20, base + 40, title)
    bw = width / 10
    for i, n in enumerate(bins):
        h = height * n / tallest
        out.append(f'<rect x="{left + i * bw + 2:.1f}" y="{base - h:.1f}" width="{bw - 4:.1f}" height="{h:.1f}" fill="#1f77b4"/>')
        if n:
            out.append(f'<text x="{left + (i + 0.5) * bw:.1f}" y="{base - h - 3:.1f}" text-anchor="middle">{n}</text>')
        out.append(f'<text x="{left + i * bw:.1f}" y="{base + 14}" text-anchor="middle" fill="#444">{top * i / 10:g}</text>')
    out.append(f'<text x="{left + width:.1f}" y="{base + 14}" text-anchor="middle" fill="#444">{top:g}</text>')
    out.append(f'<line x1="{left}" y1="{base}" x2="{left + width}" y2="{base}" stroke="#333"/>')
    out.append(f'<text x="{left + width / 2}" y="{base + 32}" text-anchor="middle">score</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _strip(title: str, metric: str, rates: list, tiers: list, ref_rate) -> str:
    """Each rate a dot on one axis (stacked where they would cover each other), the tiers dashed and
    the reference marked."""
    top = max(rates + [r for r, _ in tiers] + ([ref_rate] if ref_rate else [])) * 1.1
    left, width, base = 20, 560, 150
    out = svg.start(left + width + 30, base + 50, title)
    for r, pts in tiers:
        x = left + width * r / top
        out.append(f'<line x1="{x:.1f}" y1="40" x2="{x:.1f}" y2="{base}" stroke="#444" stroke-dasharray="4 3"/>')
        out.append(f'<text x="{x:.1f}" y="36" text-anchor="middle" fill="#666" font-size="10">{r:,.0f}</text>')
        out.append(f'<text x="{x:.1f}" y="{base + 12}" text-anchor="middle" fill="#666" font-size="10">{pts:g}</text>')
    if ref_rate:  # a line of its own, behind the dots
        x = left + width * ref_rate / top
        out.append(f'<line x1="{x:.1f}" y1="40" x2="{x:.1f}" y2="{base}" stroke="#2ca02c" stroke-width="2"/>')
        out.append(f'<text x="{x:.1f}" y="{base + 24}" text-anchor="middle" fill="#2ca02c" font-size="10">'
                   f'reference {ref_rate:,.0f}</text>')
    stacks: dict = {}
    for r in sorted(rates):
        col = int(width * r / top / 8)  # dots closer than 8 px stack up
        stacks[col] = stacks.get(col, 0) + 1
        x, y = left + width * r / top, base - 6 - 9 * (stacks[col] - 1)
        out.append(f'<circle cx="{x:.1f}" cy="{max(y, 44):.1f}" r="4" fill="#1f77b4" fill-opacity="0.8"/>')
    out.append(f'<line x1="{left}" y1="{base}" x2="{left + width}" y2="{base}" stroke="#333"/>')
    out.append(f'<text x="{left + width / 2}" y="{base + 40}" text-anchor="middle">{html.escape(metric)} '
               f'(dots: submissions; dashed: tiers, their rate above, their points below)</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"
