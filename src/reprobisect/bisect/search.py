"""Search an ordered list of versions for where a repro's outcome changes. Pure: the probe is injected.

Two questions, as maintainers ask them:

* ``first_bad``: given a good and a bad end, the adjacent pair (last good, first bad) in about
  log2(N) probes. "Bad" is whatever ``is_bad`` says (the target signature), not any failure.
* ``all_transitions``: every change of state across the range, where a state is an outcome plus a
  signature id (the GAN bug's symptom drifts between releases). Bugs in this stack come and go: a release
  breaks something, a later one fixes it, and both ends of the range pass. So no stretch is assumed constant
  when the range is short enough to probe whole (``probe_all_up_to`` versions, 48 by default: DeepSpeed's
  0.16-0.19 is 36 releases), and a longer one is sampled densely first (both ends, the first and last release
  of every minor series, and evenly spaced versions) before each change is refined by bisection. What was
  assumed is said: the result lists every stretch taken as constant because its two probed ends agree, with the
  versions inside it that were never probed.

Probes that say nothing about the bug (ENV_ERROR, TIMEOUT) or that disagree with themselves across
repeats (flaky) are skipped like git bisect's exit 125: the search moves to a neighbour and the result
lists what was skipped and why. Every probe is memoized.

Probes may run several at a time (``probe_many``): the two ends (or the whole first sample) together, and in
``all_transitions`` the middles of every segment still open, one wave at a time. The searches ask exactly what
they ask one at a time (each segment's next probe depends only on its two ends), so the answer and the set of
probes are the same; only the order of the probe list differs.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from packaging.version import InvalidVersion, Version

from reprobisect.errors import BisectInconclusiveError

__all__ = [
    "PROBE_ALL_UP_TO",
    "BisectResult",
    "ProbeResult",
    "Search",
    "Stretch",
    "Transition",
    "all_transitions",
    "first_bad",
    "first_sample",
]

SKIPPED_OUTCOMES = ("ENV_ERROR", "TIMEOUT")
PROBE_ALL_UP_TO = 48  # all-transitions probes every version of a range this long or shorter


@dataclasses.dataclass(frozen=True, kw_only=True)
class ProbeResult:
    """What one version did: an outcome with its signature, or a reason to skip it."""

    version: str
    outcome: str
    signature_id: str | None = None
    signature: str | None = None
    flaky: bool = False
    runs: int = 1
    # a timing search's probe (bisect/timed.py): slower than the good end beyond the threshold, or not; None when
    # the search is on outcomes. ``ambiguous`` says why a timing verdict could not be given (skipped, like 125)
    slower: bool | None = None
    ambiguous: str | None = None
    timing: Mapping[str, Any] | None = None  # the numbers behind the timing verdict, as the report writes them

    @property
    def skipped(self) -> str | None:
        """Why this probe cannot be trusted, or None."""
        if self.flaky:
            return "flaky: repeats disagree"
        if self.ambiguous:
            return self.ambiguous
        if self.outcome in SKIPPED_OUTCOMES:
            return f"{self.outcome}: {self.signature or 'no signature'}"
        return None

    @property
    def state(self) -> tuple[str, str | None]:
        """Outcome plus signature id: two failures with different signatures are different states; in a timing
        search, outcome plus ``slower`` or ``not slower``."""
        if self.slower is not None:
            return (self.outcome, "slower" if self.slower else "not slower")
        return (self.outcome, self.signature_id)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Transition:
    """Last version with one state, first version with the next (skipped versions may lie between)."""

    last: str
    first: str
    before: ProbeResult
    after: ProbeResult
    skipped_between: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True, kw_only=True)
class Stretch:
    """Versions never probed, taken to share the state of the two probed versions around them, which agree."""

    last_probed: str
    next_probed: str
    state: tuple[str, str | None]
    unprobed: tuple[str, ...]


@dataclasses.dataclass(frozen=True, kw_only=True)
class BisectResult:
    """Transitions found, every probe made (in order), the versions skipped, and the stretches assumed constant."""

    transitions: list[Transition]
    probes: list[ProbeResult]
    skipped: list[ProbeResult]
    assumed: list[Stretch] = dataclasses.field(default_factory=list)


class Search:
    """Memoizing wrapper around a probe, with a log of what was asked."""

    def __init__(
        self,
        versions: Sequence[str],
        probe: Callable[[str], ProbeResult],
        log: Callable[[str], None] = lambda _: None,
        probe_many: Callable[[Sequence[str]], Sequence[ProbeResult]] | None = None,
    ) -> None:
        if len(versions) < 2:
            msg = f"need at least two versions to search, got {list(versions)}"
            raise BisectInconclusiveError(msg)
        self.versions = list(versions)
        self._probe = probe
        self._probe_many = probe_many
        self.results: dict[int, ProbeResult] = {}
        self.order: list[int] = []
        self.log = log
        self.prepare: Callable[[Sequence[str]], None] | None = None  # versions a later round may probe

    def at(self, index: int) -> ProbeResult:
        """Probe ``versions[index]`` once; later calls return the same result."""
        if index not in self.results:
            result = self._probe(self.versions[index])
            self.results[index] = result
            self.order.append(index)
            self.log(self.picture(index))
        return self.results[index]

    def prefetch(self, indices: Sequence[int]) -> None:
        """Probe the ones of ``indices`` not probed yet together, when a ``probe_many`` was given (else they are
        probed one at a time when first asked for)."""
        wanted = [i for i in dict.fromkeys(indices) if i not in self.results]
        if self._probe_many is None or len(wanted) < 2:
            return
        found = self._probe_many([self.versions[i] for i in wanted])
        for index, result in zip(wanted, found, strict=True):
            self.results[index] = result
            self.order.append(index)
            self.log(self.picture(index))

    def usable_between(self, lo: int, hi: int) -> int | None:
        """A probed-or-probeable index strictly between lo and hi whose probe is not skipped, nearest the middle."""
        middle = (lo + hi) // 2
        candidates = sorted(range(lo + 1, hi), key=lambda i: (abs(i - middle), i))
        for index in candidates:
            if self.at(index).skipped is None:
                return index
        return None

    def picture(self, current: int | None = None) -> str:
        """One character per version: the probed outcome's glyph, ``?`` skipped, ``·`` not probed."""
        marks = [_glyph(self.results.get(index)) for index in range(len(self.versions))]
        line = "".join(marks)
        if current is None:
            return line
        result = self.results[current]
        said = result.skipped if result.ambiguous else result.state[1] or ""
        return f"{line}  {self.versions[current]}: {result.outcome} {said}{_timing_text(result.timing)}"

    def result(self, transitions: list[Transition], assumed: Sequence[Stretch] = ()) -> BisectResult:
        probes = [self.results[i] for i in self.order]
        skipped = [p for p in probes if p.skipped]
        return BisectResult(transitions=transitions, probes=probes, skipped=skipped, assumed=list(assumed))


