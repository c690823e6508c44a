"""The start of every picture the grader draws by hand (SVG, so that grading needs no plotting
library): the root element, a white ground and the title."""
from __future__ import annotations

import html


def start(width: float, height: float, title: str, font_size: int = 11, title_at: tuple = (4, 16),
          title_size: int = 12) -> list:
    """The opening lines of an SVG picture titled `title`; the caller appends and closes it."""
    x, y = title_at
    return [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
            f'font-family="sans-serif" font-size="{font_size}" role="img" aria-label="{html.escape(title)}">',
            '<rect width="100%" height="100%" fill="white"/>',
            f'<text x="{x}" y="{y}" font-weight="bold" font-size="{title_size}">{html.escape(title)}</text>']
