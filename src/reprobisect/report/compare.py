"""Compare the runs of now with a baseline: new failures, fixes, changed signatures, timing regressions.

Runs are matched on (repro, cell, form, fix); repeats of one run are folded into one verdict first (see
``report_views.verdicts``). Outcome changes are named by what they mean to a maintainer:

- ``new-failure``: PASS before, a failure now (REPRODUCED, OTHER_FAILURE, CRASH or TIMEOUT).
- ``fixed``: one of those failures before, PASS now.
- ``outcome-changed``: any other change of outcome, e.g. REPRODUCED → OTHER_FAILURE (the symptom drifted)
  or anything to or from ENV_ERROR (the environment, not the code, changed).
- ``signature-changed``: the same failing outcome with a different signature id.
- ``timing-regression``: the same outcome and a step-time slow-down beyond noise (``timing_check``).

Runs present on one side only are listed, never flagged: a smaller or larger matrix is not a change.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Sequence
from typing import Any

import pandas as pd

from reprobisect.model.outcome import Outcome
from reprobisect.model.verdict import Verdict
from reprobisect.report.verdicts import Key, verdicts

__all__ = ["CHANGE_KINDS", "Comparison", "TimingCheck", "compare", "timing_check"]

CHANGE_KINDS = ("new-failure", "fixed", "outcome-changed", "signature-changed", "timing-regression")
FAILURES = frozenset(
    {Outcome.REPRODUCED.value, Outcome.OTHER_FAILURE.value, Outcome.CRASH.value, Outcome.TIMEOUT.value}
)
MAD_TO_SIGMA = 1.4826  # scales a median absolute deviation to a normal distribution's standard deviation


@dataclasses.dataclass(frozen=True, kw_only=True)
class TimingCheck:
    """The numbers behind one timing verdict, kept so the report can show why it flagged or not."""

    baseline_ms: float
    current_ms: float
    ratio: float
    step_noise_ms: float
    repeat_noise_ms: float
    band_ms: float
    regression: bool


def _step_noise(runs: Sequence[Sequence[float]]) -> float:
    """Spread of single steps around their own run's median, pooled over every run of both sides."""
    residuals = [t - statistics.median(run) for run in runs if run for t in run]
    return MAD_TO_SIGMA * statistics.median(abs(r) for r in residuals) if len(residuals) > 1 else 0.0


def _repeat_noise(*sides: Sequence[Sequence[float]]) -> float:
    """Spread of run medians around their side's median, pooled over the sides that have repeats."""
    deviations: list[float] = []
    for runs in sides:
        medians = [statistics.median(run) for run in runs if run]
        if len(medians) > 1:
            centre = statistics.median(medians)
            deviations += [abs(m - centre) for m in medians]
    return MAD_TO_SIGMA * statistics.median(deviations) if deviations else 0.0


def timing_check(
    baseline: Sequence[Sequence[float]],
    current: Sequence[Sequence[float]],
    *,
    threshold: float = 1.10,
    k: float = 3.0,
) -> TimingCheck | None:
    """Is ``current`` slower than ``baseline`` beyond run-to-run noise? None when a side has no step times.

    Each argument holds the per-step times (ms, warm-up step excluded) of each repeat of one run.
    The rule, exactly:

    1. ``b`` and ``c``: the median of all step times of the baseline and the current side, pooled.
    2. ``step_noise``: 1.4826 × the median absolute deviation of every step time from its own run's
       median, pooled over all runs of both sides (a robust σ of one step; a stray 3-second step moves it
       little).
    3. ``repeat_noise``: when a side has two or more runs (``repeat`` > 0 records), 1.4826 × the median
       absolute deviation of each run's median from its side's median, pooled over those sides; else 0.
       It catches what steps inside one process cannot: a busier machine, another cache state.
    4. ``band = k × (step_noise + repeat_noise)``, with k = 3 by default.
    5. A regression is flagged only when ``c / b > threshold`` (default 1.10) **and** ``c − b > band``.

    The band is deliberately that of a single step, not of a median (no division by √n): CPU step
    times of a few tens of ms move by that much between two sessions of one machine, and a report that
    cries wolf stops being read.
    """
    base_runs = [list(run) for run in baseline if len(run)]
    cur_runs = [list(run) for run in current if len(run)]
    if not base_runs or not cur_runs:
        return None
    b = statistics.median(t for run in base_runs for t in run)
    c = statistics.median(t for run in cur_runs for t in run)
    step_noise = _step_noise([*base_runs, *cur_runs])
    repeat_noise = _repeat_noise(base_runs, cur_runs)
    band = k * (step_noise + repeat_noise)
    ratio = c / b if b > 0 else float("inf")
    return TimingCheck(
        baseline_ms=b,
        current_ms=c,
        ratio=ratio,
        step_noise_ms=step_noise,
        repeat_noise_ms=repeat_noise,
        band_ms=band,
        regression=ratio > threshold and c - b > band,
    )


