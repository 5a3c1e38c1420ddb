"""Step times worth comparing: the warm-up tenth left out everywhere, and the spread shown beside the median."""

from __future__ import annotations

import dataclasses
import statistics
from pathlib import Path

import pytest

from reprobisect.model.record import Record, StepTime, warm_up_steps
from reprobisect.report.frame import Loaded, records_frame, step_times_ms
from reprobisect.report.views import step_stats

BASELINE = Path(__file__).parents[1] / "resources" / "records" / "baseline"


@pytest.mark.parametrize(("count", "warm"), [(0, 1), (1, 1), (8, 1), (10, 1), (11, 2), (60, 6), (61, 7)])
def test_warm_up_is_the_first_tenth_at_least_one(count: int, warm: int) -> None:
    assert warm_up_steps(count) == warm


def _record(times_ms: list[float], repeat: int) -> Record:
    template = Record.load(next((BASELINE / "records").rglob("*freeze-d__r0.json")))
    steps = [StepTime(step=i, seconds=t / 1000, ok=True) for i, t in enumerate(times_ms)]
    return dataclasses.replace(template, steps=steps, repeat=repeat, run_id=f"run{repeat}")


def test_a_long_run_leaves_its_first_tenth_out() -> None:
    times = [500.0, 90.0, 80.0, 70.0, 60.0, 50.0] + [20.0] * 54  # 60 steps: 6 warm-up
    assert step_times_ms(_record(times, 0)) == pytest.approx([20.0] * 54)


def test_step_stats_show_p10_p90_and_how_far_repeats_agree() -> None:
    runs = [_record([300.0] + [base + (i % 5) for i in range(19)], r) for r, base in enumerate((20.0, 22.0, 24.0))]
    frame = records_frame([Loaded(record=r, root=BASELINE, path=BASELINE) for r in runs])
    row = step_stats(frame).iloc[0]
    medians = [statistics.median(step_times_ms(r)) for r in runs]
    assert row["runs"] == 3 and row["steps"] == 3 * 18  # 20 steps each, 2 of them warm-up
    assert row["p10_ms"] <= row["median_ms"] <= row["p90_ms"]
    assert row["runs_cv_pct"] == pytest.approx(100 * statistics.stdev(medians) / statistics.fmean(medians))
    single = step_stats(frame[frame["repeat"] == 0]).iloc[0]
    assert single["runs_cv_pct"] is None or single["runs_cv_pct"] != single["runs_cv_pct"]  # one run: no spread


def test_each_job_gets_cores_of_its_own_and_the_harness_keeps_one() -> None:
    from reprobisect.run.matrix_units import job_cpus

    sixteen = list(range(16))
    assert job_cpus(0, 1, 1, sixteen) == (1,)  # core 0 stays the harness's
    assert [job_cpus(slot, 4, 2, sixteen) for slot in range(4)] == [(1, 2), (3, 4), (5, 6), (7, 8)]
    assert [job_cpus(slot, 2, 1, [0, 1]) for slot in range(2)] == [(0,), (1,)]  # no room to spare: all cores
    assert job_cpus(0, 1, 0, sixteen) == ()  # pinning off
    assert job_cpus(0, 1, 1, []) == ()  # a platform without affinity
    assert job_cpus(3, 4, 1, [0, 1]) == (1,)  # more jobs than cores: they share, round-robin
