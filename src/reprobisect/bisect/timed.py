"""Probes of a timing search (``bisect --slower-than``): each version against the good end, repeated until the noise
model (``model/slowdown.py``) gives a verdict or the repeat budget is spent.

A version is probed with the rule's minimum of repeats; while its interval straddles the limit, one more run of it
(one per GPU where runs go side by side: ``timed_slots``) and, while the good end has fewer, as many of the good
end: both sides' noise is in the interval, and the good end's extra runs, taken between the candidates', also catch
a machine that changed speed during the search. A version still ambiguous at ``max_repeats`` is skipped, like ``git
bisect``'s 125, and listed with its interval; one whose runs failed or timed nothing is skipped as unmeasured. The
reference (the good end, or with ``compare_with "bad"`` the bad end, to find where a slowdown went) is "not slower"
by definition.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from reprobisect.bisect.search import ProbeResult
from reprobisect.errors import BisectInconclusiveError
from reprobisect.model.bisect_report import BisectReport
from reprobisect.model.fairness import busy, unlike
from reprobisect.model.record import Record
from reprobisect.model.slowdown import (
    AMBIGUOUS,
    NOT_SLOWER,
    SLOWER,
    SlowdownRule,
    SlowdownVerdict,
    compare_timings,
    refused_steps,
)

__all__ = ["TimedProbes", "ambiguous_versions", "timed_result", "timed_slots"]


def timed_slots(jobs: int, backend: str, gpus: int) -> tuple[int, str]:
    """How many of one version's timed runs may go side by side, and the line that says why (empty for one run at
    a time without ``--jobs``). Runs stay fair only where each has a machine part of its own: a GPU each (the
    job slots of ``run/matrix_units.py`` give each its GPU and its own cores), at most one run per GPU. On the CPU,
    or on one GPU, runs side by side share caches, memory bandwidth or the GPU and slow each other unevenly: one at
    a time, whatever ``--jobs`` says (a timing search's commit probe took about 105 s on an H100, one at a time:
    #52)."""
    if jobs <= 1:
        return 1, ""
    if backend != "cuda":
        why = "on the CPU, runs side by side share caches and memory bandwidth and slow each other unevenly"
        return 1, f"--jobs {jobs}: a timing search runs one run at a time here ({why})"
    if gpus < 2:
        why = f"{gpus} GPU{'s' if gpus != 1 else ''} here, and runs sharing a GPU slow each other unevenly"
        return 1, f"--jobs {jobs}: a timing search runs one run at a time here ({why})"
    slots = min(jobs, gpus)
    capped = f" (--jobs {jobs}, {gpus} GPUs)" if jobs > gpus else ""
    return slots, f"A version's timed runs go {slots} at a time, each on a GPU and cores of its own{capped}"


def timed_result(base: ProbeResult, verdict: SlowdownVerdict, differences: Sequence[str] = ()) -> ProbeResult:
    """A probe's outcome with its timing verdict: ``slower`` set when decided, ``ambiguous`` (a skip) when not. A
    probe already skipped for its outcome (ENV_ERROR, TIMEOUT, flaky) stays skipped for that."""
    timing: dict[str, Any] = {**verdict.to_dict(), "unlike": list(differences)}
    if base.skipped:
        return dataclasses.replace(base, timing=timing)
    if verdict.decided:
        return dataclasses.replace(base, slower=verdict.verdict == SLOWER, timing=timing)
    return dataclasses.replace(base, ambiguous=f"{verdict.verdict}: {verdict.why}", timing=timing)


def ambiguous_versions(report: BisectReport) -> list[str]:
    """The versions a timing search's report left ambiguous (their interval still straddled the limit at
    ``max_repeats``): the search's answer holds only if none moves, so the command exits ``AMBIGUOUS_EXIT``."""
    return [p.version[:40] for p in report.probes if (p.state.timing or {}).get("verdict") == AMBIGUOUS]


class TimedProbes:
    """The probe of a timing search. ``run(version, repeats)`` returns the records of a version's first
    ``repeats`` runs (earlier ones reused); ``fold(version, records)`` their outcome as a probe; ``step`` the runs
    added at once while a version is ambiguous (``timed_slots``: the runs that go side by side)."""

    def __init__(
        self,
        rule: SlowdownRule,
        reference: str,
        run: Callable[[str, int], list[Record]],
        fold: Callable[[str, Sequence[Record]], ProbeResult],
        step: int = 1,
    ) -> None:
        self.rule, self.reference = rule, reference
        self._run, self._fold = run, fold
        self.step = max(1, step)  # runs added to each side of a version still ambiguous: the runs that go at once
        self.records: dict[str, list[Record]] = {}  # every version's records as last used, for the fairness check

    def _records(self, version: str, repeats: int) -> list[Record]:
        have = self.records.get(version, [])
        if len(have) < repeats:
            self.records[version] = have = self._run(version, repeats)
        return have

    def probe(self, version: str) -> ProbeResult:
        """The version's outcome and its verdict against the reference, with as many repeats as it takes."""
        repeats = self.rule.min_repeats
        reference = self._records(self.reference, repeats)
        candidate = reference if version == self.reference else self._records(version, repeats)
        verdict = compare_timings(reference, candidate, self.rule)
        while version != self.reference and verdict.verdict == AMBIGUOUS and repeats < self.rule.max_repeats:
            repeats = min(self.rule.max_repeats, repeats + self.step)
            candidate = self._records(version, repeats)
            reference = self._records(self.reference, repeats)
            verdict = compare_timings(reference, candidate, self.rule)
        if version == self.reference:
            return self._reference(version, verdict, reference)
        return timed_result(self._fold(version, candidate), verdict, unlike([*reference, *candidate]))

    def _reference(self, version: str, verdict: SlowdownVerdict, records: Sequence[Record]) -> ProbeResult:
        """The good end's own probe: not slower than itself, or the search cannot start."""
        base = self._fold(version, records)
        if base.skipped or verdict.ratio is None:
            why = base.skipped or verdict.why
            msg = f"{version} cannot be the reference of a timing search ({why}); pick another end"
            raise BisectInconclusiveError(msg)
        mine = dataclasses.replace(verdict, verdict=NOT_SLOWER, why="the reference itself")
        return timed_result(base, mine, unlike(records))

    def busy(self) -> str | None:
        """Whether the search's runs ended on a machine busier than its cores (``model/fairness.py``)."""
        return busy([r for records in self.records.values() for r in records])

    def refused(self) -> list[str]:
        """``version: why`` for each version with a run whose step times the harness refused as claims (their sum
        above the wall time it measured): the search compared those on wall time (``compare_timings``)."""
        found = {}
        for version, records in self.records.items():
            whys = [why for r in records if (why := refused_steps(r))]
            if whys:
                found[version] = f"{version}: {len(whys)} of {len(records)} runs, {whys[0]}"
        return list(found.values())

    def unlike(self) -> list[str]:
        """Where the runs of the whole search differ in how they ran (``model/fairness.py``); none when alike."""
        return unlike([r for records in self.records.values() for r in records])
