"""The maintainer's answer to "it got slower" from a sweep over releases (``triage --slower-than``): the releases
whose step is slower than the first one's beyond the threshold, as ranges; the change at each end (with a clone,
the commit and pull request behind it); every release's metric with its interval; and the commands that re-run it.

The sweep's outcome answer (bisect/answer.py) says what broke; this says what got slower. Its numbers come from a
timing search over every release of the sweep (``bisect --slower-than --all-transitions``, its report as written),
so a slowdown that came and went is two changes, and an ambiguous release is named, never counted on either side.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from reprobisect.bisect.answer import with_commit
from reprobisect.bisect.culprit import Culprit
from reprobisect.bisect.culprits import timing_kind
from reprobisect.report.timing_view import interval, timing_markdown, timing_search
from reprobisect.util.neutral import md_document, md_safe

__all__ = ["slowdown_headline", "slowdown_markdown", "slower_ranges"]


def _probes_in_order(report: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The report's probes in the range's order (its probes are listed in the order they were made)."""
    order = [str(v)[:12] if report.get("git") else str(v) for v in report.get("range", {}).get("versions", [])]
    probes = {str(p.get("version")): p for p in report.get("probes", []) if isinstance(p, dict)}
    return [probes[v] for v in order if v in probes]


def slower_ranges(report: Mapping[str, Any]) -> list[list[str]]:
    """The versions judged slower, as ranges of neighbours: an ambiguous or unmeasured version between two slower
    ones does not split a range (it is listed as such), a version judged not slower does."""
    ranges: list[list[str]] = []
    previous_slower = False
    for probe in _probes_in_order(report):
        slower = probe.get("slower")
        if slower is None:  # ambiguous or unmeasured: decides nothing
            continue
        version = str(probe["version"])
        if slower and previous_slower:
            ranges[-1].append(version)
        elif slower:
            ranges.append([version])
        previous_slower = bool(slower)
    return ranges


def _span(versions: Sequence[str]) -> str:
    return versions[0] if len(versions) == 1 else f"{versions[0]} … {versions[-1]}"


def _ratios(report: Mapping[str, Any], span: Sequence[str]) -> str:
    """``×8.41 [8.17, 9.26]`` for one version, or the least and the most slowed of a range."""
    timings = {str(p["version"]): p.get("timing") or {} for p in _probes_in_order(report)}
    measured = sorted(
        (t["ratio"], t.get("low"), t.get("high"))
        for t in (timings.get(v, {}) for v in span)
        if isinstance(t.get("ratio"), (int, float))
    )
    ends = [measured[0], measured[-1]] if len(measured) > 1 else measured
    return " to ".join(interval(*end, lambda v: f"×{v:.2f}") for end in ends) or "ratio not measured"


_WORDS = {"introduced": "came", "fixed": "went", "changed": "changed"}  # a timing change, as a slowdown is said


def _change(transition: Mapping[str, Any], culprit: Culprit | None, hint: str) -> str:
    """``came between 0.18.4 and 0.18.5: **by `311674ffa41b`** subject (owner/repo#N)``."""
    kind = _WORDS[timing_kind(transition.get("from", {}), transition.get("to", {}))]
    return with_commit(f"{kind} between {transition['last']} and {transition['first']}", culprit, hint, by="by")


def slowdown_headline(report: Mapping[str, Any], culprits: Sequence[Culprit] = (), hint: str = "") -> list[str]:
    """The ranges judged slower with the change at each end, or that none is; Markdown list lines."""
    search = timing_search(report)
    metric = search.metric if search else "step"
    reference = str(report.get("reference", {}).get("version", "the first release"))
    found = {(c.last, c.first): c for c in culprits}
    ranges = slower_ranges(report)
    axis = report.get("axis", "?")
    versions = [str(v) for v in report.get("range", {}).get("versions", [])]
    lines = [] if ranges else [f"Not slower: no release of {_span(versions)} is judged slower than {reference}."]
    for span in ranges:
        lines.append(f"- **slower: {axis} {_span(span)}** ({metric} {_ratios(report, span)} against {reference})")
        for t in report.get("transitions", []):
            if t["first"] == span[0] or t["last"] == span[-1]:
                lines.append(f"  - {_change(t, found.get((t['last'], t['first'])), hint)}")
    ambiguous = [p for p in _probes_in_order(report) if p.get("slower") is None]
    if ambiguous and search:
        names = ", ".join(f"{p['version']} ({(p.get('timing') or {}).get('verdict', 'unmeasured')})" for p in ambiguous)
        lines.append(f"- undecided, left out of the ranges: {md_safe(names)}")
    return lines


def slowdown_markdown(
    report: Mapping[str, Any], culprits: Sequence[Culprit] = (), *, name: str, hint: str = "", rerun: str = ""
) -> str:
    """The issue-ready section of a timing sweep: the headline, the timing table, the re-run commands."""
    lines = [
        f"### Slower: {md_safe(str(report.get('repro')))} ({md_safe(str(report.get('form')))}) across "
        f"{md_safe(str(report.get('axis')))}",
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