_GLYPHS = {"PASS": "✓", "REPRODUCED": "✗", "OTHER_FAILURE": "!", "CRASH": "☠"}


def _glyph(result: ProbeResult | None) -> str:
    """``·`` not probed, ``?`` skipped, ``▲`` slower (a timing search), else the outcome's mark."""
    if result is None:
        return "·"
    if result.skipped:
        return "?"
    return "▲" if result.slower else _GLYPHS.get(result.outcome, "!")


def _timing_text(timing: Mapping[str, Any] | None) -> str:
    """`` ×1.52 [1.47, 1.58], 3 runs`` for a timing probe with a ratio, else nothing."""
    if not timing or timing.get("ratio") is None:
        return ""
    return f" ×{timing['ratio']:.2f} [{timing['low']:.2f}, {timing['high']:.2f}], {timing['runs']} runs"


def estimate(n: int) -> int:
    """About how many probes a single-transition search over n versions takes."""
    return 2 + max(0, math.ceil(math.log2(max(n - 1, 1))))


def _end(search: Search, index: int, step: int, stop: int) -> int:
    """The nearest usable end from ``index`` towards ``stop`` (ends may be skipped too)."""
    while search.at(index).skipped is not None:
        index += step
        if (step > 0 and index >= stop) or (step < 0 and index <= stop):
            msg = "every version in the range was skipped (ENV_ERROR, TIMEOUT or flaky); nothing to compare"
            raise BisectInconclusiveError(msg)
    return index


