"""Small SVG charts written by hand, for the reproduction report: no plotting library, nothing fetched when opened.

Each chart is returned as SVG text; ``data_uri`` turns it into an ``<img src>`` so the report is one file.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from html import escape

WIDTH, HEIGHT = 420, 340
LEFT, RIGHT, TOP, BOTTOM = 52, 14, 30, 44
PALETTE = ("#4c78a8", "#f58518", "#54a24b", "#b279a2", "#e45756", "#72b7b2", "#eeca3b", "#9d755d", "#bab0ac")
FLAGGED = "#d62728"


@dataclass(frozen=True)
class Point:
    """One paper cell: paper value (x), measured value (y) with its interval, and a hover label."""

    x: float
    y: float
    low: float | None = None
    high: float | None = None
    flagged: bool = False
    label: str = ""


def data_uri(svg: str) -> str:
    """``data:image/svg+xml;base64,...`` for an ``<img src>``."""
    return "data:image/svg+xml;base64," + base64.b64encode(svg.encode()).decode("ascii")


def _ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round tick values covering [low, high].

    >>> _ticks(0, 100)
    [0.0, 20.0, 40.0, 60.0, 80.0, 100.0]
    """
    span = max(high - low, 1e-9)
    raw = span / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    first = math.floor(low / step) * step
    return [float(round(first + i * step, 10)) for i in range(math.ceil((high - first) / step) + 1)]


class _Frame:
    """Maps data coordinates to pixels and draws the axes, ticks and labels."""

    def __init__(self, xs: tuple[float, float], ys: tuple[float, float]) -> None:
        self.xt, self.yt = _ticks(*xs), _ticks(*ys)
        self.x0, self.x1 = self.xt[0], self.xt[-1]
        self.y0, self.y1 = self.yt[0], self.yt[-1]

    def px(self, x: float) -> float:
        return LEFT + (x - self.x0) / ((self.x1 - self.x0) or 1) * (WIDTH - LEFT - RIGHT)

    def py(self, y: float) -> float:
        return HEIGHT - BOTTOM - (y - self.y0) / ((self.y1 - self.y0) or 1) * (HEIGHT - TOP - BOTTOM)

    def axes(self, title: str, x_label: str, y_label: str) -> list[str]:
        out = [f'<text x="{WIDTH / 2}" y="18" text-anchor="middle" font-weight="bold">{escape(title)}</text>']
        for t in self.xt:
            x = self.px(t)
            out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{TOP}" y2="{HEIGHT - BOTTOM}" stroke="#eee"/>')
            out.append(f'<text x="{x:.1f}" y="{HEIGHT - BOTTOM + 14}" text-anchor="middle">{t:g}</text>')
        for t in self.yt:
            y = self.py(t)
            out.append(f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" stroke="#eee"/>')
            out.append(f'<text x="{LEFT - 5}" y="{y + 4:.1f}" text-anchor="end">{t:g}</text>')
        out.append(
            f'<rect x="{LEFT}" y="{TOP}" width="{WIDTH - LEFT - RIGHT}" height="{HEIGHT - TOP - BOTTOM}" '
            'fill="none" stroke="#999"/>'
        )
        out.append(f'<text x="{WIDTH / 2}" y="{HEIGHT - 8}" text-anchor="middle">{escape(x_label)}</text>')
        out.append(
            f'<text transform="translate(13,{HEIGHT / 2}) rotate(-90)" text-anchor="middle">{escape(y_label)}</text>'
        )
        return out


def _svg(body: list[str]) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" '
        'font-family="sans-serif" font-size="11">' + "".join(body) + "</svg>"
    )


def scatter(points: Sequence[Point], title: str, x_label: str = "paper (%)", y_label: str = "measured (%)") -> str:
    """Measured vs paper with vertical interval bars and the y = x diagonal; flagged points in red."""
    values = [v for p in points for v in (p.x, p.y, p.low, p.high) if v is not None and not math.isnan(v)]
    low, high = (min(values), max(values)) if values else (0.0, 100.0)
    frame = _Frame((low, high), (low, high))
    body = frame.axes(title, x_label, y_label)
    lo, hi = max(frame.x0, frame.y0), min(frame.x1, frame.y1)
    body.append(
        f'<line x1="{frame.px(lo):.1f}" y1="{frame.py(lo):.1f}" x2="{frame.px(hi):.1f}" y2="{frame.py(hi):.1f}" '
        'stroke="#888" stroke-dasharray="4 4"/>'
    )
    for p in sorted(points, key=lambda q: q.flagged):  # flagged points drawn last, on top
        colour = FLAGGED if p.flagged else PALETTE[0]
        x, y = frame.px(p.x), frame.py(p.y)
        if p.low is not None and p.high is not None and not (math.isnan(p.low) or math.isnan(p.high)):
            body.append(
                f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{frame.py(p.low):.1f}" y2="{frame.py(p.high):.1f}" '
                f'stroke="{colour}" stroke-opacity="0.6"/>'
            )
        body.append(
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3.5" fill="{colour}"><title>{escape(p.label)}</title></circle>'
        )
    return _svg(body)


def lines(
    series: Mapping[str, tuple[Sequence[float], Sequence[float]]],
    marks: Mapping[str, Sequence[float]],
    title: str,
    x_label: str = "step",
    y_label: str = "",
) -> str:
    """One line per name (steps, values) with dashed vertical marks at that name's steps, and a legend."""
    xs = [float(s) for steps, _ in series.values() for s in steps]
    ys = [float(v) for _, values in series.values() for v in values if not math.isnan(v)]
    frame = _Frame((min(xs, default=0.0), max(xs, default=1.0)), (min(ys, default=0.0), max(ys, default=1.0)))
    body = frame.axes(title, x_label, y_label)
    legend = []
    for i, (name, (steps, values)) in enumerate(series.items()):
        colour = PALETTE[i % len(PALETTE)]
        path = " ".join(f"{frame.px(s):.1f},{frame.py(v):.1f}" for s, v in zip(steps, values, strict=True))
        body.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="1.5"/>')
        for step in marks.get(name, ()):
            x = frame.px(step)
            body.append(
                f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{TOP}" y2="{HEIGHT - BOTTOM}" stroke="{colour}" '
                f'stroke-dasharray="5 3"><title>{escape(name)}: step {step:g}</title></line>'
            )
        y = TOP + 12 + 12 * i
        legend.append(f'<rect x="{LEFT + 6}" y="{y - 7}" width="10" height="3" fill="{colour}"/>')
        legend.append(f'<text x="{LEFT + 20}" y="{y - 3}" font-size="9">{escape(name)}</text>')
    if legend:  # a light box behind the legend keeps it readable over the lines
        width = 24 + 5 * max(len(name) for name in series)
        body.append(
            f'<rect x="{LEFT + 2}" y="{TOP + 2}" width="{width}" height="{12 * len(series) + 4}" fill="white" '
            'fill-opacity="0.8"/>'
        )
    return _svg(body + legend)
