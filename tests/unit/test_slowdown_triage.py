"""``triage --slower-than``: the answer to "it got slower" over a sweep's releases — the slower releases as ranges
(a slowdown that came and went is two changes), the commit behind each change, the timing table — from a real
timing search over fake matrix runs, and its refusals before anything runs."""

from __future__ import annotations

import argparse
import types
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reprobisect.bisect.answer import Answer
from reprobisect.bisect.slowdown_answer import slowdown_headline, slowdown_markdown, slower_ranges
from reprobisect.commands import triage, triage_flow
from reprobisect.commands.triage_options import TriageOptions
from reprobisect.config.load import load_config
from reprobisect.errors import BisectInconclusiveError, ConfigError
from reprobisect.model.bisect_report import BisectReport
from reprobisect.model.culprit import Commit, Culprit, SearchTarget
from reprobisect.model.slowdown import SlowdownRule
from tests.bisect_reports import report_of
from tests.unit.test_slowdown_bisect import RELEASES, _bisect

ROOT = Path(__file__).resolve().parents[2]
CAME_AND_WENT = {"0.18.5": 3.0, "0.18.6": 3.0, "0.18.7": 3.0}


def _report(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, speed: dict[str, float]) -> BisectReport:
    _, report, _ = _bisect(monkeypatch, tmp_path, speed, all_transitions=True, probe_all_up_to=len(RELEASES))
    return report


def test_a_slowdown_that_came_and_went_is_one_range_with_both_changes(monkeypatch, tmp_path) -> None:
    report = _report(monkeypatch, tmp_path, CAME_AND_WENT)
    assert slower_ranges(report) == [["0.18.5", "0.18.6", "0.18.7"]]
    text = slowdown_markdown(report, name="bisect.json", hint="add --git")
    assert "**slower: deepspeed 0.18.5 … 0.18.7** (step ×" in text
    assert "against 0.18.3" in text
    assert "came between 0.18.4 and 0.18.5: add --git" in text
    assert "went between 0.18.7 and 0.18.8: add --git" in text
    assert "| 0.18.6 | slower |" in text and "| 0.18.8 | not slower |" in text


def test_each_change_names_its_commit_and_pull_request(monkeypatch, tmp_path) -> None:
    report = _report(monkeypatch, tmp_path, CAME_AND_WENT)
    slower = SearchTarget(outcome="PASS", signature_id=None)
    culprits = [
        Culprit(
            last="0.18.4",
            first="0.18.5",
            kind="introduced",
            target=slower,
            commit=Commit(sha="311674ffa" * 4, subject="count hooks", pull_request="o/r#7780"),
            rerun="reprobisect bisect --git C",
        ),
        Culprit(last="0.18.7", first="0.18.8", kind="fixed", target=slower, why="the tags are not in the clone"),
    ]
    text = slowdown_markdown(report, culprits, name="bisect.json", rerun="nox -s triage -- x.py")
    assert "came between 0.18.4 and 0.18.5: **by `311674ffa311`** count hooks (o/r#7780)" in text
    assert "went between 0.18.7 and 0.18.8: commit unknown — the tags are not in the clone" in text
    assert "nox -s triage -- x.py\nreprobisect bisect --git C" in text


def test_no_slower_release_says_so(monkeypatch, tmp_path) -> None:
    report = _report(monkeypatch, tmp_path, {})
    assert slower_ranges(report) == []
    assert slowdown_headline(report) == ["Not slower: no release of 0.18.3 … 0.18.9 is judged slower than 0.18.3."]


_PROBE = st.fixed_dictionaries(
    {"slower": st.sampled_from([True, False, None]), "timing": st.one_of(st.none(), st.dictionaries(st.text(max_size=5), st.floats()))}
)  # fmt: skip


@given(st.lists(_PROBE, min_size=1, max_size=12), st.text(max_size=20))
def test_any_probes_give_ranges_of_exactly_the_slower_versions(probes: list[dict[str, Any]], hostile: str) -> None:
    versions = [f"1.{i}" for i in range(len(probes))]
    report = report_of(
        {
            "axis": hostile,
            "range": {"good": versions[0], "bad": versions[-1], "versions": versions},
            "probes": [{"version": v, "outcome": "PASS", **p} for v, p in zip(versions, probes, strict=True)],
        }
    )
    ranges = slower_ranges(report)
    flat = [v for span in ranges for v in span]
    assert flat == [v for v, p in zip(versions, probes, strict=True) if p["slower"]]
    assert all(span for span in ranges)
    text = slowdown_markdown(report, name=hostile)  # hostile words and timings render, never raise
    assert text.startswith("### Slower:")


def _options(*extra: str) -> TriageOptions:
    parser = argparse.ArgumentParser()
    triage.setup_arguments(parser.add_subparsers())
    return TriageOptions.from_args(parser.parse_args(["triage", "issue.py", "--deepspeed", ">=0.18.3,<0.19", *extra]))


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        (["--slower-than", "10", "--jobs", "2", "--backend", "cpu"], "one run at a time"),
        (["--slower-than", "10", "--repeat", "3"], "--min-repeats and --max-repeats"),
        (["--slower-than", "10", "--max-repeats", "2", "--min-repeats", "3"], "max"),
    ],
)
def test_a_timing_triage_that_cannot_work_is_refused_before_anything_runs(extra, words, monkeypatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("nothing may run")

    monkeypatch.setattr(triage_flow, "with_script", refuse)
    monkeypatch.setattr(triage_flow, "prepare", lambda common: None)
    with pytest.raises(ConfigError, match=words):
        triage_flow.triage_answers(_options(*extra), rerun="")


def test_triage_compares_with_its_first_release_only() -> None:
    with pytest.raises(SystemExit):
        _options("--slower-than", "10", "--compare-with", "bad")


def _answer() -> Answer:
    return Answer(
        repro="script-x",
        form="cpu-deepspeed",
        axis="deepspeed",
        releases=tuple(RELEASES),
        states={},
        transitions=(),
        fixes={},
        pins={"torch": "2.13.0"},
    )


def test_the_timing_search_runs_every_release_of_the_answer_in_its_form(monkeypatch, tmp_path) -> None:
    seen: list[Any] = []

    def fake_bisect(config: Any, request: Any, ctx: Any) -> Any:
        seen.append(request)
        raise BisectInconclusiveError("0.18.3 cannot be the reference of a timing search (it failed)")

    monkeypatch.setattr(triage_flow, "run_bisect", fake_bisect)
    options = _options("--slower-than", "25", "--out", str(tmp_path))
    rule = SlowdownRule(threshold=0.25)
    config, ctx = load_config(ROOT / "matrix.yaml"), types.SimpleNamespace()
    text, report, culprits = triage_flow._timed(config, _answer(), rule, options, ctx, ("", ""))  # type: ignore[arg-type]
    assert report is None and culprits == []
    [request] = seen
    assert (request.good, request.bad, request.form, request.axis) == ("0.18.3", "0.18.9", "cpu-deepspeed", "deepspeed")
    assert request.all_transitions and request.probe_all_up_to == len(RELEASES) and request.slowdown == rule
    assert request.pins == {"torch": "2.13.0"}
    assert "Not measured: 0.18.3 cannot be the reference" in text
