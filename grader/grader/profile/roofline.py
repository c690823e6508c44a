"""The roofline picture as an SVG file (drawn by hand: grading needs no plotting library): the
GPU's memory and compute roofs on log-log axes, and each kernel as a point at (FLOP per DRAM byte,
FLOP/s), with the library's route and the reference as points where they were profiled."""
from __future__ import annotations

import html
import math

from ..svg import start
from .rules import Peaks

W, H = 640, 420
LEFT, RIGHT, TOP, BOTTOM = 70, 20, 40, 50
COLOURS = {"submission": "#1f77b4", "reference": "#2ca02c", "library": "#ff7f0e"}


def svg(title: str, peaks: Peaks, points: list, key: bool = True) -> str:
    """points: (label, who, FLOP per byte, FLOP/s), who one of COLOURS' keys. The key names every
    point, or with key=False (a class of them) only what each colour stands for."""
    xs = [ai for _, _, ai, _ in points if ai and ai > 0] + [peaks.ridge]
    ys = [f for _, _, _, f in points if f and f > 0] + [peaks.flops]
    x0 = 10 ** math.floor(math.log10(min(xs) / 4))
    x1 = 10 ** math.ceil(math.log10(max(xs) * 4))
    y1 = max(ys) * 3
    y0 = min(10 ** math.floor(math.log10(min(ys) / 4)), 10 ** math.floor(math.log10(y1 / 1e4)))
    pw, ph = W - LEFT - RIGHT, H - TOP - BOTTOM

    def x(v: float) -> float:
        return LEFT + pw * (math.log10(v) - math.log10(x0)) / (math.log10(x1) - math.log10(x0))

    def y(v: float) -> float:
        return TOP + ph * (1 - (math.log10(v) - math.log10(y0)) / (math.log10(y1) - math.log10(y0)))

    out = start(W, H, title, title_at=(LEFT, 20), title_size=13)
    out.append(f'<rect x="{LEFT}" y="{TOP}" width="{pw}" height="{ph}" fill="none" stroke="#333"/>')
    for e in range(round(math.log10(x0)), round(math.log10(x1)) + 1):  # decades
        out.append(f'<line x1="{x(10 ** e):.1f}" y1="{TOP}" x2="{x(10 ** e):.1f}" y2="{TOP + ph}" stroke="#eee"/>')
        out.append(f'<text x="{x(10 ** e):.1f}" y="{TOP + ph + 15}" text-anchor="middle">{10.0 ** e:g}</text>')
    for e in range(round(math.log10(y0)), math.floor(math.log10(y1)) + 1):
        out.append(f'<line x1="{LEFT}" y1="{y(10 ** e):.1f}" x2="{LEFT + pw}" y2="{y(10 ** e):.1f}" stroke="#eee"/>')
        out.append(f'<text x="{LEFT - 5}" y="{y(10 ** e) + 4:.1f}" text-anchor="end">{_si(10.0 ** e)}</text>')
    # The roofs: bandwidth x intensity up to the ridge point, then the compute peak.
    left_y = max(peaks.bandwidth * x0, y0)
    left_x = left_y / peaks.bandwidth
    out.append(f'<polyline points="{x(left_x):.1f},{y(left_y):.1f} {x(peaks.ridge):.1f},{y(peaks.flops):.1f} '
               f'{x(x1):.1f},{y(peaks.flops):.1f}" fill="none" stroke="#c00" stroke-width="2"/>')
    out.append(f'<text x="{x(x1) - 4:.1f}" y="{y(peaks.flops) - 6:.1f}" text-anchor="end" fill="#c00">'
               f'{peaks.precision.upper()} peak {_si(peaks.flops)}FLOP/s</text>')
    mid = math.sqrt(left_x * peaks.ridge)  # the memory roof's label, half way up it
    out.append(f'<text x="{x(mid) + 8:.1f}" y="{y(peaks.bandwidth * mid) + 4:.1f}" fill="#c00">'
               f'DRAM {peaks.bandwidth / 1e9:,.0f} GB/s</text>')
    # Points, and their names in a key at the top left (above the memory roof, where no kernel
    # can be): names written beside close points would cover each other.
    shown = [(label, who, ai, f) for label, who, ai, f in points if ai and f and ai > 0 and f > 0]
    for label, who, ai, f in shown:
        out.append(f'<circle cx="{x(ai):.1f}" cy="{y(f):.1f}" r="5" fill="{COLOURS.get(who, "#555")}" stroke="white"/>')
    names = [(f"{label} ({who})", who) for label, who, _, _ in shown] if key else \
        [(f"{who} ({sum(1 for s in shown if s[1] == who)})", who) for who in dict.fromkeys(s[1] for s in shown)]
    for i, (name, who) in enumerate(names):
        colour, ky = COLOURS.get(who, "#555"), TOP + 16 + 16 * i
        out.append(f'<circle cx="{LEFT + 14}" cy="{ky - 4}" r="5" fill="{colour}"/>')
        out.append(f'<text x="{LEFT + 24}" y="{ky}" fill="{colour}">{html.escape(name)}</text>')
    out.append(f'<text x="{LEFT + pw / 2}" y="{H - 12}" text-anchor="middle">arithmetic intensity (FLOP per DRAM byte)</text>')
    out.append(f'<text x="16" y="{TOP + ph / 2}" text-anchor="middle" transform="rotate(-90 16 {TOP + ph / 2})">FLOP/s</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _si(v: float) -> str:
    for scale, unit in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if v >= scale:
            return f"{v / scale:g} {unit}"
    return f"{v:g} "