def first_bad(
    versions: Sequence[str],
    probe: Callable[[str], ProbeResult],
    is_bad: Callable[[ProbeResult], bool],
    log: Callable[[str], None] = lambda _: None,
    probe_many: Callable[[Sequence[str]], Sequence[ProbeResult]] | None = None,
    *,
    jobs: int = 1,
    prepare: Callable[[Sequence[str]], None] | None = None,
) -> BisectResult:
    """The adjacent (last good, first bad) pair between a good first and a bad last version.

    With ``probe_many`` and ``jobs`` > 1 each round probes ``jobs`` evenly spaced versions of the open segment
    together (a (jobs+1)-ary search): 45 commits take 3 rounds of 8 on a node with 16 cores instead of 6 one at a
    time; the answer is the same pair. ``prepare`` is told, before each round runs, the versions the round after
    it may probe whatever this one finds (it starts building them meanwhile; it must not wait for them)."""
    search = Search(versions, probe, log, probe_many)
    search.prepare = prepare
    search.prefetch([0, len(versions) - 1])
    lo = _end(search, 0, 1, len(versions) - 1)
    hi = _end(search, len(versions) - 1, -1, lo)
    if is_bad(search.at(lo)):
        good = search.at(lo)
        msg = f"{versions[lo]} is already bad ({good.outcome} {good.signature_id}); pick an older --good"
        raise BisectInconclusiveError(msg)
    if not is_bad(search.at(hi)):
        bad = search.at(hi)
        msg = f"{versions[hi]} is not bad ({bad.outcome} {bad.signature_id}); pick another --bad or target"
        raise BisectInconclusiveError(msg)
    while hi - lo > 1:
        if probe_many is not None and jobs > 1 and hi - lo > 2:
            narrowed = _round(search, lo, hi, jobs, is_bad)
            if narrowed is not None:
                lo, hi = narrowed
                continue
        mid = search.usable_between(lo, hi)
        if mid is None:
            break  # everything between is skipped: the answer is the (lo, hi) pair with skips inside
        if is_bad(search.at(mid)):
            hi = mid
        else:
            lo = mid
    between = tuple(versions[i] for i in range(lo + 1, hi))
    transition = Transition(
        last=versions[lo], first=versions[hi], before=search.at(lo), after=search.at(hi), skipped_between=between
    )
    return search.result([transition])


