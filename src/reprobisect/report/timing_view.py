"""The timing picture of a timing search (``bisect --slower-than``), as a person looks at it: per version the metric
with its interval, the ratio to the good end with its interval, the threshold, and how often each was run.

Read from a bisect file, which may come from elsewhere (``--merge``): every number is checked to be a finite
number and every word is kept short; a probe whose timing is malformed is shown as not measured, never trusted.
The terminal, the Markdown and the HTML report take their rows from here.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

from reprobisect.model.bisect_report import BisectReport, ProbeEntry
from reprobisect.util.neutral import md_safe

__all__ = [
    "HEADER",
    "TimingRow",
    "TimingSearch",
    "interval",
    "shown",
    "table_rows",
    "timing_lines",
    "timing_markdown",
    "timing_search",
]

_VERDICTS = ("slower", "not slower", "ambiguous", "unmeasured")
_METRICS = ("step", "peak-gpu-memory", "wall")
_NUMBERS = ("value", "value_low", "value_high", "ratio", "low", "high")


@dataclasses.dataclass(frozen=True, kw_only=True)
class TimingRow:
    """One probed version: its verdict, its metric's median with its interval, the ratio with its interval."""

    version: str
    verdict: str
    value: float | None
    value_low: float | None
    value_high: float | None
    ratio: float | None
    low: float | None
    high: float | None
    runs: int
    metric: str | None = None  # the metric this version was compared on, when not the search's (a fallback)


@dataclasses.dataclass(frozen=True, kw_only=True)
class TimingSearch:
    """What a timing search's file says: its rule, its rows in version order, and how unlike its runs were."""

    metric: str
    threshold_percent: float
    min_repeats: int
    max_repeats: int
    rows: tuple[TimingRow, ...]
    unlike: tuple[str, ...]
    busy: str | None = None
    refused: tuple[str, ...] = ()  # runs whose step times were refused as claims: "version: why"

    @property
    def limit(self) -> float:
        """The ratio above which a version is slower."""
        return 1 + self.threshold_percent / 100


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 10**6 else 0


def _row(probe: ProbeEntry) -> TimingRow:
    timing = probe.state.timing or {}
    verdict = timing.get("verdict")
    numbers = {name: _number(timing.get(name)) for name in _NUMBERS}
    metric = timing.get("metric")
    return TimingRow(
        version=probe.version[:40],
        verdict=verdict if isinstance(verdict, str) and verdict in _VERDICTS else "unmeasured",
        runs=_count(timing.get("runs")),
        metric=metric if isinstance(metric, str) and metric in _METRICS else None,
        **numbers,
    )


def timing_search(report: BisectReport) -> TimingSearch | None:
    """The timing search a bisect file holds, or None when it is a search on outcomes (or its rule is malformed)."""
    if report.timing is None:
        return None
    rule = report.timing.slowdown
    threshold, metric = _number(rule.get("threshold_percent")), rule.get("metric")
    if threshold is None or not isinstance(metric, str) or metric not in _METRICS:
        return None
    order = report.version_order
    rows = sorted(
        (_row(p) for p in report.probes), key=lambda r: order.index(r.version) if r.version in order else 10**6
    )
    return TimingSearch(
        metric=metric,
        threshold_percent=threshold,
        min_repeats=_count(rule.get("min_repeats")),
        max_repeats=_count(rule.get("max_repeats")),
        rows=tuple(rows),
        unlike=tuple(u[:200] for u in report.timing.unlike),
        busy=report.timing.busy[:200] if report.timing.busy is not None else None,
        refused=tuple(r[:300] for r in report.timing.claims_refused[:20]),
    )


def shown(value: float | None, metric: str) -> str:
    """A metric's value as people read it: ms for times, MiB for memory, ``-`` for none."""
    if value is None:
        return "-"
    if metric == "peak-gpu-memory":
        return f"{value / 2**20:.1f} MiB"
    return f"{value * 1000:.2f} ms" if metric == "step" else f"{value:.2f} s"


def interval(point: float | None, low: float | None, high: float | None, shown_as: Any) -> str:
    """``12.30 ms [12.10, 12.60]`` or ``×1.52 [1.47, 1.58]``; ``-`` without a point."""
    if point is None:
        return "-"
    bounds = f" [{shown_as(low)}, {shown_as(high)}]" if low is not None and high is not None else ""
    return f"{shown_as(point)}{bounds}"


def table_rows(search: TimingSearch) -> list[list[str]]:
    """The table every renderer shows: version, verdict, metric with its interval, ratio with its interval, runs.
    A version compared on another metric than the search's (step times refused: the harness's wall time) says so
    in its verdict."""
    return [
        [
            row.version,
            row.verdict + (f" (on {row.metric})" if row.metric and row.metric != search.metric else ""),
            interval(row.value, row.value_low, row.value_high, lambda v, m=row.metric or search.metric: shown(v, m)),
            interval(row.ratio, row.low, row.high, lambda v: f"×{v:.3f}"),
            str(row.runs),
        ]
        for row in search.rows
    ]


