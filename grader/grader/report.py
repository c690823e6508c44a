"""Reports of a grading: a terminal summary for people, a JSON record for programs."""
from __future__ import annotations

import html
import json
import os
import re
from pathlib import Path

from .profile import LAUNCHES
from .results import GradeResult, Verdict
from .tasks import describe

_MARK = {Verdict.CORRECT: "pass", Verdict.NOT_RUN: "-"}


def printable(text: str) -> str:
    """Text as a terminal or a text file shows it, whatever a submission put in it: control and format
    characters (escape sequences, carriage returns, bells, right-to-left overrides) written out as
    \\x1b, \\u202e; newlines and tabs kept. A compiler error quotes the student's line, and a program's
    output and messages are its own: an escape sequence there could erase a line of the TA's terminal and
    print a verdict of its choosing, or set the terminal's clipboard."""
    return "".join(c if c.isprintable() or c in "\n\t" else f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}"
                   for c in text)


_BREAKS = str.maketrans({"\n": "\\n", "\r": "\\r", "\t": "\\t"})


def one_line(text) -> str:
    """printable, with newlines, carriage returns and tabs written out too (\\n, \\r, \\t): for what a
    student named or caused (a file name, a message, a note) where a line of a summary or a report
    shows it. A line break there would start a line of the student's choosing, such as a row for
    another student."""
    return printable(str(text).translate(_BREAKS))


_MD_ESCAPED_BACKSLASH = re.compile(r"\\(?=[!-/:-@\[-`{-~]|$)")
_MD_BLOCK_START = re.compile(r"^( *)([#+*_~-]|\d{1,9}(?=[.)]))")


def md_text(text) -> str:
    """one_line, and inert as Markdown text: it opens no heading, list, quote, fence, code span,
    link or raw HTML, and reads as it was written once the Markdown is shown. A name or a message
    in a report is the student's, and the TA's viewer would draw what it says."""
    t = _MD_ESCAPED_BACKSLASH.sub(r"\\\\", one_line(text))  # a backslash of theirs escapes none of ours
    t = html.escape(t, quote=False).replace("`", "\\`").replace("[", "\\[").replace("]", "\\]")
    # what starts a block at the start of a line, or of a list item: "# ", "- ", "1. ", "```" ...
    return _MD_BLOCK_START.sub(lambda m: m[1] + ("\\" + m[2] if not m[2].isdigit() else m[2] + "\\"), t, count=1)


def _backtick_run(text: str) -> int:
    return max((len(r) for r in re.findall("`+", text)), default=0)


def md_code(text) -> str:
    """one_line as Markdown inline code, `like this`: delimited by more backticks than any run of them
    in the text, so that none of its own closes the span (inside one, nothing else is read as Markdown
    or HTML)."""
    t = one_line(text)
    if not t:
        return "``"
    ticks = "`" * (_backtick_run(t) + 1)
    pad = " " if t[0] == "`" or t[-1] == "`" else ""
    return f"{ticks}{pad}{t}{pad}{ticks}"


def md_fence(text: str) -> str:
    """Lines as a Markdown code block, fenced by more backticks than any run of them in the text: a
    line of the text (a compiler quoting the student's source, say) cannot close the block early and
    have what follows read as Markdown and HTML."""
    fence = "`" * max(3, _backtick_run(text) + 1)
    return f"{fence}\n{text}\n{fence}"


def terminal(r: GradeResult, verbose_build: bool = True) -> str:
    """What `make grade` prints."""
    out = []
    gpu = f"{r.gpu.name} ({r.gpu.arch}, driver {r.gpu.driver})" if r.gpu else "no GPU"
    out.append(f"== {r.assignment}: {r.submission}")
    out.append(f"   GPU: {gpu}; {r.seed_note}")
    if r.verdict in (Verdict.BUILD_ERROR, Verdict.FORBIDDEN_CALL):
        if r.build_log and verbose_build:
            out += ["", *("   | " + line for line in r.build_log.splitlines()[:40])]
    if r.cases:
        # Columns as wide as their longest entry: case ids and sizes such as "n12345_w255" vary.
        wid = max([10] + [len(c.id) for c in r.cases])
        wsize = max([16] + [len(describe(c.params)) for c in r.cases])
        out += ["", f"   {'case':<{wid}} {'size':<{wsize}} {'result':<14} {'rel. error':<11} note"]
        for c in r.cases:
            mark = _MARK.get(c.verdict, c.verdict.value)
            rel = f"{c.rel_error:.1e}" if c.rel_error is not None and c.rel_error != float("inf") else "-"
            note = "" if c.verdict == Verdict.CORRECT else c.message
            size = describe(c.params) or "(hidden)"
            out.append(f"   {c.id:<{wid}} {size:<{wsize}} {mark:<14} {rel:<11} {note}".rstrip())
    for p in r.performance:
        t = p.timing
        size = describe(p.params)
        out += ["", f"   Performance, {size}: {len(t.times_ms)} runs after {t.warmup} warm-up, "
                    f"fresh inputs and a flushed L2 each",
                "     timed by the judge, a process without your code: from its call until your outputs were in "
                "its hands", "     (every run's outputs checked" + (f"; the round trip of an empty call, {1000 * p.judge_read_ms:.0f} us, "
                                                                  f"not counted)" if p.judge_read_ms else ")")]
        # Labels as wide as the longest baseline name ("copy of the same bytes"), so the rates line up.
        lw = max([11] + [len(b.name) for b in p.baselines])
        line = (f"     {'submission':<{lw}} {p.rate:>12,.1f} {p.metric}   median {t.median_ms:.3f} ms "
                f"(min {min(t.times_ms):.3f}, max {max(t.times_ms):.3f}, spread {100 * t.spread:.1f}%)")
        if p.gbs and p.metric != "GB/s":
            line += f", {p.gbs:,.0f} GB/s"
        out.append(line)
        for b in p.baselines:
            out.append(f"     {b.name:<{lw}} {b.rate:>12,.1f} {p.metric}   median {b.timing.median_ms:.3f} ms"
                       f" (spread {100 * b.timing.spread:.1f}%)   you: {p.rate / b.rate:.2f}x")
        if p.baseline_note:
            out.append(f"     {'':<{lw}} ({p.baseline_note})")
        if p.peak:
            out.append(f"     {'GPU peak':<{lw}} {p.peak:>12,.1f} {p.metric}")
        if p.thresholds:
            th = p.thresholds
            tiers = ", ".join(f"{rate:,.0f} -> {pts:g}" for rate, pts in zip(th.rates, th.points))
            out.append(f"     {'thresholds':<{lw}} {tiers} ({p.metric} -> points)")
            out.append(f"     {'':<{lw}} {th.source}")
    if r.sanitizer_note:
        out.append(f"   compute-sanitizer: {r.sanitizer_note}")
    out += profile_lines(r.profile)
    out.append("")
    out.append(f"   Verdict: {r.verdict.value}" + (f": {r.message}" if r.message else ""))
    if r.verdict == Verdict.SKIPPED:
        return printable("\n".join(out))
    perf_pts = r.score - r.correctness_points if r.verdict == Verdict.CORRECT else 0.0
    out.append(f"   Score: {r.score:g} / {r.max_score:g}  (correctness {r.correctness_points:g}, "
               f"performance {perf_pts:g})")
    if r.stage_seconds:
        out.append("   Stages: " + ", ".join(f"{k} {v:.1f} s" for k, v in r.stage_seconds.items()))
    return printable("\n".join(out))


