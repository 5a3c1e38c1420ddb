"""A night's slowdowns (``nightly --slower-than PERCENT``): a run slower than on the baseline beyond the threshold,
with confidence, is a regression like a failure.

Tonight's runs and the baseline's were made on different nights, perhaps on different runners, once each: their
step times screen, they do not judge. The comparison flags a key whose median step is beyond the threshold
(report/compare.py's ``timing-regression``, its limit set to the rule's); each flagged key is then searched as
``bisect --slower-than --all-transitions`` between the baseline and the release (bisect/timed.py): both ends and
every release between run again here, one at a time, repeated until the bootstrap interval is clear of the limit.
Only a release that search calls slower is a regression; with a clone, the commit and pull request behind it are
searched the same way (bisect/culprits.py). A key the screen flags and the search clears is said as cleared.

The main track (one commit a night) screens tonight's commit against last night's the same way, then searches the
commits between the two in the clone: the first commit slower than last night's beyond the threshold, with its pull
request, is the answer.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from reprobisect.bisect import history
from reprobisect.bisect.culprits import find_culprits
from reprobisect.bisect.probes import BisectRequest, run_bisect
from reprobisect.bisect.slowdown_answer import slowdown_markdown, slower_ranges
from reprobisect.model.bisect_report import BisectReport
from reprobisect.model.culprit import Culprit, SearchTarget
from reprobisect.model.slowdown import SlowdownRule
from reprobisect.nightly.main_follow_up import MainPair, repro_source
from reprobisect.nightly.targets import AXIS
from reprobisect.report.compare import Comparison
from reprobisect.report.frame import Bisect
from reprobisect.report.verdicts import Key

__all__ = ["Slowdown", "flagged_slower", "main_slowdowns", "night_slowdowns", "screen_limit"]

SCREEN_WITHOUT_RULE = 1.10  # the comparison's own limit for a step-time change (report/compare.py)


class _Night(Protocol):  # nightly/release_night.py's Night, as far as a slowdown needs it
    config: Any
    request: Any
    ctx: Any
    slice: dict[str, Any]

    def bisect(self, key: Key, good: str, bad: str, *, slowdown: SlowdownRule | None = None) -> Bisect: ...


@dataclasses.dataclass(frozen=True, kw_only=True)
class Slowdown:
    """One flagged key and what the timing search between the baseline and its release said."""

    key: Key
    release: str
    search: Bisect
    culprits: tuple[Culprit, ...] = ()

    @property
    def confirmed(self) -> bool:
        """The release (or one between) is slower than the baseline beyond the threshold, with confidence."""
        return bool(slower_ranges(self.search.report))

    def title_words(self) -> str:
        """``script-x cpu-deepspeed step ×8.41`` and, when found, `` since 311674ffa41b (#7780)``."""
        report = self.search.report
        timing = next((p.state.timing or {} for p in report.probes if p.version == self.release), {})
        ratio = timing.get("ratio")
        metric = report.timing.slowdown.get("metric", "step") if report.timing is not None else "step"
        words = f"{self.key[0]} {self.key[2]} {metric}"
        words += f" ×{ratio:.2f}" if isinstance(ratio, (int, float)) else ""
        commit = next((c.commit for c in self.culprits if c.commit is not None and c.kind == "introduced"), None)
        if commit is not None:
            pr = commit.pull_request
            words += f" since {commit.sha[:12]}" + (f" (#{pr.rpartition('#')[2]})" if pr else "")
        return words

    def markdown(self) -> str:
        """The issue's section for it: the slower ranges, the change at each end, the timing table."""
        return slowdown_markdown(self.search.report, self.culprits, name=self.search.path.name)

    def to_json(self) -> dict[str, Any]:
        return {
            "repro": self.key[0],
            "form": self.key[2],
            "fix": self.key[3],
            "release": self.release,
            "confirmed": self.confirmed,
            "slower": slower_ranges(self.search.report),
            "file": self.search.path.name,
            "culprits": [c.to_json() for c in self.culprits],
        }


def screen_limit(rule: SlowdownRule | None) -> float:
    """The ratio of medians above which a night's comparison flags a run as slower: the rule's limit, else 10 %."""
    return SCREEN_WITHOUT_RULE if rule is None else 1 + rule.threshold


def flagged_slower(comparisons: Mapping[str, Comparison]) -> list[tuple[Key, str]]:
    """Each key the comparisons flag as slower, with the newest release it was flagged in (oldest first)."""
    newest: dict[Key, str] = {}
    for release, comparison in comparisons.items():
        rows = comparison.changes[comparison.changes["kind"] == "timing-regression"]
        for row in rows.to_dict("records"):
            newest[(row["repro"], row["cell"], row["form"], row["fix"])] = release
    return sorted(newest.items())


def night_slowdowns(
    night: _Night, flagged: Sequence[tuple[Key, str]], baseline: str, rule: SlowdownRule, *, limit: int
) -> list[Slowdown]:
    """The timing search of each flagged key (at most ``limit``), and with the night's clone its culprits."""
    found = []
    for key, release in flagged[:limit]:
        search = night.bisect(key, baseline, release, slowdown=rule)
        slowdown = Slowdown(key=key, release=release, search=search)
        if night.request.git is not None and slowdown.confirmed:
            slowdown = dataclasses.replace(slowdown, culprits=tuple(_culprits(night, slowdown, rule)))
        found.append(slowdown)
    return found


def _culprits(night: _Night, slowdown: Slowdown, rule: SlowdownRule) -> list[Culprit]:
    """The commit behind each change of the timing search, between the releases' tags in the night's clone."""
    report, (repro, _, form, fix) = slowdown.search.report, slowdown.key
    request = BisectRequest(
        repro=repro,
        axis=report.axis,
        good=report.good,
        bad=report.bad,
        backend=night.request.backend,
        form=form,
        fix=fix,
        all_transitions=True,
        pins=night.slice["axes"],
        timeout=night.request.timeout,
        confinement=night.request.confinement,
        slowdown=rule,
    )
    source = repro_source(night.config, repro, form)
    return find_culprits(
        night.config, request, report.transitions, clone=night.request.git, ctx=night.ctx, form=form, source=source
    )


def main_slowdowns(
    night: _Night, flagged: Sequence[Key], pair: MainPair, rule: SlowdownRule, *, limit: int
) -> list[Slowdown]:
    """Each flagged run of tonight's main (at most ``limit``) searched over the commits since last night's, every run
    made again here; the first commit slower than last night's, with its pull request."""
    found = []
    for key in flagged[:limit]:
        repro, _, form, fix = key
        request = BisectRequest(
            repro=repro,
            axis=AXIS,
            good=pair.good,
            bad=pair.bad,
            backend=night.request.backend,
            form=form,
            fix=fix,
            pins=night.slice["axes"],
            git=pair.clone,
            timeout=night.request.timeout,
            confinement=night.request.confinement,
            slowdown=rule,
            fresh=True,
        )
        _, report, path = run_bisect(night.config, request, night.ctx)
        culprits = tuple(_first_slower(report, pair.clone))
        found.append(
            Slowdown(key=key, release=pair.bad[:12], search=Bisect(path=path, report=report), culprits=culprits)
        )
    return found


def _first_slower(report: BisectReport, clone: Any) -> list[Culprit]:
    """The commit each slowdown of a commit search came with, as a culprit (its subject and pull request): the
    search was over commits already, so the commit is the transition's own, with no search of its own."""
    slug = history.github_slug(clone, AXIS)
    return [
        Culprit(
            last=t.last,
            first=t.first,
            kind="introduced",
            target=SearchTarget(outcome=t.after.outcome, signature_id=t.after.signature_id),
            commit=history.commit_info(clone, t.first, slug),
        )
        for t in report.transitions
        if t.after.slower and not t.before.slower
    ]
