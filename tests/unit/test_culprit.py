"""The typed culprit (model/culprit.py, issue #53 item 2): it writes the very JSON the reports held before (keys,
order, values), reads it back equal, and refuses, by key and value, what a planted report file puts there."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reprobisect.errors import ConfigError
from reprobisect.model.culprit import Commit, Culprit, SearchTarget

FOUND = Culprit(
    last="0.16.4",
    first="0.16.5",
    kind="introduced",
    target=SearchTarget(outcome="OTHER_FAILURE", signature_id="f7cdbdf8b3"),
    commit=Commit(sha="b" * 40, subject="Training multiple models (#7018)", pull_request="deepspeedai/DeepSpeed#7018"),
    last_good_commit=Commit(sha="a" * 40, subject="Before", pull_request=None),
    commits=12,
    probes=4,
    skipped_between=("c" * 40,),
    rerun="reprobisect bisect --axis deepspeed --git DS --good v0.16.4 --bad v0.16.5",
)

# The entry as bisect/culprits.py wrote it before the type (its dict, key by key, in this order): a found commit
BEFORE = (
    '{"last": "0.16.4", "first": "0.16.5", "kind": "introduced", "target": {"outcome": "OTHER_FAILURE", '
    '"signature_id": "f7cdbdf8b3"}, "commit": {"sha": "' + "b" * 40 + '", "subject": "Training multiple models '
    '(#7018)", "pull_request": "deepspeedai/DeepSpeed#7018"}, "last_good_commit": {"sha": "' + "a" * 40 + '", '
    '"subject": "Before", "pull_request": null}, "commits": 12, "probes": 4, "skipped_between": ["' + "c" * 40 + '"], '
    '"why": null, "rerun": "reprobisect bisect --axis deepspeed --git DS --good v0.16.4 --bad v0.16.5"}'
)


def test_the_json_is_the_one_the_reports_held_before_byte_for_byte() -> None:
    assert json.dumps(FOUND.to_json()) == BEFORE
    unfound = Culprit(
        last="1", first="2", kind="fixed", target=SearchTarget(outcome="PASS", signature_id=None), why="w"
    )
    assert list(unfound.to_json()) == list(json.loads(BEFORE))  # release_sources only where an end was said
    said = Culprit(last="1", first="2", kind="fixed", target=None, release_sources=("0.16.5 is commit x",))
    assert list(said.to_json())[-1] == "release_sources" and said.to_json()["release_sources"] == ["0.16.5 is commit x"]


_text = st.text(max_size=30)
_commit = st.builds(Commit, sha=_text, subject=_text, pull_request=st.none() | _text)


@given(
    st.builds(
        Culprit,
        last=_text,
        first=_text,
        kind=st.sampled_from(["introduced", "fixed", "changed"]),
        target=st.none() | st.builds(SearchTarget, outcome=_text, signature_id=st.none() | _text),
        commit=st.none() | _commit,
        last_good_commit=st.none() | _commit,
        commits=st.none() | st.integers(0, 10**6),
        probes=st.integers(0, 10**6),
        skipped_between=st.lists(_text, max_size=3).map(tuple),
        why=st.none() | _text,
        rerun=st.none() | _text,
        release_sources=st.lists(_text, max_size=3).map(tuple),
    )
)
def test_what_is_written_reads_back_equal(culprit: Culprit) -> None:
    assert Culprit.from_json(json.loads(json.dumps(culprit.to_json())), where="bisect.json") == culprit


@pytest.mark.parametrize(
    ("key", "value", "said"),
    [
        ("kind", "rm -rf ~", "'kind' is 'rm -rf ~'; expected one of introduced, fixed, changed"),
        ("last", 16, "'last' is 16; expected a release"),
        ("probes", -1, "'probes' is -1; expected a count"),
        ("probes", True, "'probes' is True; expected a count"),
        ("commits", "many", "'commits' is 'many'"),
        ("commit", "b" * 40, "'commit' is"),
        ("commit", {"sha": 1, "subject": "s", "pull_request": None}, "'commit' is"),
        ("last_good_commit", {"sha": "a", "subject": ["s"]}, "'last_good_commit' is"),
        ("target", {"outcome": None}, "'target' is"),
        ("target", [], "'target' is"),
        ("skipped_between", "abc", "'skipped_between' is 'abc'; expected a list of strings"),
        ("release_sources", [1], "'release_sources' is [1]"),
        ("why", {"x": 1}, "'why' is"),
        ("rerun", ["reprobisect"], "'rerun' is"),
    ],
)
def test_a_planted_value_is_refused_by_key_and_value(key: str, value: Any, said: str) -> None:
    data = {**FOUND.to_json(), key: value}
    with pytest.raises(ConfigError) as refused:
        Culprit.from_json(data, where="out/bisect.json culprits[0]")
    assert str(refused.value).startswith("out/bisect.json culprits[0]: culprit ") and said in str(refused.value)


@pytest.mark.parametrize("data", [None, [], "introduced", 7])
def test_a_culprit_that_is_no_object_is_refused(data: object) -> None:
    with pytest.raises(ConfigError, match="a culprit must be a JSON object"):
        Culprit.from_json(data, where="bisect.json")