def atomic_write(path: Path, text: str) -> None:
    """Written whole or not at all: a temporary file beside it, renamed over it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def write_json(r: GradeResult, path: Path) -> None:
    """The record of one grading (GradeResult as JSON), written whole or not at all; a profile's
    roofline goes beside it."""
    write_record(r.to_json(), path)


def write_record(rec: dict, path: Path) -> None:
    """A record as JSON (make grade's, a batch's, a reference's), written whole or not at all, with
    its profile's roofline, if any, written beside it and named there instead of held."""
    atomic_json(detach_roofline(rec, path), path)


def atomic_json(data, path: Path) -> None:
    """`data` as indented JSON, written whole or not at all."""
    atomic_write(path, json.dumps(data, indent=2, default=str) + "\n")


def detach_roofline(rec: dict, record: Path) -> dict:
    """`rec` (a record as JSON) with its roofline written beside the record's file `record`
    (grades/trmm.json -> grades/trmm-roofline.svg) and named there instead of held."""
    prof = rec.get("profile") or {}
    picture = prof.pop("roofline_svg", None)
    if picture:
        path = record.with_name(record.stem + "-roofline.svg")
        atomic_write(path, picture)
        prof["roofline"] = path.name
    return rec



def profile_lines(prof: dict) -> list:
    """The profile's part of the report: a line per kernel, then the hints (or why there is none)."""
    if not prof:
        return []
    if "note" in prof:
        return ["", f"   Profile: {prof['note']}"]
    limit = prof.get("launch_limit", LAUNCHES)
    first = "" if prof.get("launches", 0) < limit else \
        (f", its first {limit} kernel launches" if limit > 1 else ", its first kernel launch")
    out = ["", f"   Profile (Nsight Compute, one call of {prof.get('case')}{first}; not part of the score):"]
    num = lambda v, f: "-" if v is None else format(v, f)  # noqa: E731
    for k in prof.get("kernels", []):
        times = f" (x{k['launches']})" if k.get("launches", 1) > 1 else ""
        out.append(f"     {k['kernel'][:60]}{times}: {num(k['share_pct'], '.0f')}% of the time, "
                   f"DRAM {num(k['dram_gbs'], ',.0f')} GB/s ({num(k['dram_pct'], '.0f')}% of peak), "
                   f"{num(k['gflops'], ',.0f')} GFLOP/s ({num(k['flops_pct'], '.1f')}% of peak), "
                   f"{num(k['intensity'], '.2g')} FLOP/byte, occupancy {num(k['occupancy_pct'], '.0f')}%, "
                   f"L2 hits {num(k['l2_hit_pct'], '.0f')}%"
                   + (f", FP64 tensor pipe busy {k['tensor_pct']:.0f}%" if k.get("tensor_pct") else "")
                   + (f", tensor cores busy {k['mma_pct']:.0f}% with MMAs no FLOP count includes"
                      if (k.get("mma_pct") or 0) >= 0.5 else "")
                   + (f", loads use {k['ld_bytes_used_pct']:.0f}% of each sector" if k.get("ld_bytes_used_pct") is not None
                      else "")
                   + f", {num(k['sectors_per_request'], '.1f')} sectors/request"
                   + (f", most stalls: {k['top_stall']}" if k.get("top_stall") else ""))
    out += [f"   - {h}" for h in prof.get("hints", [])]
    if prof.get("roofline"):
        out.append(f"   Roofline: {prof['roofline']} (beside the record)")
    return out
