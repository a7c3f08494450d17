"""Charts as inline SVG, drawn on the server: pure functions from numbers to markup.

Why server-side SVG rather than a JavaScript plotting library: the dashboard then needs no
script at all (a strict Content-Security-Policy with no ``script-src``), nothing to vendor or
keep patched, it renders the same offline, on a phone and in a text-mode screenshot, and each
chart is a function a unit test can call. The charts are simple (lines, bars, a timeline), so a
library would buy little. Colours are presentation attributes, not ``style``, so the CSP needs
no ``unsafe-inline``. Every series is a ``<path class="series" data-series="NAME">`` (bars:
``<rect class="bar" data-label=...>``, timeline: ``<rect class="span" data-attempt=...>``), which
is what the browser tests count.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from html import escape

PALETTE = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f",
           "#bab0ac")
OUTCOME_COLOURS = {"succeeded": "#59a14f", "preempted": "#f28e2b", "failed": "#e15759", "cancelled": "#bab0ac",
                   "budget_exhausted": "#b07aa1", "no_capacity": "#edc948", "moved": "#76b7b2", "running": "#4e79a7"}

Point = tuple[float, float]


def _ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    """About ``n`` round tick values covering [lo, hi]."""
    if hi <= lo:
        return [lo]
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.ceil(lo / step) * step
    return [round(first + i * step, 12) for i in range(int((hi - first) / step + 1e-9) + 1)]


TIME_STEPS_S = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400)


def _time_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    """About ``n`` ticks on whole seconds, minutes or hours (epoch seconds)."""
    step = next((s for s in TIME_STEPS_S if s >= (hi - lo) / n), 86400 * math.ceil((hi - lo) / n / 86400))
    first = math.ceil(lo / step) * step
    return [first + i * step for i in range(int((hi - first) // step) + 1)]


def _fmt(v: float) -> str:
    return f"{v:.4g}"


def _frame(width: int, height: int, title: str, extra: str = "") -> list[str]:
    return [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" class="chart" role="img" '
            f'aria-label="{escape(title)}"{extra}><title>{escape(title)}</title>']


def _log_ticks(lo: float, hi: float) -> list[float]:
    """Ticks of a log axis over [lo, hi] (both > 0): the powers of ten, with 2 and 5 between them
    when the axis spans fewer than three decades (else one or two ticks is all it would show)."""
    first, last = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    steps = (1.0,) if last - first >= 3 else (1.0, 2.0, 5.0)
    return [m * 10.0**e for e in range(first, last + 1) for m in steps if lo <= m * 10.0**e <= hi]


LOG_AUTO_RATIO = 20.0  # an axis whose positive values span this factor or more is drawn log by default


def wants_log(series: Sequence[tuple[str, Sequence[Point]]]) -> bool:
    """The default scale of a metric plot: log when every value is positive and they span more
    than ``LOG_AUTO_RATIO`` (a loss from 2.3 to 0.02: on a linear axis every curve is a flat line
    at the bottom after the first steps, eight trials in one)."""
    ys = [y for _, s in series for _, y in s]
    return bool(ys) and min(ys) > 0 and max(ys) / min(ys) >= LOG_AUTO_RATIO


@dataclass(frozen=True)
class _Plot:
    """A line chart's frame: its size, margins and the data range its axes span (y in scale units)."""

    width: int
    height: int
    x0: float
    x1: float
    y0: float
    y1: float
    log_y: bool
    left: int = 56
    right: int = 12
    top: int = 12
    bottom: int = 40

    def scale(self, v: float) -> float:
        return math.log10(v) if self.log_y else v

    def sx(self, x: float) -> float:
        return self.left + (x - self.x0) / (self.x1 - self.x0) * (self.width - self.left - self.right)

    def sy(self, y: float) -> float:
        return self.top + (1 - (self.scale(y) - self.y0) / (self.y1 - self.y0)) * (self.height - self.top - self.bottom)