HEADER = ("version", "verdict", "median (95 % interval)", "ratio to the good end", "runs")


def timing_lines(report: BisectReport) -> list[str]:
    """Plain lines for the terminal: the rule, one line per probed version, and any unlike runs."""
    search = timing_search(report)
    if search is None:
        return []
    lines = [
        f"Timing: {search.metric}, slower = ratio above ×{search.limit:.3f} (+{search.threshold_percent:g} %) with "
        f"95 % confidence; {search.min_repeats} to {search.max_repeats} runs a version"
    ]
    lines += ["  " + "  ".join(cells) for cells in table_rows(search)]
    lines += _unlike_lines(search.unlike)
    lines += [f"  step times refused as claims (compared on the harness's wall time): {r}" for r in search.refused]
    return lines + ([f"  busy machine: {search.busy}"] if search.busy else [])


def timing_markdown(report: BisectReport, name: str) -> list[str]:
    """A Markdown section for one timing search (``name``: its file): the rule, the table, unlike runs; none for
    a search on outcomes."""
    search = timing_search(report)
    if search is None:
        return []
    lines = [
        f"**{md_safe(name)}**: {search.metric}, slower = more than {search.threshold_percent:g} % above the good "
        f"end (ratio above ×{search.limit:.3f}) with 95 % confidence; {search.min_repeats} to "
        f"{search.max_repeats} runs a version; ambiguous versions are skipped.",
        "",
        "| " + " | ".join(HEADER) + " |",
        "|" + "---|" * len(HEADER),
        *("| " + " | ".join(md_safe(cell) for cell in cells) + " |" for cells in table_rows(search)),
        "",
    ]
    if search.unlike:
        lines += ["**Not comparable**: the runs did not run alike:", "", *(f"- {md_safe(u)}" for u in search.unlike)]
    else:
        lines.append("The runs compared ran alike (cores, threads, runs at once, CPU, GPU, ranks, sandbox).")
    if search.busy:
        lines += ["", f"Busy machine: {md_safe(search.busy)}; timings are noisier, intervals wider."]
    if search.refused:
        lines += [
            "",
            "**Step times refused as claims** (their sum exceeds the wall time the harness measured; those "
            "versions were compared on the harness's wall time):",
            "",
            *(f"- {md_safe(r)}" for r in search.refused),
        ]
    return [*lines, ""]


_COLOURS = {"slower": "#c0392b", "not slower": "#27ae60", "ambiguous": "#d68910", "unmeasured": "#7f8c8d"}
_WIDTH, _HEIGHT, _LEFT, _TOP, _BOTTOM = 640, 240, 56, 12, 48


def timing_plot(search: TimingSearch) -> dict[str, Any]:
    """An SVG plot's geometry (numbers and the versions' names only; the template draws it, autoescaped): each
    version's ratio to the good end with its interval, on a log scale, beside the lines at 1 and at the limit."""
    bounds = [v for r in search.rows for v in (r.low, r.high, r.ratio) if v is not None and v > 0]
    lo, hi = math.log(min([0.8, *bounds])), math.log(max([search.limit * 1.2, *bounds]))
    span, inner = (hi - lo) or 1.0, _HEIGHT - _TOP - _BOTTOM

    def y(ratio: float) -> float:
        return round(_TOP + inner * (hi - math.log(ratio)) / span, 1)

    step = (_WIDTH - _LEFT - 16) / max(1, len(search.rows))
    points = []
    for i, row in enumerate(search.rows):
        x = round(_LEFT + step * (i + 0.5), 1)
        point = {"x": x, "version": row.version, "colour": _COLOURS[row.verdict], "verdict": row.verdict}
        if row.ratio is not None and row.low is not None and row.high is not None:
            point |= {"y": y(row.ratio), "y_low": y(row.low), "y_high": y(row.high), "ratio": f"×{row.ratio:.2f}"}
        points.append(point)
    ticks = [t for t in (0.5, 1, 2, 5, 10, 20, 50, 100) if lo <= math.log(t) <= hi]
    return {
        "width": _WIDTH,
        "height": _HEIGHT,
        "left": _LEFT,
        "right": _WIDTH - 16,
        "base": _HEIGHT - _BOTTOM,
        "limit_y": y(search.limit),
        "limit": f"×{search.limit:.2f}",
        "ticks": [{"y": y(t), "label": f"×{t:g}"} for t in ticks],
        "points": points,
    }


def _unlike_lines(unlike: Sequence[str]) -> list[str]:
    if not unlike:
        return ["  the runs compared ran alike (cores, threads, runs at once, CPU, GPU, ranks, sandbox)"]
    return ["  NOT COMPARABLE: the runs did not run alike:", *(f"    {line}" for line in unlike)]
