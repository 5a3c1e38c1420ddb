"""The timing picture of a timing search (``bisect --slower-than``), as a person looks at it: per version the metric
with its interval, the ratio to the good end with its interval, the threshold, and how often each was run.

Read from a bisect file, which may come from elsewhere (``--merge``): every number is checked to be a finite
number and every word is kept short; a probe whose timing is malformed is shown as not measured, never trusted.
The terminal, the Markdown and the HTML report take their rows from here.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["HEADER", "TimingRow", "TimingSearch", "interval", "shown", "table_rows", "timing_lines", "timing_search"]

_VERDICTS = ("slower", "not slower", "ambiguous", "unmeasured")
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


@dataclasses.dataclass(frozen=True, kw_only=True)
class TimingSearch:
    """What a timing search's file says: its rule, its rows in version order, and how unlike its runs were."""

    metric: str
    threshold_percent: float
    min_repeats: int
    max_repeats: int
    rows: tuple[TimingRow, ...]
    unlike: tuple[str, ...]

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


def _row(probe: Mapping[str, Any]) -> TimingRow:
    timing = probe.get("timing")
    timing = timing if isinstance(timing, dict) else {}
    verdict = timing.get("verdict")
    numbers = {name: _number(timing.get(name)) for name in _NUMBERS}
    return TimingRow(
        version=str(probe.get("version", "?"))[:40],
        verdict=verdict if verdict in _VERDICTS else "unmeasured",
        runs=_count(timing.get("runs")),
        **numbers,
    )


def timing_search(data: Mapping[str, Any]) -> TimingSearch | None:
    """The timing search a bisect file holds, or None when it is a search on outcomes (or its rule is malformed)."""
    rule = data.get("slowdown")
    if not isinstance(rule, dict):
        return None
    threshold = _number(rule.get("threshold_percent"))
    if threshold is None or rule.get("metric") not in ("step", "peak-gpu-memory", "wall"):
        return None
    order = data.get("range", {}).get("versions", []) if isinstance(data.get("range"), dict) else []
    order = [str(v)[:12] if data.get("git") else str(v) for v in order] if isinstance(order, list) else []
    probes = [p for p in data.get("probes", []) if isinstance(p, dict)] if isinstance(data.get("probes"), list) else []
    rows = sorted((_row(p) for p in probes), key=lambda r: order.index(r.version) if r.version in order else 10**6)
    unlike = data.get("unlike")
    return TimingSearch(
        metric=str(rule["metric"]),
        threshold_percent=threshold,
        min_repeats=_count(rule.get("min_repeats")),
        max_repeats=_count(rule.get("max_repeats")),
        rows=tuple(rows),
        unlike=tuple(str(u)[:200] for u in unlike) if isinstance(unlike, list) else (),
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
    """The table every renderer shows: version, verdict, metric with its interval, ratio with its interval, runs."""
    return [
        [
            row.version,
            row.verdict,
            interval(row.value, row.value_low, row.value_high, lambda v: shown(v, search.metric)),
            interval(row.ratio, row.low, row.high, lambda v: f"×{v:.3f}"),
            str(row.runs),
        ]
        for row in search.rows
    ]


HEADER = ("version", "verdict", "median (95 % interval)", "ratio to the good end", "runs")


def timing_lines(data: Mapping[str, Any]) -> list[str]:
    """Plain lines for the terminal: the rule, one line per probed version, and any unlike runs."""
    search = timing_search(data)
    if search is None:
        return []
    lines = [
        f"Timing: {search.metric}, slower = ratio above ×{search.limit:.3f} (+{search.threshold_percent:g} %) with "
        f"95 % confidence; {search.min_repeats} to {search.max_repeats} runs a version"
    ]
    lines += ["  " + "  ".join(cells) for cells in table_rows(search)]
    lines += _unlike_lines(search.unlike)
    return lines


def _unlike_lines(unlike: Sequence[str]) -> list[str]:
    if not unlike:
        return ["  the runs compared ran alike (cores, threads, runs at once, CPU, GPU, ranks, sandbox)"]
    return ["  NOT COMPARABLE: the runs did not run alike:", *(f"    {line}" for line in unlike)]