def _positive(series: Sequence[tuple[str, Sequence[Point]]], hline: tuple[float, str] | None,
              best: tuple[str, Point, str] | None) -> tuple[list[tuple[str, list[Point]]], tuple[float, str] | None,
                                                           tuple[str, Point, str] | None, int]:
    """What a log axis can draw: the points, ``hline`` and ``best`` above 0, and how many points were left out."""
    kept = [(n, [p for p in s if p[1] > 0]) for n, s in series]
    dropped = sum(len(s) for _, s in series) - sum(len(s) for _, s in kept)
    hline = hline if hline is None or hline[0] > 0 else None
    if best is not None and best[1][1] <= 0:
        best = None
    return kept, hline, best, dropped


def _plot(pts: list[Point], hline: tuple[float, str] | None, step: bool, log_y: bool, width: int,
          height: int) -> _Plot:
    """The frame spanning ``pts`` and ``hline`` (``step``: from 0 up), padded 5 % above (and below)."""
    scale = (lambda v: math.log10(v)) if log_y else (lambda v: v)
    ys = [scale(y) for _, y in pts] + ([scale(hline[0])] if hline else [])
    x0, x1 = min(x for x, _ in pts), max(x for x, _ in pts)
    y0, y1 = min(ys + [0.0]) if step else min(ys), max(ys)
    if x1 == x0:
        x1 = x0 + 1
    if y1 == y0:
        y1 = y0 + (abs(y0) or 1)
    pad = (y1 - y0) * 0.05
    return _Plot(width, height, x0, x1, (y0 if step else y0 - pad), y1 + pad, log_y)


def _axes(p: _Plot, x_label: str, y_label: str, x_is_time: bool) -> list[str]:
    """The axis lines, their ticks and labels."""
    left, right, top, bottom, width, height = p.left, p.right, p.top, p.bottom, p.width, p.height
    out = [f'<g class="axes" stroke="#888" stroke-width="1"><line x1="{left}" y1="{height - bottom}" '
           f'x2="{width - right}" y2="{height - bottom}"/><line x1="{left}" y1="{top}" x2="{left}" '
           f'y2="{height - bottom}"/></g>']
    for t in _log_ticks(10**p.y0, 10**p.y1) if p.log_y else _ticks(p.y0, p.y1):
        out.append(f'<text x="{left - 4}" y="{p.sy(t) + 4:.1f}" text-anchor="end" class="tick">{_fmt(t)}</text>')
    span = p.x1 - p.x0
    time_format = "%H:%M:%S" if span < 600 else "%H:%M" if span < 2 * 86400 else "%m-%d"
    for t in _time_ticks(p.x0, p.x1) if x_is_time else _ticks(p.x0, p.x1):
        label = f"{datetime.fromtimestamp(t, UTC):{time_format}}" if x_is_time else _fmt(t)
        out.append(f'<text x="{p.sx(t):.1f}" y="{height - bottom + 16}" text-anchor="middle" class="tick">'
                   f'{escape(label)}</text>')
    if x_label:
        out.append(f'<text x="{(left + width - right) / 2}" y="{height - 4}" text-anchor="middle" class="label">'
                   f'{escape(x_label)}</text>')
    if y_label:
        out.append(f'<text x="12" y="{top + (height - top - bottom) / 2}" text-anchor="middle" class="label" '
                   f'transform="rotate(-90 12 {top + (height - top - bottom) / 2})">{escape(y_label)}</text>')
    return out


def _hline(p: _Plot, hline: tuple[float, str]) -> str:
    v, label = hline
    return (f'<line class="cap" x1="{p.left}" y1="{p.sy(v):.1f}" x2="{p.width - p.right}" y2="{p.sy(v):.1f}" '
            f'stroke="#e15759" stroke-dasharray="6 4" stroke-width="1.5"/>'
            f'<text x="{p.width - p.right - 4}" y="{p.sy(v) - 4:.1f}" text-anchor="end" class="cap-label" '
            f'fill="#e15759">{escape(label)}</text>')


