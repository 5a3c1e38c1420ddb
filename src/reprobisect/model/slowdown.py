"""Is one version slower than another beyond noise? The noise model every "slower" verdict uses.

A run's median step moves by a few percent from run to run (3.4-5.4 % CV over 5 repeats on the H200), and more
between runs than between the steps of one run: a run draws its cores, caches and clocks once. So a verdict
compares the *runs* of two versions, not a pool of their steps as if every step were independent.

The method, exactly:

1. Each side's samples: per run, the completed steps after its warm-up (``warm_up_steps``), only finite positive
   times (the ``step`` metric); or one number per run, its peak GPU memory or its wall time. Only runs that
   PASSed count: a run that failed stopped somewhere else, and its times say nothing about the same work.
2. A two-level bootstrap (``resamples`` times, a fixed seed, so the same records always give the same verdict):
   draw each side's runs with replacement, then each drawn run's steps with replacement (at most 200 a run), pool
   them and take the median; the ratio of the two medians (candidate over reference) is one draw.
3. The ``confidence`` percentile interval of those ratios, against ``1 + threshold``:
   ``slower`` when even its low end is above it, ``not slower`` when even its high end is below it, and
   ``ambiguous`` otherwise: repeat both sides and ask again, up to ``max_repeats`` runs a side. A comparison with
   fewer than ``min_repeats`` runs on a side is ambiguous whatever its interval: two runs can agree by luck.

Why a bootstrap and not a rank test: the question is not "do they differ" but "is the ratio above 1.10", and the
report must show the ratio with its interval (a rank test gives a p-value and no interval, and shifting a sample
by the threshold to test it assumes a pure shift). Why two levels: resampling pooled steps treats 3 runs of 50
steps as 150 independent draws, and its interval comes out far narrower than the run-to-run spread it must cover;
drawing runs first lets a run that was slow as a whole widen the interval instead of deciding the verdict.
"""

from __future__ import annotations

import dataclasses
import math
import random
import statistics
from collections.abc import Sequence
from typing import Any

from reprobisect.model.record import Record, warm_up_steps

__all__ = [
    "METRICS",
    "SlowdownRule",
    "SlowdownVerdict",
    "compare_samples",
    "compare_timings",
    "metric_samples",
    "refused_steps",
]

METRICS = ("step", "peak-gpu-memory", "wall")
UNITS = {"step": "s", "peak-gpu-memory": "bytes", "wall": "s"}
SLOWER, NOT_SLOWER, AMBIGUOUS, UNMEASURED = "slower", "not slower", "ambiguous", "unmeasured"
_SEED = 38  # fixed: a verdict is a function of its records
# values drawn from one run per resample, at most: a run of 5000 steps costs what one of 200 does, and its interval
# comes out a little wider, never narrower (fewer draws of the same run)
_PER_RUN = 200


@dataclasses.dataclass(frozen=True, kw_only=True)
class SlowdownRule:
    """What "slower" means for one search: a metric worse than the reference's by more than ``threshold`` (0.10 is
    10 %), told apart from noise with ``min_repeats`` to ``max_repeats`` runs a side."""

    threshold: float
    metric: str = "step"
    min_repeats: int = 3
    max_repeats: int = 10
    confidence: float = 0.95
    resamples: int = 2000

    def __post_init__(self) -> None:
        problem = _rule_problem(self)
        if problem is not None:
            raise ValueError(problem)

    @property
    def limit(self) -> float:
        """The ratio (candidate over reference) above which a version is slower: ``1 + threshold``."""
        return 1.0 + self.threshold

    def describe(self) -> dict[str, Any]:
        """The rule as a report writes it."""
        return {
            "metric": self.metric,
            "threshold_percent": round(self.threshold * 100, 6),
            "min_repeats": self.min_repeats,
            "max_repeats": self.max_repeats,
            "confidence": self.confidence,
            "method": "two-level bootstrap (runs, then steps) of the ratio of medians, percentile interval",
        }