def _outcome_change(before: Verdict, after: Verdict) -> str | None:
    if before.outcome == after.outcome:
        if before.signature_id != after.signature_id and after.outcome != Outcome.PASS.value:
            return "signature-changed"
        return None
    if before.outcome == Outcome.PASS.value and after.outcome in FAILURES:
        return "new-failure"
    if before.outcome in FAILURES and after.outcome == Outcome.PASS.value:
        return "fixed"
    return "outcome-changed"


@dataclasses.dataclass(frozen=True, kw_only=True)
class Comparison:
    """What changed between two sets of runs; ``changes`` holds one row per flagged run key."""

    changes: pd.DataFrame
    timings: pd.DataFrame
    only_baseline: list[Key]
    only_current: list[Key]
    threshold: float
    k: float

    def of(self, kind: str) -> pd.DataFrame:
        """The flagged rows of one kind (see CHANGE_KINDS)."""
        return self.changes[self.changes["kind"] == kind]

    @property
    def overall_ratio(self) -> float | None:
        """Median current/baseline step-time ratio over every timed run: near 1 unless everything moved.

        Far from 1 means a slower or busier machine, or a change that slows every run alike; either way
        the per-run flags should be read with it in mind. None when nothing was timed.
        """
        return float(statistics.median(self.timings["ratio"])) if len(self.timings) else None

    def counts(self) -> dict[str, int]:
        """How many run keys were flagged, per kind (every kind present, zeros included)."""
        return {kind: int((self.changes["kind"] == kind).sum()) for kind in CHANGE_KINDS}


_CHANGE_COLUMNS = ["kind", "repro", "cell", "form", "fix", "baseline", "current", "detail"]
_TIMING_COLUMNS = [
    "repro",
    "cell",
    "form",
    "fix",
    "baseline_ms",
    "current_ms",
    "ratio",
    "step_noise_ms",
    "repeat_noise_ms",
    "band_ms",
    "regression",
]


def _steps_by_key(frame: pd.DataFrame) -> dict[Key, list[list[float]]]:
    out: dict[Key, list[list[float]]] = {}
    for repro, cell, form, fix, steps in zip(
        frame["repro"], frame["cell"], frame["form"], frame["fix"], frame["step_ms"], strict=True
    ):
        out.setdefault((repro, cell, form, fix), []).append(list(steps))
    return out


def _timing_row(key: Key, check: TimingCheck) -> dict[str, Any]:
    return dict(zip(_TIMING_COLUMNS, [*key, *dataclasses.astuple(check)], strict=True))


def compare(current: pd.DataFrame, baseline: pd.DataFrame, *, threshold: float = 1.10, k: float = 3.0) -> Comparison:
    """Flag what changed from ``baseline`` to ``current`` (both long frames from ``records_frame``)."""
    before, after = verdicts(baseline), verdicts(current)
    base_steps, cur_steps = _steps_by_key(baseline), _steps_by_key(current)
    changes: list[dict[str, Any]] = []
    timings: list[dict[str, Any]] = []
    for key in (k_ for k_ in after if k_ in before):
        was, now = before[key], after[key]
        kind = _outcome_change(was, now)
        if kind:
            changes.append(dict(zip(_CHANGE_COLUMNS, [kind, *key, was.label, now.label, ""], strict=True)))
            continue
        check = timing_check(base_steps.get(key, []), cur_steps.get(key, []), threshold=threshold, k=k)
        if check is None:
            continue
        timings.append(_timing_row(key, check))
        if check.regression:
            detail = (
                f"median step {check.baseline_ms:.1f} → {check.current_ms:.1f} ms (×{check.ratio:.2f}); "
                f"noise band {check.band_ms:.1f} ms"
            )
            changes.append(
                dict(zip(_CHANGE_COLUMNS, ["timing-regression", *key, was.label, now.label, detail], strict=True))
            )
    return Comparison(
        changes=pd.DataFrame(changes, columns=_CHANGE_COLUMNS),
        timings=pd.DataFrame(timings, columns=_TIMING_COLUMNS),
        only_baseline=sorted(set(before) - set(after)),
        only_current=sorted(set(after) - set(before)),
        threshold=threshold,
        k=k,
    )
