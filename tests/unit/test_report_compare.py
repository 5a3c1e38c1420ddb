"""Baseline comparison: real runs (one fix broken, one slowed on purpose, one plain re-run) and the rule itself.

The resources were made with the harness on deepspeed 0.16.4 (see tests/resources/records/README.md):
``current`` ran the GAN with the ``freeze-d`` fix no longer applied and with every DeepSpeed
``engine.step()`` of the ``no-overlap-comm`` fix sleeping 10 ms first; ``rerun`` is the baseline's
configuration run again in another session.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pandas as pd
import pytest

from reprobisect.model.signature import Signature
from reprobisect.report.compare import CHANGE_KINDS, compare, timing_check
from reprobisect.report.frame import Loaded, load_records, records_frame

RECORDS = Path(__file__).parents[1] / "resources" / "records"


def _frame(name: str) -> pd.DataFrame:
    return records_frame(load_records([RECORDS / name]))


def test_the_broken_fix_and_the_slowed_run_are_flagged_and_nothing_else() -> None:
    comparison = compare(_frame("current"), _frame("baseline"))
    changes = comparison.changes.set_index("fix")
    assert sorted(changes.index) == ["freeze-d", "no-overlap-comm"]
    assert changes.loc["freeze-d", "kind"] == "new-failure"
    assert (changes.loc["freeze-d", "baseline"], changes.loc["freeze-d", "current"]) == ("✓", "✗ 36b244a365")
    assert changes.loc["no-overlap-comm", "kind"] == "timing-regression"
    slow = comparison.timings.set_index("fix").loc["no-overlap-comm"]
    assert slow["ratio"] > 1.5  # 2 × 10 ms of sleep on a ~25 ms step
    assert slow["current_ms"] - slow["baseline_ms"] > slow["band_ms"]
    assert comparison.counts() == {
        "new-failure": 1,
        "fixed": 0,
        "outcome-changed": 0,
        "signature-changed": 0,
        "timing-regression": 1,
    }


def test_a_plain_rerun_in_another_session_flags_nothing() -> None:
    comparison = compare(_frame("rerun"), _frame("baseline"))
    assert comparison.changes.empty
    assert len(comparison.timings) == 4  # the four passing fixes were timed
    assert comparison.timings["ratio"].between(0.8, 1.1).all()


def test_the_other_direction_reads_as_a_fix_and_a_speed_up() -> None:
    comparison = compare(_frame("baseline"), _frame("current"))
    assert list(comparison.changes["kind"]) == ["fixed"]  # a speed-up is not a change worth a flag


def test_runs_on_one_side_only_are_listed_not_flagged() -> None:
    comparison = compare(_frame("bisect"), _frame("baseline"))  # the bisect ran fix none only, on 4 releases
    assert comparison.changes.empty
    assert len(comparison.only_baseline) == 5  # the other fixes on 0.16.4
    assert len(comparison.only_current) == 3  # 0.16.5, 0.16.7, 0.17.0


def _retag(items: list[Loaded], fix: str, **changes: object) -> list[Loaded]:
    return [
        dataclasses.replace(i, record=dataclasses.replace(i.record, **changes)) if i.record.fix == fix else i
        for i in items
    ]


def test_signature_and_outcome_changes_are_named() -> None:
    base = load_records([RECORDS / "baseline"])
    now = _retag(base, "none", signature=Signature(exception="TypeError", message="other"))
    now = _retag(now, "buffer-dtype-half", outcome="OTHER_FAILURE")
    now = _retag(now, "zero-stage-0", outcome="ENV_ERROR", steps=[])
    kinds = compare(records_frame(now), records_frame(base)).changes.set_index("fix")["kind"].to_dict()
    assert kinds == {
        "none": "signature-changed",
        "buffer-dtype-half": "outcome-changed",
        "zero-stage-0": "outcome-changed",
    }
    assert set(kinds.values()) <= set(CHANGE_KINDS)


def test_timing_rule_needs_both_the_ratio_and_the_noise_band() -> None:
    steady = [[20.0, 20.2, 19.8, 20.1, 19.9]] * 3
    # 15 % slower and far outside a 0.2 ms step noise: flagged
    check = timing_check(steady, [[t * 1.15 for t in run] for run in steady])
    assert check is not None and check.regression
    # 5 % slower: under the threshold, however quiet the machine
    check = timing_check(steady, [[t * 1.05 for t in run] for run in steady])
    assert check is not None and not check.regression
    # 30 % slower but the steps scatter by ±10 ms: within k × noise
    noisy = [[10.0, 30.0, 20.0, 12.0, 28.0, 20.0]] * 2
    check = timing_check(noisy, [[t + 6 for t in run] for run in noisy])
    assert check is not None and check.ratio > 1.1 and not check.regression
    assert check.step_noise_ms == pytest.approx(1.4826 * 8.0)


def test_repeat_spread_widens_the_band() -> None:
    one_odd_repeat = [[20.0, 20.0, 20.2], [26.0, 26.1, 26.0], [20.1, 20.0, 20.0]]
    check = timing_check(one_odd_repeat, [[24.0, 24.0, 24.1]] * 2)
    assert check is not None
    assert check.repeat_noise_ms == 0  # a single odd repeat moves a median absolute deviation not at all
    assert check.regression
    half_slow = [[20.0, 20.1], [30.0, 30.1], [20.0, 20.1], [30.0, 30.2]]  # the machine was busy half the time
    check = timing_check(half_slow, [[30.0, 30.0]] * 2)
    assert check is not None
    assert check.ratio > 1.1
    assert check.repeat_noise_ms == pytest.approx(1.4826 * 5.0, abs=0.1)
    assert not check.regression


def test_no_steps_on_a_side_means_no_timing_verdict() -> None:
    assert timing_check([[20.0]], []) is None
    assert timing_check([[]], [[20.0]]) is None


def test_a_machine_twice_as_busy_flags_every_timing_and_says_everything_moved() -> None:
    base = _frame("baseline")
    busy = base.assign(step_ms=[[t * 2 for t in steps] for steps in base["step_ms"]])
    comparison = compare(busy, base)
    assert list(comparison.changes["kind"]) == ["timing-regression"] * 4
    assert comparison.overall_ratio == pytest.approx(2.0)
    assert compare(_frame("rerun"), base).overall_ratio == pytest.approx(1.0, abs=0.1)


def test_a_session_on_a_busier_machine_is_called_what_it_is() -> None:
    # releases/ ran 0.16.4 again while other jobs kept the 2 cores about twice as busy as during baseline/
    comparison = compare(_frame("releases"), _frame("baseline"))
    assert set(comparison.changes["kind"]) == {"timing-regression"}
    assert comparison.overall_ratio is not None and comparison.overall_ratio > 1.8