def _rule_problem(rule: SlowdownRule) -> str | None:
    """What is wrong with a rule, said with the value and what would be right; None when it is sound."""
    if rule.metric not in METRICS:
        return f"metric {rule.metric!r}: one of {', '.join(METRICS)}"
    if not (math.isfinite(rule.threshold) and 0 < rule.threshold <= 10):
        return f"threshold {rule.threshold!r}: above 0 (a slowdown of 0 % cannot be told from noise) and at most 10"
    if not 2 <= rule.min_repeats <= rule.max_repeats:
        return f"repeats {rule.min_repeats}..{rule.max_repeats}: at least 2 runs a side, the minimum below the most"
    if not 0.5 <= rule.confidence < 1:
        return f"confidence {rule.confidence!r}: from 0.5 to below 1 (0.95 is usual)"
    if rule.resamples < 100:
        return f"resamples {rule.resamples}: at least 100 for a percentile interval"
    return None


@dataclasses.dataclass(frozen=True, kw_only=True)
class SlowdownVerdict:
    """One version against the reference: the verdict, the ratio with its interval, each side's median with its
    own interval (in ``UNITS[metric]``), the runs each side had, and why."""

    verdict: str  # SLOWER, NOT_SLOWER, AMBIGUOUS or UNMEASURED
    metric: str
    threshold: float
    ratio: float | None = None
    low: float | None = None
    high: float | None = None
    value: float | None = None
    value_low: float | None = None
    value_high: float | None = None
    reference: float | None = None
    reference_low: float | None = None
    reference_high: float | None = None
    runs: int = 0
    reference_runs: int = 0
    dropped: int = 0  # step times left out because they were not finite positive numbers
    why: str = ""

    @property
    def decided(self) -> bool:
        """Slower or not slower: more repeats would not be asked for."""
        return self.verdict in (SLOWER, NOT_SLOWER)

    def to_dict(self) -> dict[str, Any]:
        """As reports write it: plain JSON, ``None`` for what was not measured."""
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class _Samples:
    """One side: each run's values (several steps, or one number), and how many values were dropped."""

    runs: tuple[tuple[float, ...], ...]
    dropped: int = 0


def _usable(values: Sequence[float]) -> tuple[list[float], int]:
    kept = [float(v) for v in values if isinstance(v, (int, float)) and math.isfinite(v) and v > 0]
    return kept, len(values) - len(kept)


def metric_samples(records: Sequence[Record], metric: str) -> tuple[tuple[tuple[float, ...], ...], int]:
    """Each PASSed run's values of ``metric`` (runs with none left out) and the count of values dropped as not
    finite positive numbers. ``step``: its completed steps after the warm-up; the others: one number a run."""
    runs: list[tuple[float, ...]] = []
    dropped = 0
    for record in records:
        if record.outcome != "PASS":
            continue
        if metric == "step":
            done = [s.seconds for s in record.steps if s.ok]
            raw: list[float] = done[warm_up_steps(len(done)) :] if done else []
        elif metric == "peak-gpu-memory":
            raw = [record.peak_gpu_memory_bytes] if record.peak_gpu_memory_bytes is not None else []
        else:
            raw = [record.wall_seconds]
        kept, lost = _usable(raw)
        dropped += lost
        if kept:
            runs.append(tuple(kept))
    return tuple(runs), dropped


def _draw(runs: Sequence[Sequence[float]], rng: random.Random) -> float:
    """One bootstrap draw of a side's median: runs with replacement, then each drawn run's values."""
    pooled: list[float] = []
    for run in rng.choices(runs, k=len(runs)):
        pooled += rng.choices(run, k=min(len(run), _PER_RUN)) if len(run) > 1 else run
    return statistics.median(pooled)


def _percentiles(values: list[float], confidence: float) -> tuple[float, float]:
    ordered = sorted(values)
    tail = (1 - confidence) / 2
    last = len(ordered) - 1
    return ordered[math.floor(tail * last)], ordered[math.ceil((1 - tail) * last)]


def _median_all(runs: Sequence[Sequence[float]]) -> float:
    return statistics.median([v for run in runs for v in run])