def _paths(p: _Plot, series: Sequence[tuple[str, Sequence[Point]]], best_name: str | None, step: bool) -> list[str]:
    """One ``<path>`` per series that has points, the best trial's last so no other crosses over it."""
    out = []
    order = sorted(range(len(series)), key=lambda i: series[i][0] == best_name)
    for i in order:
        name, s = series[i]
        if not s:
            continue
        colour = PALETTE[i % len(PALETTE)]
        d = []
        for j, (x, y) in enumerate(sorted(s)):
            if j and step:
                d.append(f"H{p.sx(x):.1f}")
            d.append(f"{'L' if j else 'M'}{p.sx(x):.1f},{p.sy(y):.1f}")
        cls, width_px = ("series best", 3.5) if name == best_name else ("series", 2)
        out.append(f'<path class="{cls}" data-series="{escape(name)}" d="{" ".join(d)}" fill="none" '
                   f'stroke="{colour}" stroke-width="{width_px}"><title>{escape(name)}</title></path>')
    return out


def line_chart(series: Sequence[tuple[str, Sequence[Point]]], *, title: str, x_label: str = "", y_label: str = "",
               hline: tuple[float, str] | None = None, step: bool = False, x_is_time: bool = False,
               log_y: bool = False, best: tuple[str, Point, str] | None = None,
               width: int = 640, height: int = 300) -> str:
    """One path per named series (``step``: a staircase, for cumulative spend); ``hline`` draws
    a dashed reference line such as a cap. ``log_y``: a log10 y axis (values <= 0 cannot be
    drawn on it and are left out, and the chart says how many). ``best``: (series, point, label)
    of the best trial: its line is drawn thicker and on top, with a ring on the point."""
    dropped = 0
    if log_y:
        series, hline, best, dropped = _positive(series, hline, best)
    pts = [p for _, s in series for p in s]
    if not pts:
        return "\n".join([*_frame(width, 60, title), '<text x="8" y="30" class="empty">no data yet</text></svg>'])
    p = _plot(pts, hline, step, log_y, width, height)
    out = _frame(width, height, title, f' data-scale="{"log" if log_y else "linear"}"')
    out += _axes(p, x_label, y_label, x_is_time)
    if hline is not None:
        out.append(_hline(p, hline))
    best_name = best[0] if best is not None else None
    out += _paths(p, series, best_name, step)
    if best is not None:
        name, (bx, by), label = best
        out.append(f'<circle class="best-marker" data-series="{escape(name)}" cx="{p.sx(bx):.1f}" '
                   f'cy="{p.sy(by):.1f}" r="6" fill="none" stroke="#1d2330" stroke-width="2">'
                   f'<title>{escape(label)}</title></circle>')
    if dropped:
        out.append(f'<text x="{width - p.right - 4}" y="{p.top + 12}" text-anchor="end" class="tick">'
                   f'{dropped} points &lt;= 0 not shown on the log axis</text>')
    out.append("</svg>")
    if len(series) > 1:
        out.append(legend([name for name, _ in series], best_name))
    return "\n".join(out)


def legend(names: Sequence[str], best: str | None = None) -> str:
    items = "".join(f'<li{" class=best" if n == best else ""}><span class="swatch swatch-{i % len(PALETTE)}">'
                    f'</span>{escape(n)}{" (best)" if n == best else ""}</li>' for i, n in enumerate(names))
    return f'<ul class="legend">{items}</ul>'


