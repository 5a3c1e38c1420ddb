"""A run's own figures are claims (issue #50, item 3): an event line is a whole line that starts with the marker,
step times that cannot fit inside the wall time the harness measured are refused and kept as a claim, a timing
search over refused steps compares the harness's wall time instead and says so, a training verdict is labelled
the run's claim, and a timing search that stays ambiguous exits with a code of its own."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reprobisect.bisect.timed import TimedProbes, ambiguous_versions
from reprobisect.commands import bisect as bisect_command
from reprobisect.errors import AMBIGUOUS_EXIT, ConfigError, HarnessError
from reprobisect.model.bisect_report import BisectReport
from reprobisect.model.record import Record, StepTime
from reprobisect.model.slowdown import NOT_SLOWER, SLOWER, SlowdownRule, compare_timings, refused_steps
from reprobisect.report.frame import claimed_text
from reprobisect.report.timing_view import timing_lines, timing_markdown
from reprobisect.run.events import EVENT_MARK, parse_events, read_events
from reprobisect.run.measured import checked_steps
from tests.bisect_reports import report_of

BASELINE = Path(__file__).parents[1] / "resources" / "records" / "baseline"
RULE = SlowdownRule(threshold=0.10, resamples=200)


def _step_line(step: int, seconds: float) -> str:
    return EVENT_MARK + json.dumps({"event": "step", "step": step, "seconds": seconds})


@given(prefix=st.text(min_size=1, max_size=40).filter(lambda p: "\n" not in p and not p.startswith("@")))
@settings(max_examples=150, deadline=None)
def test_a_marker_quoted_inside_a_line_is_no_event(prefix: str) -> None:
    """``logger.info("@@repro {...}")`` or anything a run imports may quote a marker: only a whole line that
    starts with it is an event, so a quoted step never reaches a record (before #50 it did)."""
    quoted = prefix + _step_line(1, 0.001)
    log = "\n".join(["start", quoted, "end"])
    if any(line.startswith(EVENT_MARK) for line in log.splitlines()):  # the prefix itself split the line
        return
    assert read_events(log).steps == []
    assert list(parse_events(log)) == []


def test_a_whole_event_line_is_still_read() -> None:
    log = "\n".join(["INFO " + _step_line(0, 9.0), _step_line(1, 0.25), "tail"])
    assert read_events(log).steps == [StepTime(step=1, seconds=0.25, ok=True)]


@given(
    times=st.lists(st.floats(min_value=0, max_value=1e4, allow_nan=False), max_size=30),
    wall=st.floats(min_value=0, max_value=1e5, allow_nan=False),
)
def test_steps_are_kept_exactly_when_their_sum_fits_inside_the_measured_wall(times: list[float], wall: float) -> None:
    steps = [StepTime(step=i, seconds=t, ok=True) for i, t in enumerate(times)]
    kept, why = checked_steps(steps, wall)
    fits = math.fsum(times) <= wall * 1.01 + 0.05
    assert (kept, why is None) == ((steps, True) if fits else ([], False))
    if why is not None:
        assert f"{len(steps)} step times" in why and "wall" in why and "\n" not in why


def test_forged_step_times_above_the_wall_are_refused() -> None:
    steps = [StepTime(step=i, seconds=3600.0, ok=True) for i in range(10)]  # ten hours of steps in a 2 s run
    kept, why = checked_steps(steps, 2.0)
    assert kept == [] and why is not None and "36000.000 s" in why and "2.000 s" in why


def _record(times: list[float], *, wall: float, repeat: int = 0, refused: bool = False) -> Record:
    template = Record.load(next((BASELINE / "records").rglob("*freeze-d__r0.json")))
    steps = [StepTime(step=i, seconds=t, ok=True) for i, t in enumerate(times)]
    kept, why = checked_steps(steps, wall) if refused else (steps, None)
    config = {**template.config, **({"claimed": {"steps": why}, "claimed_steps": times} if why else {})}
    return dataclasses.replace(template, steps=kept, repeat=repeat, outcome="PASS", wall_seconds=wall, config=config)


def test_a_step_comparison_over_refused_steps_falls_back_to_the_measured_wall_and_says_so() -> None:
    """The candidate's runs print steps 100 times the reference's (a forged slowdown) in runs whose wall times
    match the reference's: compared on the harness's wall time it is not slower, and the verdict says why."""
    reference = [_record([0.01] * 20, wall=10.0 + r / 100, repeat=r) for r in range(3)]
    forged = [_record([1.0] * 20, wall=10.0 + r / 100, repeat=r, refused=True) for r in range(3)]
    assert all(refused_steps(r) for r in forged) and not any(refused_steps(r) for r in reference)
    verdict = compare_timings(reference, forged, RULE)
    assert verdict.verdict == NOT_SLOWER and verdict.metric == "wall"
    assert verdict.why.startswith("step times refused in 3 run(s)") and "harness's wall time" in verdict.why
    assert claimed_text(forged[0].config["claimed"]).startswith("refused: 20 step times summing to 20.000 s")


def test_a_wall_slowdown_behind_refused_steps_is_still_found() -> None:
    reference = [_record([0.01] * 20, wall=10.0 + r / 100, repeat=r) for r in range(3)]
    slow = [_record([0.001] * 20, wall=20.0 + r / 100, repeat=r, refused=False) for r in range(3)]
    forged_fast = [dataclasses.replace(s, steps=[], config={**s.config, "claimed": {"steps": "forged"}}) for s in slow]
    assert compare_timings(reference, forged_fast, RULE).verdict == SLOWER


def test_a_timing_search_lists_the_versions_whose_steps_were_refused() -> None:
    records = {
        "good": [_record([0.01] * 20, wall=10.0, repeat=r) for r in range(3)],
        "bad": [_record([1.0] * 20, wall=10.0, repeat=r, refused=True) for r in range(3)],
    }
    timed = TimedProbes(RULE, "good", lambda v, n: records[v][:n], lambda v, rs: None)  # type: ignore[arg-type,return-value]
    timed.records = records
    [line] = timed.refused()
    assert line.startswith("bad: 3 of 3 runs, 20 step times summing to 20.000 s")
    report = _report("good", [("good", "not slower", "step"), ("bad", "not slower", "wall")], refused=[line])
    lines = timing_lines(report)
    assert any("not slower (on wall)" in ln and "10.00 s" in ln for ln in lines)
    assert any("step times refused as claims" in ln and "bad: 3 of 3" in ln for ln in lines)
    assert any("Step times refused as claims" in ln for ln in timing_markdown(report, "bisect.json"))


def _report(reference: str, probes: list[tuple[str, str, str]], refused: list[str] | None = None) -> BisectReport:
    """A timing search's report as ``run_bisect`` writes it, with each probe's verdict and the metric it used."""
    versions = [p[0] for p in probes]
    return report_of(
        {
            "slowdown": RULE.describe(),
            "range": {"good": versions[0], "bad": versions[-1], "versions": versions},
            "reference": {"version": reference, "runs": 3},
            "unlike": [],
            "busy": None,
            "claims_refused": refused or [],
            "target": f"step slower than {reference} by more than 10%",
            "probes": [
                {
                    "version": version,
                    "outcome": "PASS",
                    "slower": {"slower": True, "not slower": False}.get(verdict),
                    "timing": {"verdict": verdict, "metric": metric, "value": 10.0, "ratio": 1.0, "runs": 3},
                }
                for version, verdict, metric in probes
            ],
        }
    )


def test_an_ambiguous_timing_search_exits_with_its_own_code(capsys: pytest.CaptureFixture[str]) -> None:
    report = _report("0.1", [("0.1", "not slower", "step"), ("0.2", "ambiguous", "step"), ("0.3", "slower", "step")])
    assert ambiguous_versions(report) == ["0.2"]
    assert bisect_command._timing_exit(report) == AMBIGUOUS_EXIT
    assert "0.2 stayed ambiguous" in capsys.readouterr().out
    decided = _report("0.1", [("0.1", "not slower", "step"), ("0.3", "slower", "step")])
    assert bisect_command._timing_exit(decided) == 0
    assert bisect_command._timing_exit(report_of({})) == 0  # a search on outcomes
    with pytest.raises(ConfigError, match="'probes' is 'junk'"):  # a malformed file is refused on reading
        report_of({"probes": "junk"})


def test_the_ambiguous_code_is_no_harness_errors_code() -> None:
    codes = {cls.return_code for cls in _subclasses(HarnessError)}
    assert AMBIGUOUS_EXIT not in codes and AMBIGUOUS_EXIT not in (0, 1, 130)


def _subclasses(cls: type) -> list[type]:
    return [cls, *(c for sub in cls.__subclasses__() for c in _subclasses(sub))]
