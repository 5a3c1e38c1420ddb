"""The noise model of "slower" (model/slowdown.py): a two-level bootstrap interval of the ratio of medians against
the threshold, with a minimum of repeats; hostile timings never make a version slower."""

from __future__ import annotations

import dataclasses
import math
import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reprobisect.model.record import Record, StepTime
from reprobisect.model.slowdown import (
    AMBIGUOUS,
    NOT_SLOWER,
    SLOWER,
    UNMEASURED,
    SlowdownRule,
    compare_samples,
    compare_timings,
    metric_samples,
)

BASELINE = Path(__file__).parents[1] / "resources" / "records" / "baseline"
RULE = SlowdownRule(threshold=0.10)
FAST = SlowdownRule(threshold=0.10, resamples=200)  # property tests: many examples, each cheap


def _runs(centre: float, runs: int = 5, steps: int = 40, *, seed: int = 0, cv: float = 0.03) -> list[list[float]]:
    """``runs`` runs of ``steps`` step times around ``centre``, each run's own level drawn with ``cv`` spread."""
    rng = random.Random(seed)
    out = []
    for _ in range(runs):
        level = centre * rng.gauss(1, cv)
        out.append([level * rng.gauss(1, 0.02) for _ in range(steps)])
    return out


def test_a_clear_slowdown_is_slower_with_an_interval_around_its_ratio() -> None:
    verdict = compare_samples(_runs(0.020), _runs(0.030, seed=1), RULE)
    assert verdict.verdict == SLOWER
    assert verdict.low is not None and verdict.high is not None and verdict.ratio is not None
    assert 1.1 < verdict.low <= verdict.ratio <= verdict.high
    assert verdict.ratio == pytest.approx(1.5, rel=0.05)
    assert verdict.reference == pytest.approx(0.020, rel=0.05) and verdict.value == pytest.approx(0.030, rel=0.05)


def test_the_same_speed_is_not_slower() -> None:
    verdict = compare_samples(_runs(0.020), _runs(0.020, seed=1), RULE)
    assert verdict.verdict == NOT_SLOWER and verdict.high is not None and verdict.high < 1.1


def test_a_ratio_at_the_limit_is_ambiguous_not_a_guess() -> None:
    verdict = compare_samples(_runs(0.020, cv=0.05), _runs(0.022, seed=3, cv=0.05), RULE)
    assert verdict.verdict == AMBIGUOUS and "straddles" in verdict.why


def test_fewer_runs_than_the_minimum_are_ambiguous_however_clear() -> None:
    verdict = compare_samples(_runs(0.020, runs=2), _runs(0.060, runs=2, seed=1), RULE)
    assert verdict.verdict == AMBIGUOUS and "fewer than the minimum 3" in verdict.why
    assert (verdict.runs, verdict.reference_runs) == (2, 2)


def test_a_run_slow_as_a_whole_widens_the_interval_instead_of_deciding() -> None:
    """Pooled steps would call this slower (two thirds of the steps are 2 % slower, one third 60 %); by runs,
    the candidate's three runs hold one outlier run, and its interval reaches below the limit."""
    reference = _runs(0.020, runs=3, cv=0.0)
    candidate = [*_runs(0.0204, runs=2, seed=1, cv=0.0), [0.032] * 40]
    verdict = compare_samples(reference, candidate, RULE)
    assert verdict.verdict != SLOWER


def test_the_same_records_always_give_the_same_verdict() -> None:
    a = compare_samples(_runs(0.020), _runs(0.021, seed=2), RULE)
    b = compare_samples(_runs(0.020), _runs(0.021, seed=2), RULE)
    assert a == b


@pytest.mark.parametrize(
    ("reference", "candidate", "why"),
    [
        ([], _runs(0.02), "the reference has no step"),
        (_runs(0.02), [], "this version has no step"),
        ([[math.nan, math.inf, -1.0, 0.0]], _runs(0.02), "the reference has no step"),
        (_runs(0.02), [[math.nan]] * 5, "this version has no step"),
    ],
)
def test_no_usable_timing_is_unmeasured(reference: list[list[float]], candidate: list[list[float]], why: str) -> None:
    verdict = compare_samples(reference, candidate, RULE)
    assert verdict.verdict == UNMEASURED and why in verdict.why and verdict.ratio is None


def test_nan_and_infinite_steps_are_dropped_and_counted() -> None:
    candidate = [[*run, math.nan, math.inf, -math.inf] for run in _runs(0.02, seed=1)]
    verdict = compare_samples(_runs(0.02), candidate, RULE)
    assert verdict.verdict == NOT_SLOWER and verdict.dropped == 15


