"""The maintainer's answer to "it got slower" from a sweep over releases (``triage --slower-than``): the releases
whose step is slower than the first one's beyond the threshold, as ranges; the change at each end (with a clone,
the commit and pull request behind it); every release's metric with its interval; and the commands that re-run it.

The sweep's outcome answer (bisect/answer.py) says what broke; this says what got slower. Its numbers come from a
timing search over every release of the sweep (``bisect --slower-than --all-transitions``, its report as written),
so a slowdown that came and went is two changes, and an ambiguous release is named, never counted on either side.
"""

from __future__ import annotations

from collections.abc import Sequence

from reprobisect.bisect.answer import with_commit
from reprobisect.bisect.culprits import timing_kind
from reprobisect.model.bisect_report import BisectReport, ProbeEntry, TransitionEntry
from reprobisect.model.culprit import Culprit
from reprobisect.report.timing_view import interval, timing_markdown, timing_search
from reprobisect.util.neutral import md_document, md_safe

__all__ = ["slowdown_headline", "slowdown_markdown", "slower_ranges"]


def _probes_in_order(report: BisectReport) -> list[ProbeEntry]:
    """The report's probes in the range's order (its probes are listed in the order they were made)."""
    probes = {p.version: p for p in report.probes}
    return [probes[v] for v in report.version_order if v in probes]


def slower_ranges(report: BisectReport) -> list[list[str]]:
    """The versions judged slower, as ranges of neighbours: an ambiguous or unmeasured version between two slower
    ones does not split a range (it is listed as such), a version judged not slower does."""
    ranges: list[list[str]] = []
    previous_slower = False
    for probe in _probes_in_order(report):
        slower = probe.state.slower
        if slower is None:  # ambiguous or unmeasured: decides nothing
            continue
        if slower and previous_slower:
            ranges[-1].append(probe.version)
        elif slower:
            ranges.append([probe.version])
        previous_slower = slower
    return ranges


def _span(versions: Sequence[str]) -> str:
    return versions[0] if len(versions) == 1 else f"{versions[0]} … {versions[-1]}"


def _ratios(report: BisectReport, span: Sequence[str]) -> str:
    """``×8.41 [8.17, 9.26]`` for one version, or the least and the most slowed of a range."""
    timings = {p.version: p.state.timing or {} for p in _probes_in_order(report)}
    measured = sorted(
        (ratio, _bound(t.get("low")), _bound(t.get("high")))
        for t in (timings.get(v, {}) for v in span)
        if (ratio := _bound(t.get("ratio"))) is not None
    )
    ends = [measured[0], measured[-1]] if len(measured) > 1 else measured
    return " to ".join(interval(*end, lambda v: f"×{v:.2f}") for end in ends) or "ratio not measured"


def _bound(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) else None


_WORDS = {"introduced": "came", "fixed": "went", "changed": "changed"}  # a timing change, as a slowdown is said


def _change(transition: TransitionEntry, culprit: Culprit | None, hint: str) -> str:
    """``came between 0.18.4 and 0.18.5: **by `311674ffa41b`** subject (owner/repo#N)``."""
    kind = _WORDS[timing_kind(transition.before, transition.after)]
    return with_commit(f"{kind} between {transition.last} and {transition.first}", culprit, hint, by="by")


def slowdown_headline(report: BisectReport, culprits: Sequence[Culprit] = (), hint: str = "") -> list[str]:
    """The ranges judged slower with the change at each end, or that none is; Markdown list lines."""
    search = timing_search(report)
    metric = search.metric if search else "step"
    reference = report.timing.reference if report.timing is not None else "the first release"
    found = {(c.last, c.first): c for c in culprits}
    ranges = slower_ranges(report)
    lines = [] if ranges else [f"Not slower: no release of {_span(report.versions)} is judged slower than {reference}."]
    for span in ranges:
        lines.append(
            f"- **slower: {report.axis} {_span(span)}** ({metric} {_ratios(report, span)} against {reference})"
        )
        for t in report.transitions:
            if t.first == span[0] or t.last == span[-1]:
                lines.append(f"  - {_change(t, found.get((t.last, t.first)), hint)}")
    ambiguous = [p for p in _probes_in_order(report) if p.state.slower is None]
    if ambiguous and search:
        names = ", ".join(f"{p.version} ({(p.state.timing or {}).get('verdict', 'unmeasured')})" for p in ambiguous)
        lines.append(f"- undecided, left out of the ranges: {md_safe(names)}")
    return lines


def slowdown_markdown(
    report: BisectReport, culprits: Sequence[Culprit] = (), *, name: str, hint: str = "", rerun: str = ""
) -> str:
    """The issue-ready section of a timing sweep: the headline, the timing table, the re-run commands."""
    lines = [
        f"### Slower: {md_safe(report.repro)} ({md_safe(report.form)}) across {md_safe(report.axis)}",
        "",
        *slowdown_headline(report, culprits, hint),
        "",
        *timing_markdown(report, name),
    ]
    commands = [rerun] if rerun else []
    commands += [c.rerun for c in culprits if c.rerun]
    if commands:
        lines += ["Re-run (records are reused):", "", "```", *commands, "```"]
    return md_document("\n".join([*lines, ""]))
