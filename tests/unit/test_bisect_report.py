"""The typed bisect report (model/bisect_report.py, issue #53 item 2): it writes the very JSON the reports held
before (keys and their order, led by ``schema_version``), reads back what it wrote, and refuses by file, key and
value any other text a merged folder may hold — never another exception."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reprobisect.errors import ConfigError
from reprobisect.model.bisect_report import (
    BISECT_SCHEMA_VERSION,
    BisectReport,
    ProbeEntry,
    SeenState,
    SkipEntry,
    StretchEntry,
    TimingSection,
    TransitionEntry,
)
from reprobisect.model.culprit import Commit, Culprit, SearchTarget
from tests.unit.test_slowdown_bisect import SLOW_FROM_5, _bisect

ROOT = Path(__file__).resolve().parents[2]
[REAL] = (ROOT / "tests" / "resources" / "records" / "bisect").glob("bisect-*.json")

_text = st.text(max_size=12)
_maybe = st.none() | _text
_json_number = st.integers(-(10**6), 10**6) | st.floats(allow_nan=False, allow_infinity=False, width=32)
_timing = st.none() | st.dictionaries(
    st.sampled_from(["verdict", "ratio", "low", "high", "runs", "metric"]), _json_number | _text
)
_state = st.builds(
    SeenState, outcome=_text, signature_id=_maybe, signature=_maybe, slower=st.none() | st.booleans(), timing=_timing
)
_texts = st.lists(_text, max_size=3).map(tuple)
_culprit = st.builds(
    Culprit,
    last=_text,
    first=_text,
    kind=st.sampled_from(["introduced", "fixed", "changed"]),
    target=st.none() | st.builds(SearchTarget, outcome=_text, signature_id=_maybe),
    commit=st.none() | st.builds(Commit, sha=_text, subject=_text, pull_request=_maybe),
    commits=st.none() | st.integers(0, 99),
    probes=st.integers(0, 99),
    skipped_between=_texts,
    why=_maybe,
    rerun=_maybe,
    release_sources=_texts,
)
_reports = st.builds(
    BisectReport,
    repro=_text,
    form=_text,
    precision=_text,
    axis=_text,
    fix=_text,
    mode=st.sampled_from(["all-transitions", "first-bad"]),
    target=_maybe,
    cell=st.dictionaries(_text, _text, max_size=3),
    git=_maybe,
    good=_text,
    bad=_text,
    versions=_texts,
    transitions=st.lists(
        st.builds(TransitionEntry, last=_text, first=_text, before=_state, after=_state, skipped_between=_texts),
        max_size=3,
    ).map(tuple),
    probes=st.lists(
        st.builds(ProbeEntry, version=_text, state=_state, flaky=st.booleans(), runs=st.integers(0, 50)), max_size=3
    ).map(tuple),
    skipped=st.lists(st.builds(SkipEntry, version=_text, why=_text), max_size=2).map(tuple),
    probed=_texts,
    not_probed=_texts,
    assumed_constant=st.lists(
        st.builds(
            StretchEntry, last_probed=_text, next_probed=_text, outcome=_text, signature_id=_maybe, unprobed=_texts
        ),
        max_size=2,
    ).map(tuple),
    runs=st.integers(0, 999),
    reused=st.integers(0, 999),
    probes_made=st.integers(0, 999),
    releases_in_range=st.integers(0, 999),
    timing=st.none()
    | st.builds(
        TimingSection,
        slowdown=st.dictionaries(_text, _json_number, max_size=3),
        reference=_text,
        reference_runs=st.integers(0, 9),
        unlike=_texts,
        busy=_maybe,
        claims_refused=_texts,
    ),
    culprits=st.none() | st.lists(_culprit, max_size=2).map(tuple),
)


def _through_a_file(report: BisectReport) -> BisectReport:
    return BisectReport.from_json(json.loads(json.dumps(report.to_json())), where="bisect-x.json")


@given(_reports)
def test_any_report_reads_back_as_itself(report: BisectReport) -> None:
    assert _through_a_file(report) == report


def test_a_file_from_before_the_schema_reads_and_writes_back_what_it_held() -> None:
    """A real bisection written before ``schema_version`` and the probed/assumed lists: every value it held comes
    back, in its order; what it never said comes back empty."""
    data = json.loads(REAL.read_text())
    written = BisectReport.from_json(data, where=str(REAL)).to_json()
    assert {key: written[key] for key in data} == data and [key for key in written if key in data] == list(data)
    assert set(written) - set(data) == {"schema_version", "probed", "not_probed", "assumed_constant"}
    assert next(iter(written)) == "schema_version" and written["schema_version"] == BISECT_SCHEMA_VERSION


def test_a_timing_search_writes_its_report_as_the_type_says(monkeypatch, tmp_path: Path) -> None:
    _, report, _ = _bisect(monkeypatch, tmp_path, SLOW_FROM_5)
    [path] = (tmp_path / "out").glob("bisect-*.json")
    on_disk = json.loads(path.read_text())
    assert on_disk == report.to_json() and BisectReport.from_json(on_disk, where=str(path)) == report
    assert list(on_disk)[-6:] == ["slowdown", "reference", "comparable", "unlike", "busy", "claims_refused"]
    assert report.target == on_disk["target"] == "step slower than 0.18.3 by more than 10%"
    assert report.timing is not None and on_disk["comparable"] is (not report.timing.unlike)


def test_a_newer_schema_is_refused_and_says_to_upgrade() -> None:
    data = {**json.loads(REAL.read_text()), "schema_version": BISECT_SCHEMA_VERSION + 1}
    with pytest.raises(ConfigError, match=r"schema_version 2, this harness reads 1; upgrade reprobisect"):
        BisectReport.from_json(data, where="bisect-new.json")


@pytest.mark.parametrize(
    ("key", "value", "said"),
    [
        ("mode", "sideways", "'mode' is 'sideways'; expected one of all-transitions, first-bad"),
        ("runs", -1, "'runs' is -1; expected a count"),
        ("runs", True, "'runs' is True; expected a count"),
        ("cell", {"torch": 2}, "'cell' is {'torch': 2}; expected an object of package names to versions"),
        ("transitions", {"a": 1}, "'transitions' is {'a': 1}; expected a list of objects"),
        ("culprits", "none", "'culprits' is 'none'; expected a list of culprits"),
        ("range", [], "bisect report 'range' must be a JSON object, not list"),
    ],
)
def test_a_wrong_value_is_named_with_its_file_and_key(key: str, value: Any, said: str) -> None:
    data = {**json.loads(REAL.read_text()), key: value}
    with pytest.raises(ConfigError) as caught:
        BisectReport.from_json(data, where="bisect-bad.json")
    assert str(caught.value).startswith("bisect-bad.json") and said in str(caught.value)


_json = st.recursive(
    st.none() | st.booleans() | _json_number | _text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=12,
)


@given(st.sampled_from(sorted(json.loads(REAL.read_text()))), _json)
def test_any_value_under_any_key_is_a_report_or_a_config_error(key: str, value: object) -> None:
    data = {**json.loads(REAL.read_text()), key: value}
    try:
        BisectReport.from_json(data, where="bisect-merged.json")
    except ConfigError as exc:
        assert str(exc).startswith("bisect-merged.json")


@given(_json)
def test_any_json_at_all_is_a_report_or_a_config_error(value: object) -> None:
    with contextlib.suppress(ConfigError):
        BisectReport.from_json(value, where="bisect-merged.json")
