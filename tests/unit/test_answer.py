"""The whole answer from a sweep's records: affected ranges, the change at each end, fixes over the affected range,
and Markdown that shows what ran (records made from a real one, states planted)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from reprobisect.bisect.answer import answer_markdown, sweep_answers, sweep_axis
from reprobisect.model.culprit import Commit, Culprit, SearchTarget
from reprobisect.model.record import Record
from reprobisect.model.signature import Signature

BASELINE = Path(__file__).parents[1] / "resources" / "records" / "baseline"
RELEASES = [f"0.16.{i}" for i in range(10)]
WRONG = Signature(exception="AssertionError", message="D's step holds G's gradient")


def _record(release: str, outcome: str, fix: str = "none", repeat: int = 0, form: str = "cpu-deepspeed") -> Record:
    template = Record.load(next((BASELINE / "records").rglob("*none__r0.json")))
    packages = {"deepspeed": release, "lightning": "2.6.6"}
    return dataclasses.replace(
        template,
        repro="script-issue",
        form=form,
        fix=fix,
        repeat=repeat,
        cell={**template.cell, "id": f"torch-x_deepspeed-{release}_lightning-2.6.6", "packages": packages},
        outcome=outcome,
        signature=None if outcome == "PASS" else WRONG,
    )


def _sweep(states: dict[str, str], fix_states: dict[str, str] | None = None) -> list[Record]:
    records = [_record(release, outcome) for release, outcome in states.items()]
    records += [_record(release, outcome, fix="fix-a") for release, outcome in (fix_states or {}).items()]
    return records


def test_a_bug_that_came_and_went_is_one_affected_range_with_both_ends() -> None:
    states = {r: ("OTHER_FAILURE" if "0.16.3" <= r <= "0.16.6" else "PASS") for r in RELEASES}
    fixed = {r: "PASS" for r in RELEASES if "0.16.3" <= r <= "0.16.6"} | {"0.16.5": "OTHER_FAILURE"}
    records = _sweep(states, fixed)
    assert sweep_axis(records) == "deepspeed"
    [answer] = sweep_answers(records)
    assert answer.affected == [["0.16.3", "0.16.4", "0.16.5", "0.16.6"]]
    assert [(t.last, t.first) for t in answer.transitions] == [("0.16.2", "0.16.3"), ("0.16.6", "0.16.7")]
    assert answer.fixes == {"fix-a": (3, 4)}
    assert answer.pins == {"lightning": "2.6.6"}
    text = answer_markdown(answer, rerun="nox -s triage -- issue.py --deepspeed '>=0.16'", culprit_hint="add --git")
    assert "**affected: deepspeed 0.16.3 … 0.16.6** (4 of 10 releases)" in text
    assert "introduced between 0.16.2 and 0.16.3" in text and "fixed between 0.16.6 and 0.16.7" in text
    assert "`fix-a`: passes on 3 of 4" in text and "nox -s triage --" in text


def test_culprits_are_named_with_commit_subject_and_pull_request() -> None:
    states = {r: ("OTHER_FAILURE" if r >= "0.16.5" else "PASS") for r in RELEASES}
    [answer] = sweep_answers(_sweep(states))
    culprit = Culprit(
        last="0.16.4",
        first="0.16.5",
        kind="introduced",
        target=SearchTarget(outcome="OTHER_FAILURE", signature_id="f7cdbdf8b3"),
        commit=Commit(sha="b418cf6c1" + "0" * 31, subject="Training multiple models (#7018)",
                      pull_request="deepspeedai/DeepSpeed#7018"),
        rerun="reprobisect bisect --git DS --good v0.16.4 --bad v0.16.5",
    )  # fmt: skip
    text = answer_markdown(answer, [culprit])
    assert "**introduced by `b418cf6c1000`** Training multiple models (#7018) (deepspeedai/DeepSpeed#7018)" in text
    assert "reprobisect bisect --git DS --good v0.16.4 --bad v0.16.5" in text
    moved = dataclasses.replace(
        culprit, release_sources=("0.16.5 as published is commit 819af0e5940b, not its tag v0.16.5 (8 …",)
    )
    text = answer_markdown(answer, [moved])
    assert "(deepspeedai/DeepSpeed#7018); 0.16.5 as published is commit 819af0e5940b, not its tag v0.16.5" in text


def test_skipped_releases_are_named_and_never_split_or_end_a_range() -> None:
    states = {r: "PASS" for r in RELEASES} | {
        "0.16.4": "OTHER_FAILURE",
        "0.16.5": "ENV_ERROR",
        "0.16.6": "OTHER_FAILURE",
    }
    [answer] = sweep_answers(_sweep(states))
    assert answer.affected == [["0.16.4", "0.16.6"]]
    text = answer_markdown(answer)
    assert "0.16.5 skipped (ENV_ERROR" in text


def test_no_single_axis_varies_no_answer() -> None:
    records = [_record("0.16.4", "PASS"), _record("0.16.4", "OTHER_FAILURE", fix="fix-a")]
    assert sweep_axis(records) is None and sweep_answers(records) == []


@given(st.lists(st.sampled_from(["PASS", "OTHER_FAILURE", "ENV_ERROR", "CRASH"]), min_size=2, max_size=10))
@settings(max_examples=200, deadline=None)
def test_every_failing_release_is_in_exactly_one_range_and_no_other(outcomes) -> None:
    states = dict(zip(RELEASES, outcomes, strict=False))
    answers = sweep_answers(_sweep(states))
    failing = {r for r, o in states.items() if o in ("OTHER_FAILURE", "CRASH")}
    for answer in answers:
        listed = [r for span in answer.affected for r in span]
        assert sorted(listed) == sorted(failing) and len(listed) == len(set(listed))


def test_hostile_signature_text_is_neutralised() -> None:
    hostile = Signature(exception="AssertionError", message="@maintainer <!-- hide --> <script>x</script> |")
    states = {r: "PASS" for r in RELEASES[:3]}
    records = [_record(r, o) for r, o in states.items()]
    records.append(dataclasses.replace(_record("0.16.3", "OTHER_FAILURE"), signature=hostile))
    [answer] = sweep_answers(records)
    text = answer_markdown(answer)
    assert "maintainer" in text and "hide" in text  # the signature is shown, neutralised
    assert "<!--" not in text and "<script" not in text and "@maintainer" not in text