def round_points(lo: int, hi: int, jobs: int) -> list[int]:
    """The ``jobs`` evenly spaced indices strictly between ``lo`` and ``hi`` that one round probes."""
    inside = hi - lo - 1
    return sorted({lo + 1 + (k * inside) // (jobs + 1) for k in range(1, jobs + 1)} - {lo, hi})


def _round(
    search: Search, lo: int, hi: int, jobs: int, is_bad: Callable[[ProbeResult], bool]
) -> tuple[int, int] | None:
    """One round of a (jobs+1)-ary search: ``jobs`` evenly spaced versions strictly between ``lo`` and ``hi``
    probed together, and the segment between the last good and the first bad of them; None when every one of
    them was skipped (the caller then walks to a usable neighbour one at a time)."""
    points = round_points(lo, hi, jobs)
    if search.prepare is not None:  # whichever segment this round leaves open, the next round probes its points
        ends = [lo, *points, hi]
        upcoming = [i for a, b in itertools.pairwise(ends) if b - a > 1 for i in round_points(a, b, jobs)]
        search.prepare([search.versions[i] for i in upcoming if i not in search.results])
    search.prefetch(points)
    usable = [i for i in points if search.at(i).skipped is None]
    if not usable:
        return None
    for index in usable:
        if is_bad(search.at(index)):
            return lo, index
        lo = index
    return lo, hi


def first_sample(versions: Sequence[str], probe_all_up_to: int = PROBE_ALL_UP_TO) -> list[int]:
    """The indices all-transitions probes before it bisects anything: every version when there are at most
    ``probe_all_up_to``; else both ends, the first and last release of every minor series (a bug a series brought
    and its own last patch fixed shows at its ends), and evenly spaced versions, about ``probe_all_up_to // 2``
    in all (a list of commits has no series: it is spaced evenly)."""
    count = len(versions)
    if count <= probe_all_up_to:
        return list(range(count))
    chosen = {0, count - 1}
    for members in _series(versions).values():
        chosen.update((members[0], members[-1]))
    spaced = max(2, probe_all_up_to // 2)
    chosen.update(round(i * (count - 1) / (spaced - 1)) for i in range(spaced))
    return sorted(chosen)


def _series(versions: Sequence[str]) -> dict[tuple[int, ...], list[int]]:
    """The indices of each minor series (``0.16``: 0.16.0 … 0.16.9); none when the list is not of releases of
    at least two components each (commit hashes, of which an all-digit one would parse as a version)."""
    series: dict[tuple[int, ...], list[int]] = {}
    for index, version in enumerate(versions):
        try:
            release = Version(version).release
        except InvalidVersion:
            return {}
        if len(release) < 2:
            return {}
        series.setdefault(release[:2], []).append(index)
    return series


def all_transitions(
    versions: Sequence[str],
    probe: Callable[[str], ProbeResult],
    log: Callable[[str], None] = lambda _: None,
    probe_many: Callable[[Sequence[str]], Sequence[ProbeResult]] | None = None,
    *,
    probe_all_up_to: int = PROBE_ALL_UP_TO,
) -> BisectResult:
    """Every change of state (outcome + signature id) between the first and last version; see the module's doc
    for what is probed and what is assumed."""
    search = Search(versions, probe, log, probe_many)
    chosen = first_sample(versions, probe_all_up_to)
    search.prefetch(chosen)
    lo = _end(search, 0, 1, len(versions) - 1)  # a skipped end: its nearest usable neighbour stands for it
    hi = _end(search, len(versions) - 1, -1, lo)
    usable = sorted({lo, hi, *(i for i in chosen if lo < i < hi and search.at(i).skipped is None)})
    transitions: list[Transition] = []
    assumed: list[Stretch] = []
    wave = list(itertools.pairwise(usable))
    while wave:  # one wave: every open segment's middle, probed together when probe_many allows
        search.prefetch([(left + right) // 2 for left, right in wave if _open(search, left, right)])
        wave = _split(search, versions, wave, transitions, assumed)
    transitions.sort(key=lambda t: versions.index(t.last))
    assumed.sort(key=lambda a: versions.index(a.last_probed))
    return search.result(transitions, assumed)


def _open(search: Search, left: int, right: int) -> bool:
    """A segment whose ends differ and that has versions between them: its middle is probed next."""
    return right - left > 1 and search.at(left).state != search.at(right).state


def _split(
    search: Search,
    versions: Sequence[str],
    wave: list[tuple[int, int]],
    transitions: list[Transition],
    assumed: list[Stretch],
) -> list[tuple[int, int]]:
    """Each segment of ``wave`` closed (constant, or a transition found) or split at a usable middle; a constant
    segment with versions never probed inside is noted in ``assumed``."""
    after: list[tuple[int, int]] = []
    for left, right in wave:
        if search.at(left).state == search.at(right).state:
            unprobed = tuple(versions[i] for i in range(left + 1, right) if i not in search.results)
            if unprobed:
                assumed.append(
                    Stretch(
                        last_probed=versions[left],
                        next_probed=versions[right],
                        state=search.at(left).state,
                        unprobed=unprobed,
                    )
                )
            continue
        if right - left == 1:
            transitions.append(
                Transition(last=versions[left], first=versions[right], before=search.at(left), after=search.at(right))
            )
            continue
        mid = search.usable_between(left, right)
        if mid is None:
            between = tuple(versions[i] for i in range(left + 1, right))
            transitions.append(
                Transition(
                    last=versions[left],
                    first=versions[right],
                    before=search.at(left),
                    after=search.at(right),
                    skipped_between=between,
                )
            )
            continue
        after.extend([(left, mid), (mid, right)])
    return after
