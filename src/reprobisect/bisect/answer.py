"""The maintainer's whole answer to a report, from a sweep over one package's releases (``triage`` with a range
pin): which releases are affected, as ranges; which change introduced the bug and which fixed it (each release
transition, and with a clone the commit behind it: bisect/culprits.py); which candidate fixes pass in the affected
range; and the command that re-runs each finding.

Every release of the sweep ran (the matrix expands a range pin to every release in it), so the transitions are
read, not assumed: the same exhaustive search as ``bisect --all-transitions`` over the sweep's own records, which
skips ENV_ERROR, TIMEOUT and flaky releases as it does and says so.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from typing import Any

from packaging.version import InvalidVersion, Version

from reprobisect.bisect.culprits import FAILING, change_kind
from reprobisect.bisect.probes import probe_result
from reprobisect.bisect.search import ProbeResult, Transition, all_transitions
from reprobisect.model.cell import SYSTEM
from reprobisect.model.culprit import Culprit
from reprobisect.model.record import Record
from reprobisect.util.neutral import md_document, md_safe

__all__ = ["Answer", "answer_markdown", "sweep_answers", "sweep_axis", "with_commit"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class Answer:
    """What one form of a repro says across the releases of ``axis`` it ran on."""

    repro: str
    form: str
    axis: str
    releases: tuple[str, ...]
    states: Mapping[str, ProbeResult]
    transitions: tuple[Transition, ...]
    fixes: Mapping[str, tuple[int, int]]  # fix -> (passes, releases judged) over the affected releases
    pins: Mapping[str, str]  # the sweep's other packages, as its cells had them

    @property
    def affected(self) -> list[list[str]]:
        """The failing releases as ranges of neighbours in the sweep (a skipped release between two failing ones
        does not split a range; it is named as skipped)."""
        ranges: list[list[str]] = []
        previous_failing = False
        for release in self.releases:
            state = self.states[release]
            if state.skipped:
                continue
            failing = state.outcome in FAILING
            if failing and previous_failing:
                ranges[-1].append(release)
            elif failing:
                ranges.append([release])
            previous_failing = failing
        return ranges


def sweep_axis(records: Sequence[Record]) -> str | None:
    """The one package whose version differs between the records' cells (the range pin), else None."""
    packages = {name for r in records for name in r.cell.get("packages", {})}
    varying = [
        name for name in sorted(packages) if len({str(r.cell.get("packages", {}).get(name)) for r in records}) > 1
    ]
    return varying[0] if len(varying) == 1 else None


def _release_order(release: str) -> tuple[int, Version | str]:
    try:
        return (0, Version(release))
    except InvalidVersion:
        return (1, release)


def sweep_answers(records: Sequence[Record]) -> list[Answer]:
    """One answer per repro and form whose unmodified runs (fix ``none``) cover at least two releases of the one
    package that varies; none when no single package varies."""
    axis = sweep_axis(records)
    if axis is None:
        return []
    answers = []
    units = sorted({(r.repro, r.form) for r in records if r.fix == "none"})
    for repro, form in units:
        mine = [r for r in records if (r.repro, r.form) == (repro, form)]
        by_release: dict[str, list[Record]] = {}
        for record in mine:
            if record.fix == "none":
                by_release.setdefault(str(record.cell["packages"][axis]), []).append(record)
        releases = sorted(by_release, key=_release_order)
        if len(releases) < 2:
            continue
        states = {release: probe_result(release, by_release[release]) for release in releases}
        transitions = _transitions(releases, states)
        answer = Answer(
            repro=repro,
            form=form,
            axis=axis,
            releases=tuple(releases),
            states=states,
            transitions=tuple(transitions),
            fixes={},
            pins=held_pins(mine[0].cell, axis),
        )
        affected = {release for span in answer.affected for release in span}
        answers.append(dataclasses.replace(answer, fixes=_fixes_over(mine, axis, affected)))
    return answers


_PYTHON_VERSION = re.compile(r"[0-9]{1,2}(?:\.[0-9]{1,3}){1,2}")


def _is_version(text: str) -> bool:
    """A version as written, nothing around it (packaging would accept surrounding blanks and newlines)."""
    try:
        Version(text)
    except InvalidVersion:
        return False
    return text == text.strip()


def held_pins(cell: Mapping[str, Any], axis: str) -> dict[str, str]:
    """The pins a sweep's cells had besides the package it varies: their packages, and their Python and torch
    where those were pinned. A search that starts from the answer (a commit search between two releases) builds
    its cells from these: without the Python and torch, a Lightning search of cells on Python 3.11.2 with torch
    2.13.0 built its commit cells on the base interpreter with its own torch, where no old commit of Lightning
    would build. A record is read from disk (hostile input): only a Python given as a version (``3.11.2``, never a
    path the search would run as an interpreter) and a torch that is a version are held; another value is not."""
    pins = {str(k): str(v) for k, v in (cell.get("packages") or {}).items()}
    python, torch = str(cell.get("python_source", SYSTEM)), str(cell.get("torch", ""))
    if _PYTHON_VERSION.fullmatch(python):
        pins["python"] = python
    if cell.get("torch_source") == "pinned" and _is_version(torch):
        pins["torch"] = torch
    pins.pop(axis, None)
    return pins


