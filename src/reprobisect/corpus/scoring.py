"""Score one harness answer against an entry's truth: ranges, the two pull requests, the signatures, the time.

Pure functions over plain data, so every way of being wrong can be planted in a unit test. A row is exact only
when everything the truth knows is matched: the affected ranges release by release, the introducing and the fixing
pull request of every range that has one, and every release's failure (the exception and the start of its message,
both normalized as the harness normalizes its signatures; a pass where the truth passed). Nothing the truth does
not know is scored, and nothing is ever skipped to make a row pass: a release the harness could not run (ENV_ERROR,
TIMEOUT) makes the ranges inexact.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from reprobisect.corpus.truth_model import MESSAGE_PREFIX, Truth
from reprobisect.model.culprit import Commit, Culprit
from reprobisect.model.signature import normalize_message

__all__ = [
    "FAILING",
    "NOT_APPLICABLE",
    "ColumnVerdict",
    "Found",
    "Row",
    "named",
    "prs_verdict",
    "score",
    "signature_agrees",
]

FAILING = ("REPRODUCED", "OTHER_FAILURE", "CRASH")


@dataclasses.dataclass(frozen=True, kw_only=True)
class Found:
    """What the harness said about one entry: every release's outcome and signature text, the affected ranges it
    printed, the commits it named behind each change (``find_culprits``' answers) and how long it took."""

    states: Mapping[str, tuple[str, str | None]]
    affected: Sequence[Sequence[str]]
    culprits: Sequence[Culprit]
    seconds: float


@dataclasses.dataclass(frozen=True, kw_only=True)
class ColumnVerdict:
    """One column of a row: right (True), wrong (False) or not applicable (None), and what was compared."""

    ok: bool | None
    truth: str
    found: str


NOT_APPLICABLE = ColumnVerdict(ok=None, truth="-", found="-")


@dataclasses.dataclass(frozen=True, kw_only=True)
class Row:
    """One entry's line of the accuracy table."""

    entry: str
    ranges: ColumnVerdict
    introduced: ColumnVerdict
    fixed: ColumnVerdict
    signature: ColumnVerdict
    seconds: float
    changed: ColumnVerdict = NOT_APPLICABLE  # the pull requests of signature changes inside a range
    rule: ColumnVerdict = NOT_APPLICABLE  # an interaction: the harness's rules against the truth's regions
    edges: ColumnVerdict = NOT_APPLICABLE  # an interaction: the pull requests at the edges ([[change]])
    cells: str = ""  # an interaction: the cells the harness ran, of the grid's ("5 of 9")

    @property
    def exact(self) -> bool:
        """Everything the truth knows, matched; a column that does not apply does not count against it."""
        return all(v.ok is not False for v in self.columns)

    @property
    def columns(self) -> tuple[ColumnVerdict, ...]:
        """The verdicts in the table's order."""
        return (self.ranges, self.rule, self.introduced, self.fixed, self.changed, self.edges, self.signature)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, with ``exact`` spelled out."""
        return {**dataclasses.asdict(self), "exact": self.exact}


def _spans_text(spans: Sequence[Sequence[str]]) -> str:
    return "; ".join(s[0] if len(s) == 1 else f"{s[0]} … {s[-1]}" for s in spans) or "none"


def _ranges(truth: Truth, found: Found) -> ColumnVerdict:
    expected = truth.span_releases()
    unusable = [r for r in truth.releases if found.states.get(r, ("MISSING", None))[0] not in ("PASS", *FAILING)]
    got = [list(s) for s in found.affected]
    text = _spans_text(got) + (f" (not judged: {', '.join(unusable)})" if unusable else "")
    return ColumnVerdict(ok=got == expected and not unusable, truth=_spans_text(expected), found=text)


def named(commit: Commit | None, why: str | None) -> str:
    """What a commit search named, as a pull-request column shows it: the pull request, the commit where its subject
    names none, or why nothing was named. The one wording of a release transition's and a grid edge's search."""
    if commit is None:
        return f"no commit: {why or 'unknown'}"
    return commit.pull_request or f"{commit.sha[:12]} (no pull request named)"


def _pr(culprit: Culprit | None) -> str:
    return "no transition found" if culprit is None else named(culprit.commit, culprit.why)


def prs_verdict(pairs: Sequence[tuple[str, str]], label: Sequence[str] = ()) -> ColumnVerdict:
    """The truth's pull requests beside what the harness named for the same changes (a pull request, or why none
    was named), each matched where they are equal (n/a: none known)."""
    if not pairs:
        return NOT_APPLICABLE
    got = [found for _, found in pairs]
    labels = [*label, *[""] * (len(pairs) - len(label))]
    wanted = [f"{at}: {pr}" if at else pr for (pr, _), at in zip(pairs, labels, strict=True)]
    ok = all(found.lower() == pr.lower() for (pr, _), found in zip(pairs, got, strict=True))
    return ColumnVerdict(ok=ok, truth=", ".join(wanted), found=", ".join(got))


def _culprit(found: Found, kind: str, end: Literal["first", "last"], release: str) -> Culprit | None:
    """The culprit of the transition of ``kind`` whose ``end`` is ``release``, or None where none was named."""
    return next((c for c in found.culprits if c.kind == kind and getattr(c, end) == release), None)


def _change(truth: Truth, found: Found, end: str) -> ColumnVerdict:
    """The introducing (``end`` = introduced) or fixing pull request of every range that has one, matched with the
    culprit of the transition at the range's end: (release before first, first) or (last, release after last)."""
    pairs = []
    for span in truth.affected:
        change = getattr(span, end)
        if change is not None:
            side: tuple[Literal["first", "last"], str] = (
                ("first", span.first) if end == "introduced" else ("last", span.last)
            )
            pairs.append((change.pr, _pr(_culprit(found, end, *side))))
    return prs_verdict(pairs)


