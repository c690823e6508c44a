"""Per-student reports of a batch: Markdown and HTML, with SVG plots (drawn by hand, no plotting
library needed) as image files beside them."""
from __future__ import annotations

import html
from typing import Optional

from .. import gradescope, svg
from ..report import md_code, md_fence, md_text
from ..results import GpuInfo
from ..tasks import describe


_CHAR_PX = 7.2
"""Width of one character at the plot's 12 px sans-serif font, generously: labels are never cut."""


def rate_plot(title: str, metric: str, bars: list, tiers: list = ()) -> str:
    """A horizontal bar chart as an SVG document: bars are (label, rate or None, colour); tiers are
    (rate, points), drawn as dashed lines over the bars and under every label."""
    vals = [v for _, v, _ in bars if v] + [r for r, _ in tiers]
    top = max(vals) * 1.12 if vals else 1.0
    left = 12 + _CHAR_PX * max([len(label) for label, _, _ in bars] + [10])
    width, row = 420, 28
    height = 40 + row * len(bars) + 30
    total = max(left + width + 90, 12 + _CHAR_PX * len(title))
    out = svg.start(total, height, title, font_size=12)
    base = 30 + row * len(bars)
    texts = []  # drawn last, each on white: over the tier lines, which lie over the bars
    for i, (label, v, colour) in enumerate(bars):
        y = 30 + i * row
        texts.append(f'<text x="{left - 6:.1f}" y="{y + 15}" text-anchor="end">{html.escape(label)}</text>')
        if v:
            w = max(1.0, width * v / top)
            out.append(f'<rect x="{left:.1f}" y="{y + 3}" width="{w:.1f}" height="{row - 8}" fill="{colour}"/>')
            text, x, fill = f"{v:,.0f}", left + w + 4, "#000"
        else:
            text, x, fill = "not measured", left + 4, "#888"
        texts.append(f'<rect x="{x - 2:.1f}" y="{y + 4}" width="{_CHAR_PX * len(text) + 4:.1f}" height="15" fill="white"/>')
        texts.append(f'<text x="{x:.1f}" y="{y + 15}" fill="{fill}">{text}</text>')
    for r, pts in tiers:
        x = left + width * r / top
        out.append(f'<line x1="{x:.1f}" y1="26" x2="{x:.1f}" y2="{base}" stroke="#444" stroke-dasharray="4 3"/>')
        out.append(f'<text x="{x:.1f}" y="{base + 12}" text-anchor="middle" fill="#666" font-size="10">{pts:g}</text>')
    out += texts
    out.append(f'<line x1="{left:.1f}" y1="{base}" x2="{left + width:.1f}" y2="{base}" stroke="#333"/>')
    out.append(f'<text x="{left + width / 2:.1f}" y="{base + 26}" text-anchor="middle">{html.escape(metric)} '
               f'(dashed: performance tiers, with their points)</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _plots(rec: dict, task, ref: Optional[dict], gpu_name: str) -> list:
    """(case id, SVG) per graded case: the student's rate, the reference's and the library's on this GPU."""
    plots = []
    mine = {p["case_id"]: p for p in rec.get("performance", [])}
    theirs = {p["case_id"]: p for p in (ref or {}).get("performance", [])} if ref else {}
    for g in task.graded:
        p, r = mine.get(g.case.id), theirs.get(g.case.id)
        base_name = (p or r or {}).get("baseline_name") or task.data["performance"].get("baseline", "library")
        base = (p or {}).get("baseline_rate") or (r or {}).get("baseline_rate")
        th = (p or r or {}).get("thresholds") or {}
        tiers = list(zip(th.get("rates", []), th.get("points", [])))
        bars = [("this submission", p["rate"] if p else None, "#1f77b4"),
                ("reference solution", r["rate"] if r else None, "#2ca02c"),
                (base_name, base, "#ff7f0e")]
        plots.append((g.case.id, rate_plot(f"{task.name}, {describe(g.case.params)}, on {gpu_name}", task.metric,
                                           bars, tiers)))
    return plots


def student_report(student: str, info: dict, recs: list, task_of: dict, refs: dict, gpu: GpuInfo) -> tuple:
    """(Markdown, HTML, {file name: SVG}) of one student's grading: the plots are image files beside
    the reports (Markdown viewers show an image, not SVG written into the text). What the student
    named or caused (names, file names, notes, messages, a build log) is written as text Markdown
    shows, never as Markdown or HTML of its own (report.md_text)."""
    name = info.get("name") or student
    images = {}
    total = sum(r.get("score", 0) for r in recs)
    possible = sum(task_of[a].max_score for a in task_of)
    md = [f"# {md_text(name)} ({md_text(student)})", "",
          f"Entry: {md_code(info.get('source', ''))} ({md_text(info.get('layout', ''))}); "
          f"GPU: {gpu.name}; total {total:g} / {possible:g}.", ""]
    body = [f"<h1>{html.escape(name)} ({html.escape(student)})</h1>",
            f"<p>Entry: <code>{html.escape(info.get('source', ''))}</code> ({html.escape(info.get('layout', ''))}); "
            f"GPU: {html.escape(gpu.name)}; total <b>{total:g} / {possible:g}</b>.</p>"]
    if info.get("problem"):
        md += [f"**{md_text(info['problem'])}**", ""]
        body.append(f"<p><b>{html.escape(info['problem'])}</b></p>")
    if info.get("notes"):
        md += ["Notes:", *[f"- {md_text(n)}" for n in info["notes"]], ""]
        body.append("<ul>" + "".join(f"<li>{html.escape(n)}</li>" for n in info["notes"]) + "</ul>")
    for rec in recs:
        a = rec["assignment"]
        task = task_of[a]
        hidden = set(rec.get("batch", {}).get("hidden_cases", []))
        verdict = rec.get("verdict")
        head = f"{a}: {verdict}, {rec.get('score', 0):g} / {task.max_score:g}"
        md += [f"## {md_text(head)}", "", f"File: {md_code(rec.get('batch', {}).get('file', ''))}", ""]
        body += [f"<h2>{html.escape(head)}</h2>",
                 f"<p>File: <code>{html.escape(rec.get('batch', {}).get('file', ''))}</code></p>"]
        if rec.get("message"):
            md += [md_text(rec["message"]), ""]
            body.append(f"<p>{html.escape(rec['message'])}</p>")
        if verdict in ("build_error", "forbidden_call") and rec.get("build_log"):
            log = rec["build_log"][:3000]
            md += [md_fence(log), ""]
            body.append(f"<pre>{html.escape(log)}</pre>")
        if rec.get("cases"):
            md += ["| case | size | result | rel. error | note |", "| --- | --- | --- | --- | --- |"]
            body.append("<table><tr><th>case</th><th>size</th><th>result</th><th>rel. error</th><th>note</th></tr>")
            for c in rec["cases"]:
                size = "(hidden)" if c["id"] in hidden else describe(c.get("params", {}))
                rel = c.get("rel_error")
                rel = f"{rel:.1e}" if isinstance(rel, (int, float)) and rel != float("inf") else "-"
                note = "" if c["verdict"] == "correct" else c.get("message", "")
                md.append(f"| {c['id']} | {size} | {c['verdict']} | {rel} | {md_text(note).replace('|', '/')} |")
                body.append("<tr>" + "".join(f"<td>{html.escape(str(x))}</td>"
                                             for x in (c["id"], size, c["verdict"], rel, note)) + "</tr>")
            md.append("")
            body.append("</table>")
        if verdict != gradescope.NOT_GRADED:
            for p in rec.get("performance", []):
                line = (f"Timed at {describe(p.get('params', {}))}: {p['rate']:,.1f} {p['metric']}, median "
                        f"{p.get('median_ms', 0):.3f} ms over {len(p['timing']['times_ms'])} runs")
                if p.get("baseline_rate"):
                    line += f"; {p.get('baseline_name')}: {p['baseline_rate']:,.1f} ({p['rate'] / p['baseline_rate']:.2f}x)"
                    if p.get("baseline_note"):
                        line += f" ({p['baseline_note']})"
                md += [line, ""]
                body.append(f"<p>{html.escape(line)}</p>")
            prof = rec.get("profile") or {}
            said = [prof["note"]] if "note" in prof else prof.get("hints", [])
            if said:
                md += ["Profile (Nsight Compute; not part of the score):", *[f"- {md_text(h)}" for h in said], ""]
                body.append("<p>Profile (Nsight Compute; not part of the score):</p><ul>"
                            + "".join(f"<li>{html.escape(h)}</li>" for h in said) + "</ul>")
            if prof.get("roofline"):
                roof = f"../records/{student}/{prof['roofline']}"
                md += [f"![{a}: roofline]({roof})", ""]
                body.append(f'<p><img src="{html.escape(roof)}" alt="{html.escape(a)}: roofline"></p>')
            for case_id, picture in _plots(rec, task, refs.get(a), gpu.name):
                name_ = f"{student}-{a}-{case_id}.svg"
                images[name_] = picture
                md += [f"![{a}: the rate against the reference and the library]({name_})", ""]
                body.append(f'<p><img src="{html.escape(name_)}" alt="{html.escape(a)}: the rate against the '
                            f'reference and the library"></p>')
    page = ("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>" + html.escape(f"{name}: grading") +
            "</title><style>body{font-family:sans-serif;max-width:900px;margin:2em auto}"
            "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 6px;text-align:left}"
            "pre{background:#f6f6f6;padding:8px;overflow-x:auto}</style></head><body>\n" + "\n".join(body) +
            "\n</body></html>\n")
    return "\n".join(md) + "\n", page, images