def _transitions(releases: list[str], states: Mapping[str, ProbeResult]) -> list[Transition]:
    """Every change between neighbouring usable releases (all ran: nothing is assumed)."""
    usable = [r for r in releases if not states[r].skipped]
    if len(usable) < 2:
        return []
    result = all_transitions(releases, states.__getitem__, probe_all_up_to=len(releases))
    return list(result.transitions)


def _fixes_over(records: Sequence[Record], axis: str, affected: set[str]) -> dict[str, tuple[int, int]]:
    """For each candidate fix, on how many of the affected releases it passed (every repeat), of those it ran on."""
    runs: dict[str, dict[str, list[str]]] = {}
    for record in records:
        release = str(record.cell["packages"][axis])
        if record.fix != "none" and release in affected:
            runs.setdefault(record.fix, {}).setdefault(release, []).append(record.outcome)
    return {
        fix: (sum(all(o == "PASS" for o in outcomes) for outcomes in by_release.values()), len(by_release))
        for fix, by_release in sorted(runs.items())
    }


def _state(result: ProbeResult) -> str:
    if result.skipped:
        return f"skipped ({result.skipped})"
    return f"{result.outcome} {result.signature_id or ''}".rstrip()


def _span(releases: Sequence[str]) -> str:
    return releases[0] if len(releases) == 1 else f"{releases[0]} … {releases[-1]}"


def answer_markdown(
    answer: Answer, culprits: Sequence[Culprit] = (), *, rerun: str = "", culprit_hint: str = ""
) -> str:
    """The issue-ready section: affected ranges with the change at each end, the fixes over the affected range,
    every release's state, and the commands that re-run the findings (run output passed through ``md_safe``)."""
    found = {(c.last, c.first): c for c in culprits}
    lines = [f"### The answer: {md_safe(answer.repro)} ({md_safe(answer.form)}) across {answer.axis}", ""]
    affected = answer.affected
    if not affected:
        lines += [f"Not affected: none of the {len(answer.releases)} releases {_span(answer.releases)} fails.", ""]
    for span in affected:
        lines.append(f"- **affected: {answer.axis} {_span(span)}** ({len(span)} of {len(answer.releases)} releases)")
        for t in answer.transitions:
            if t.first == span[0] or t.last == span[-1]:
                lines.append(f"  - {_change(t, found.get((t.last, t.first)), culprit_hint)}")
    others = [t for t in answer.transitions if not any(t.first == s[0] or t.last == s[-1] for s in affected)]
    for t in others:
        lines.append(f"- {_change(t, found.get((t.last, t.first)), culprit_hint)}")
    if answer.fixes:
        lines += ["", "Candidate fixes over the affected releases:"]
        lines += [f"- `{md_safe(fix)}`: passes on {ok} of {n}" for fix, (ok, n) in answer.fixes.items()]
    lines += ["", "Every release: " + "; ".join(f"{r} {md_safe(_state(answer.states[r]))}" for r in answer.releases)]
    texts = {s.signature_id: s.signature for s in answer.states.values() if s.signature_id and s.signature}
    if texts:
        lines += ["", "Signatures:", *(f"- `{sid}`: {md_safe(text)}" for sid, text in sorted(texts.items()))]
    commands = [rerun] if rerun else []
    commands += [c.rerun for c in culprits if c.rerun]
    if commands:
        lines += ["", "Re-run (records are reused):", "", "```", *commands, "```"]
    return md_document("\n".join([*lines, ""]))


def _change(t: Transition, culprit: Culprit | None, hint: str) -> str:
    kind = change_kind(t.before.outcome, t.after.outcome)
    between = f", {len(t.skipped_between)} skipped between" if t.skipped_between else ""
    text = f"{kind} between {t.last} and {t.first}{between} ({md_safe(_state(t.before))} → {md_safe(_state(t.after))})"
    return with_commit(text, culprit, hint, by=f"{kind} by")


def with_commit(text: str, culprit: Culprit | None, hint: str, *, by: str) -> str:
    """A change's line with the commit found behind it (``**by `sha`** subject (PR)``), why none was named, or
    the hint that a clone would name it; the outcome answer and the timing answer say it alike."""
    if culprit is None:
        return text + (f": {hint}" if hint else "")
    commit = culprit.commit
    if commit is None:
        return f"{text}: commit unknown — {md_safe(str(culprit.why))}"
    pr = f" ({commit.pull_request})" if commit.pull_request else ""
    sources = "".join(f"; {md_safe(note)}" for note in culprit.release_sources)
    return f"{text}: **{by} `{commit.sha[:12]}`** {md_safe(commit.subject)}{pr}{sources}"
