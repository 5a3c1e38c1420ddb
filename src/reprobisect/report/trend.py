"""A trend as a small inline SVG: one series of points over runs, drawn without JavaScript or a plotting library.

Why not matplotlib (as the report's plots): the corpus page must open from a CI artefact and stay a few kilobytes,
and a handful of points needs no more than a polyline. Every text (a date, a commit, a label) is escaped for XML and
its control characters shown as symbols: the labels come from a file people edit (``corpus/history.jsonl``).
"""

from __future__ import annotations

import dataclasses
import html
from collections.abc import Callable, Sequence

from reprobisect.util.neutral import html_text

__all__ = ["Series", "trend_svg"]

_WIDTH, _PANEL, _LEFT, _RIGHT, _TOP = 640, 110, 56, 16, 24


@dataclasses.dataclass(frozen=True, kw_only=True)
class Series:
    """One panel: its title, the highest value its axis shows, how a value reads (``52 %``, ``300 s``), and per point
    the value and a tooltip (which run it is)."""

    title: str
    top: float
    values: Sequence[float]
    tips: Sequence[str]
    shown: Callable[[float], str]


def _esc(text: str) -> str:
    return html.escape(html_text(text), quote=True)


def _x(i: int, count: int) -> float:
    inner = _WIDTH - _LEFT - _RIGHT
    return _LEFT + (inner / 2 if count == 1 else inner * i / (count - 1))


def _panel(series: Series, y0: float) -> list[str]:
    """One panel's frame, axis labels, line and points, its top at ``y0``."""
    top = series.top if series.top > 0 else 1.0
    count = len(series.values)

    def y(value: float) -> float:
        return y0 + _PANEL - _PANEL * min(max(value, 0.0), top) / top

    parts = [
        f'<text x="{_LEFT}" y="{y0 - 6:.0f}" class="t">{_esc(series.title)}</text>',
        f'<rect x="{_LEFT}" y="{y0}" width="{_WIDTH - _LEFT - _RIGHT}" height="{_PANEL}" class="f"/>',
        f'<text x="{_LEFT - 4}" y="{y0 + 4}" class="a">{_esc(series.shown(top))}</text>',
        f'<text x="{_LEFT - 4}" y="{y0 + _PANEL}" class="a">{_esc(series.shown(0.0))}</text>',
    ]
    xy = [(_x(i, count), y(v)) for i, v in enumerate(series.values)]
    if len(xy) > 1:
        parts.append('<polyline class="l" points="' + " ".join(f"{a:.1f},{b:.1f}" for a, b in xy) + '"/>')
    for (a, b), value, tip in zip(xy, series.values, series.tips, strict=True):
        label = _esc(f"{tip}: {series.shown(value)}")
        parts.append(f'<circle cx="{a:.1f}" cy="{b:.1f}" r="3"><title>{label}</title></circle>')
    return parts


def trend_svg(series: Sequence[Series], *, empty: str = "no runs yet") -> str:
    """The panels stacked, one above the other, sharing the x axis (one step per run, oldest left); ``empty`` is said
    when there is no point at all."""
    height = _TOP + len(series) * (_PANEL + _TOP) + 8
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{_WIDTH}" height="{height}" viewBox="0 0 {_WIDTH} {height}" '
        'role="img" font-family="sans-serif" font-size="11">',
        "<style>.f{fill:none;stroke:#bbb}.l{fill:none;stroke:#1f77b4;stroke-width:2}circle{fill:#1f77b4}"
        ".a{text-anchor:end;fill:#555}.t{font-weight:bold}</style>",
    ]
    if not any(s.values for s in series):
        parts.append(f'<text x="{_LEFT}" y="{_TOP + 14}">{_esc(empty)}</text>')
    else:
        for i, one in enumerate(series):
            parts += _panel(one, _TOP + i * (_PANEL + _TOP))
    return "\n".join([*parts, "</svg>"])