def test_sides_too_far_apart_for_a_finite_ratio_are_unmeasured() -> None:
    verdict = compare_samples([[1e-300] * 5] * 3, [[1e300] * 5] * 3, RULE)
    assert verdict.verdict == UNMEASURED and "not a finite" in verdict.why


def _record(times: list[float], *, outcome: str = "PASS", repeat: int = 0, **changes: object) -> Record:
    template = Record.load(next((BASELINE / "records").rglob("*freeze-d__r0.json")))
    steps = [StepTime(step=i, seconds=t, ok=True) for i, t in enumerate(times)]
    return dataclasses.replace(template, steps=steps, repeat=repeat, outcome=outcome, **changes)  # type: ignore[arg-type]


def test_records_leave_warm_up_out_and_count_only_passing_runs() -> None:
    runs = [_record([9.0] + [0.02] * 19, repeat=r) for r in range(3)]  # a huge first step: warm-up, left out
    failed = _record([5.0] * 20, outcome="REPRODUCED", repeat=3)
    samples, dropped = metric_samples([*runs, failed], "step")
    assert samples == tuple((0.02,) * 18 for _ in range(3)) and dropped == 0


def test_a_one_step_run_has_nothing_to_time() -> None:
    reference = [_record([0.02], repeat=r) for r in range(3)]
    verdict = compare_timings(reference, [_record([0.02] * 20, repeat=r) for r in range(3)], RULE)
    assert verdict.verdict == UNMEASURED


def test_other_metrics_take_one_number_a_run() -> None:
    reference = [_record([], peak_gpu_memory_bytes=2**30, wall_seconds=10.0, repeat=r) for r in range(3)]
    candidate = [_record([], peak_gpu_memory_bytes=3 * 2**29, wall_seconds=10.1, repeat=r) for r in range(3)]
    memory = compare_timings(reference, candidate, dataclasses.replace(RULE, metric="peak-gpu-memory"))
    assert (memory.verdict, memory.ratio, memory.low, memory.high) == (SLOWER, 1.5, 1.5, 1.5)
    wall = compare_timings(reference, candidate, dataclasses.replace(RULE, metric="wall"))
    assert wall.verdict == NOT_SLOWER


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({"threshold": 0.0}, "above 0"),
        ({"threshold": math.nan}, "threshold nan"),
        ({"metric": "speed"}, "one of step, peak-gpu-memory, wall"),
        ({"min_repeats": 1}, "at least 2 runs"),
        ({"min_repeats": 5, "max_repeats": 4}, "the minimum below the most"),
        ({"confidence": 1.0}, "below 1"),
    ],
)
def test_a_rule_that_cannot_work_is_refused_by_name(changes: dict[str, object], words: str) -> None:
    with pytest.raises(ValueError, match=words):
        SlowdownRule(**{"threshold": 0.1, **changes})  # type: ignore[arg-type]


_TIME = st.one_of(
    st.floats(min_value=1e-9, max_value=1e9),
    st.sampled_from([math.nan, math.inf, -math.inf, 0.0, -1.0, 1e300]),
)
_SIDE = st.lists(st.lists(_TIME, max_size=30), max_size=8)


@settings(max_examples=80, deadline=None)
@given(side=_SIDE)
def test_identical_timings_are_never_slower(side: list[list[float]]) -> None:
    verdict = compare_samples(side, [list(run) for run in side], FAST)
    assert verdict.verdict != SLOWER


@settings(max_examples=80, deadline=None)
@given(side=_SIDE, seed=st.integers(0, 2**16))
def test_the_same_runs_in_another_order_are_never_slower(side: list[list[float]], seed: int) -> None:
    shuffled = [random.Random(seed).sample(run, len(run)) for run in side]
    random.Random(seed).shuffle(shuffled)
    assert compare_samples(side, shuffled, FAST).verdict != SLOWER


@settings(max_examples=80, deadline=None)
@given(side=_SIDE, factor=st.floats(min_value=0.01, max_value=1.0))
def test_a_faster_version_is_never_slower(side: list[list[float]], factor: float) -> None:
    faster = [[t * factor for t in run] for run in side]
    assert compare_samples(side, faster, FAST).verdict != SLOWER


@settings(max_examples=80, deadline=None)
@given(reference=_SIDE, candidate=_SIDE)
def test_any_timings_give_a_verdict_with_an_ordered_interval(
    reference: list[list[float]], candidate: list[list[float]]
) -> None:
    verdict = compare_samples(reference, candidate, FAST)
    assert verdict.verdict in (SLOWER, NOT_SLOWER, AMBIGUOUS, UNMEASURED)
    if verdict.verdict != UNMEASURED:
        assert verdict.low is not None and verdict.high is not None
        assert 0 < verdict.low <= verdict.high and math.isfinite(verdict.high)