def _changed(truth: Truth, found: Found) -> ColumnVerdict:
    """The pull request behind each signature change inside a range, matched with the culprit the harness named for
    the transition into ``at`` (a ``changed`` search: both sides fail, differently)."""
    changes = [change for span in truth.affected for change in span.changed]
    pairs = [(change.pr, _pr(_culprit(found, "changed", "first", change.at))) for change in changes]
    return prs_verdict(pairs, [change.at for change in changes])


def signature_agrees(truth_line: str, outcome: str, found: str | None) -> bool:
    """Whether the harness's outcome and signature text say what the hand run's exit and last line said: a pass
    for a pass; for a failure, the same exception and the same start of the normalized message."""
    if not truth_line:
        return outcome == "PASS"
    if outcome not in FAILING or not found:
        return False
    if truth_line.startswith("exit "):
        return found.startswith("Exit: status " + truth_line.removeprefix("exit ").split(":", 1)[0])
    if truth_line.startswith("signal "):
        return found.startswith("Signal:")
    t_exc, _, t_msg = truth_line.partition(": ")
    head = found.rsplit(" @ ", 1)[0] if " @ " in found else found
    f_exc, _, f_msg = head.partition(": ")
    if t_exc.rsplit(".", 1)[-1] != f_exc.rsplit(".", 1)[-1]:
        return False
    expected = normalize_message(t_msg)[:MESSAGE_PREFIX]
    return f_msg.startswith(expected) or expected.startswith(f_msg[:MESSAGE_PREFIX])


def _signature(truth: Truth, found: Found) -> ColumnVerdict:
    wrong = []
    for release in truth.releases:
        outcome, text = found.states.get(release, ("MISSING", None))
        measured = truth.runs[release].last_line if release in truth.runs else None
        if measured is None or not signature_agrees(measured, outcome, text):
            wrong.append(f"{release}: {outcome} {text or ''}".rstrip())
    lines = {truth.runs[r].last_line for r in truth.releases if r in truth.runs and truth.runs[r].last_line}
    return ColumnVerdict(
        ok=not wrong,
        truth=f"{len(lines)} failure line(s) over {len(truth.releases)} releases",
        found="as recorded" if not wrong else "; ".join(wrong)[:600],
    )


def score(truth: Truth, found: Found) -> Row:
    """The entry's row: each column right, wrong or not applicable, with what was compared."""
    return Row(
        entry=truth.name,
        ranges=_ranges(truth, found),
        introduced=_change(truth, found, "introduced"),
        fixed=_change(truth, found, "fixed"),
        changed=_changed(truth, found),
        signature=_signature(truth, found),
        seconds=round(found.seconds, 1),
    )