def bar_chart(bars: Sequence[tuple[str, float]], *, title: str, cap: float | None = None, cap_label: str = "cap",
              caps: Sequence[float | None] | None = None, width: int = 640, row_h: int = 26) -> str:
    """Horizontal bars (label, USD); ``cap`` draws one dashed line for all, ``caps`` one tick per bar."""
    left, right, top = 130, 70, 8
    height = top + row_h * max(len(bars), 1) + 8
    if not bars:
        return "\n".join([*_frame(width, 60, title), '<text x="8" y="30" class="empty">nothing billed</text></svg>'])
    hi = max([v for _, v in bars] + [cap or 0.0] + [c for c in caps or [] if c is not None]) or 1.0

    def sx(v: float) -> float:
        return left + v / hi * (width - left - right)

    out = _frame(width, height, title)
    for i, (label, v) in enumerate(bars):
        y = top + i * row_h
        own = caps[i] if caps is not None else None
        over = (cap is not None and v > cap) or (own is not None and v > own)
        out.append(f'<text x="{left - 6}" y="{y + row_h * 0.65:.1f}" text-anchor="end" class="tick">'
                   f'{escape(label)}</text>')
        out.append(f'<rect class="bar" data-label="{escape(label)}" data-value="{v!r}" x="{left}" y="{y + 3}" '
                   f'width="{max(sx(v) - left, 1):.1f}" height="{row_h - 8}" '
                   f'fill="{"#e15759" if over else PALETTE[0]}"><title>{escape(label)}: ${v:.4f}</title></rect>')
        out.append(f'<text x="{sx(v) + 4:.1f}" y="{y + row_h * 0.65:.1f}" class="value">${v:.2f}</text>')
        if own is not None:
            out.append(f'<line class="cap" x1="{sx(own):.1f}" y1="{y + 1}" x2="{sx(own):.1f}" y2="{y + row_h - 3}" '
                       f'stroke="#e15759" stroke-width="2"><title>cap ${own:.2f}</title></line>')
    if cap is not None:
        out.append(f'<line class="cap" x1="{sx(cap):.1f}" y1="{top}" x2="{sx(cap):.1f}" y2="{height - 8}" '
                   f'stroke="#e15759" stroke-dasharray="6 4" stroke-width="1.5"><title>{escape(cap_label)} '
                   f'${cap:.2f}</title></line>')
    out.append("</svg>")
    return "\n".join(out)


def timeline(spans: Sequence[dict[str, object]], *, title: str, now: datetime, width: int = 640,
             row_h: int = 30) -> str:
    """One bar per attempt, from its request to its end (or now), coloured by its outcome and
    labelled with where it ran. ``spans``: ``{"number", "start", "end", "outcome", "label"}``."""
    left, right, top, bottom = 40, 12, 8, 24
    rows = [s for s in spans if s["start"] is not None]
    if not rows:
        return "\n".join([*_frame(width, 60, title), '<text x="8" y="30" class="empty">not launched yet</text></svg>'])
    t0 = min(s["start"] for s in rows)  # type: ignore[type-var]
    t1 = max((s["end"] or now) for s in rows)  # type: ignore[type-var]
    total = max((t1 - t0).total_seconds(), 1.0)  # type: ignore[operator]
    height = top + row_h * len(rows) + bottom

    def sx(t: datetime) -> float:
        return left + (t - t0).total_seconds() / total * (width - left - right)  # type: ignore[operator]

    out = _frame(width, height, title)
    for i, s in enumerate(rows):
        y = top + i * row_h
        start, end = s["start"], s["end"] or now
        x, w = sx(start), max(sx(end) - sx(start), 2.0)  # type: ignore[arg-type]
        colour = OUTCOME_COLOURS.get(str(s["outcome"]), "#9c755f")
        out.append(f'<text x="{left - 6}" y="{y + row_h * 0.62:.1f}" text-anchor="end" class="tick">#{s["number"]}'
                   f'</text>')
        out.append(f'<rect class="span" data-attempt="{s["number"]}" data-outcome="{escape(str(s["outcome"]))}" '
                   f'x="{x:.1f}" y="{y + 3}" width="{w:.1f}" height="{row_h - 8}" rx="3" fill="{colour}">'
                   f'<title>{escape(str(s["label"]))}</title></rect>')
        label_x = x + 4 if w > 200 else min(x + w + 4, width - right - 200)
        fill = "#fff" if w > 200 else "#333"
        out.append(f'<text x="{label_x:.1f}" y="{y + row_h * 0.62:.1f}" class="span-label" fill="{fill}">'
                   f'{escape(str(s["label"]))}</text>')
    out.append(f'<text x="{left}" y="{height - 6}" class="tick">{t0:%m-%d %H:%M:%S}</text>'
               f'<text x="{width - right}" y="{height - 6}" text-anchor="end" class="tick">{t1:%m-%d %H:%M:%S} UTC'
               f'</text></svg>')
    return "\n".join(out)