def compare_samples(
    reference: Sequence[Sequence[float]], candidate: Sequence[Sequence[float]], rule: SlowdownRule
) -> SlowdownVerdict:
    """The verdict on ``candidate`` against ``reference``, each a list of runs' values (see the module's doc).

    Values that are not finite positive numbers are dropped, runs left empty with them; a side with no run left
    is UNMEASURED."""
    sides = [_clean(reference), _clean(candidate)]
    unmeasured = SlowdownVerdict(
        verdict=UNMEASURED,
        metric=rule.metric,
        threshold=rule.threshold,
        runs=len(sides[1].runs),
        reference_runs=len(sides[0].runs),
        dropped=sides[0].dropped + sides[1].dropped,
    )
    if not sides[0].runs or not sides[1].runs:
        which = "the reference" if not sides[0].runs else "this version"
        why = f"{which} has no {rule.metric} measurement (no passing run with a finite positive value)"
        return dataclasses.replace(unmeasured, why=why)
    rng = random.Random(_SEED)  # noqa: S311 - resampling, not secrets
    refs, cands = [], []
    for _ in range(rule.resamples):
        refs.append(_draw(sides[0].runs, rng))
        cands.append(_draw(sides[1].runs, rng))
    ratios = [c / r for c, r in zip(cands, refs, strict=True)]
    if not all(math.isfinite(r) and r > 0 for r in ratios):
        why = "the ratio of the two sides' medians is not a finite positive number (values far apart in scale)"
        return dataclasses.replace(unmeasured, why=why)
    low, high = _percentiles(ratios, rule.confidence)
    point_ref, point = _median_all(sides[0].runs), _median_all(sides[1].runs)
    verdict, why = _judge(low, high, min(unmeasured.runs, unmeasured.reference_runs), rule)
    value_low, value_high = _percentiles(cands, rule.confidence)
    reference_low, reference_high = _percentiles(refs, rule.confidence)
    return dataclasses.replace(
        unmeasured,
        verdict=verdict,
        why=why,
        ratio=point / point_ref,
        low=low,
        high=high,
        value=point,
        reference=point_ref,
        value_low=value_low,
        value_high=value_high,
        reference_low=reference_low,
        reference_high=reference_high,
    )


def _clean(runs: Sequence[Sequence[float]]) -> _Samples:
    kept: list[tuple[float, ...]] = []
    dropped = 0
    for run in runs:
        values, lost = _usable(list(run))
        dropped += lost
        if values:
            kept.append(tuple(values))
    return _Samples(tuple(kept), dropped)


def _judge(low: float, high: float, fewest: int, rule: SlowdownRule) -> tuple[str, str]:
    """The verdict of an interval against the limit, with the minimum of repeats on each side (``fewest``: the
    runs of the side with fewer)."""
    interval = f"ratio interval [{low:.3f}, {high:.3f}] at {rule.confidence:.0%}, limit {rule.limit:.3f}"
    if fewest < rule.min_repeats:
        return AMBIGUOUS, f"{interval}; {fewest} run(s) on a side, fewer than the minimum {rule.min_repeats}"
    if low > rule.limit:
        return SLOWER, f"{interval}: above the limit"
    if high < rule.limit:
        return NOT_SLOWER, f"{interval}: below the limit"
    return AMBIGUOUS, f"{interval}: it straddles the limit"


def refused_steps(record: Record) -> str | None:
    """Why the harness refused a run's step times (``run/measured.py``'s ``checked_steps``: their sum does not fit
    inside the wall time it measured), or None when it kept them."""
    claimed = record.config.get("claimed")
    why = claimed.get("steps") if isinstance(claimed, dict) else None
    return why[:200] if isinstance(why, str) else None


def compare_timings(reference: Sequence[Record], candidate: Sequence[Record], rule: SlowdownRule) -> SlowdownVerdict:
    """The verdict on the ``candidate`` version's records against the ``reference`` version's: the hook every
    caller (bisection, triage, the nightly) uses. Only PASSed runs count; see the module's doc for the rest.

    A step comparison in which any passing run's step times were refused as claims falls back to the wall time the
    harness measured, on both sides: the run's own figures never decide, and the verdict's ``metric`` and ``why``
    say so."""
    refused = [why for r in (*reference, *candidate) if r.outcome == "PASS" and (why := refused_steps(r))]
    used = dataclasses.replace(rule, metric="wall") if refused and rule.metric == "step" else rule
    ref_runs, ref_dropped = metric_samples(reference, used.metric)
    runs, dropped = metric_samples(candidate, used.metric)
    verdict = compare_samples(ref_runs, runs, used)
    if used is not rule:
        fallback = f"step times refused in {len(refused)} run(s) ({refused[0]}): compared on the harness's wall time"
        verdict = dataclasses.replace(verdict, why=f"{fallback}; {verdict.why}")
    return dataclasses.replace(verdict, dropped=verdict.dropped + ref_dropped + dropped)
