"""A corpus entry's truth held against its own hand runs: the ranges are where the runs fail (or, for a performance
entry, are slower beyond the limit), the kinds say what the runs say, and each pull request checked by hand says
what it claims at its commit and its parent. A truth that contradicts itself would score a wrong answer as right.
"""

from __future__ import annotations

from reprobisect.corpus.truth_model import (
    MARGIN,
    SlowdownTruth,
    Truth,
    fail,
    failure_key,
    measured_commit,
)

__all__ = ["check_commits", "check_runs"]


def check_runs(truth: Truth, where: str) -> None:
    """Measured runs name listed releases, and where every release ran, the failing ones are the affected ones."""
    for release in truth.runs:
        if release not in truth.releases:
            raise fail(where, f"runs.{release}", truth.runs[release].exit, "names a release not listed in 'releases'")
    if set(truth.runs) != set(truth.releases):
        return  # not measured yet (the tool fills it); corpus runs refuse an entry without every run
    if truth.slowdown is not None:
        if any(span.changed for span in truth.affected):
            right = "a performance entry's runs pass: no failure changes signature; drop [[affected.changed]]"
            raise fail(where, "affected.changed", [c.at for s in truth.affected for c in s.changed], right)
        _check_timed_runs(truth, truth.slowdown, where)
        _check_kinds(truth, where)
        return
    failing = [r for r in truth.releases if truth.runs[r].exit != 0]
    stated = [r for span in truth.span_releases() for r in span]
    if failing != stated:
        right = f"the runs fail on {', '.join(failing) or 'none'}; the affected ranges must say the same"
        raise fail(where, "affected", ", ".join(stated) or "none", right)
    _check_kinds(truth, where)
    _check_changed_runs(truth, where)


def _check_kinds(truth: Truth, where: str) -> None:
    """The kinds the runs decide are stated exactly when the runs say so: ``came-and-went`` (a range with a passing
    release listed on each side), ``still-present`` (the last release listed is affected: it fails, or for a
    performance entry is slower), ``signature-changes`` (a range whose failures differ, as the scoring tells them
    apart)."""
    spans = truth.span_releases()
    said = {
        "came-and-went": any(s[0] != truth.releases[0] and s[-1] != truth.releases[-1] for s in spans),
        "still-present": bool(spans) and spans[-1][-1] == truth.releases[-1],
        "signature-changes": any(len({failure_key(truth.runs[r].last_line) for r in s}) > 1 for s in spans),
    }
    for kind, runs_say in said.items():
        if (kind in truth.kinds) != runs_say:
            right = f"the runs {'say' if runs_say else 'do not say'} {kind!r}; {'add' if runs_say else 'drop'} it"
            raise fail(where, "kinds", list(truth.kinds), right)


def _check_timed_runs(truth: Truth, rule: SlowdownTruth, where: str) -> None:
    """A performance entry's runs all pass and are timed; the releases slower than the first beyond the limit are
    the affected ones, and none lies within ``MARGIN`` of the limit (the harness's verdict there is a coin flip)."""
    for release in truth.releases:
        run = truth.runs[release]
        if run.exit != 0 or not run.step_ms:
            right = "a performance entry's runs must pass and be timed (step_ms): its bug is a time; rerun the tool"
            raise fail(where, f"runs.{release}", run.exit if run.exit else list(run.step_ms), right)
    reference = truth.runs[truth.releases[0]].median_ms
    ratios = {r: truth.runs[r].median_ms / reference for r in truth.releases}
    for release, ratio in ratios.items():
        if rule.limit / MARGIN < ratio < rule.limit * MARGIN:
            right = (
                f"×{ratio:.2f} of {truth.releases[0]} is too near the limit ×{rule.limit:.2f}; choose another threshold"
            )
            raise fail(where, f"runs.{release}.step_ms", list(truth.runs[release].step_ms), right)
    slower = [r for r in truth.releases if ratios[r] > rule.limit]
    stated = [r for span in truth.span_releases() for r in span]
    if slower != stated:
        right = f"the runs are slower on {', '.join(slower) or 'none'}; the affected ranges must say the same"
        raise fail(where, "affected", ", ".join(stated) or "none", right)


def _check_changed_runs(truth: Truth, where: str) -> None:
    """Each signature change inside a range is where the runs say it is: the release before ``at`` and ``at`` both
    fail, with failures the scoring tells apart."""
    for n, span in enumerate(truth.affected):
        for change in span.changed:
            before = truth.runs[truth.releases[truth.releases.index(change.at) - 1]].last_line
            after = truth.runs[change.at].last_line
            if failure_key(before) == failure_key(after):
                right = (
                    f"the runs fail alike on both sides ({after[:60]!r}); name a release where the signature changes"
                )
                raise fail(where, f"affected[{n}].changed.at", change.at, right)


def _check_changed_commits(truth: Truth, where: str) -> None:
    """A signature change's commit fails as ``at`` does, its parent as the release before it (where measured)."""
    for n, span in enumerate(truth.affected):
        for change in span.changed:
            previous = truth.releases[truth.releases.index(change.at) - 1]
            for sha, release in ((change.commit, change.at), (change.parent, previous)):
                row = measured_commit(truth.commits, sha) if sha else None
                wanted = truth.runs[release].last_line if release in truth.runs else None
                if row is None or wanted is None:
                    continue
                if row.exit == 0 or failure_key(row.last_line) != failure_key(wanted):
                    said = f"exit {row.exit}" + (f": {row.last_line[:60]}" if row.last_line else "")
                    right = f"its measured run must fail as {release} does ({wanted[:60]!r}), not {said}"
                    raise fail(where, f"affected[{n}].changed", sha, right)


def check_commits(truth: Truth, where: str) -> None:
    """A pull request checked by hand must say what it claims: the introducing commit fails and its parent passes,
    the fixing commit passes and its parent fails (where ``[commits]`` holds their runs); for a performance entry,
    the introducing commit is slower than its parent beyond the limit and the fixing one's parent than it."""
    if truth.slowdown is not None:
        _check_timed_commits(truth, truth.slowdown, where)
        return
    _check_changed_commits(truth, where)
    for n, span in enumerate(truth.affected):
        for end, change in (("introduced", span.introduced), ("fixed", span.fixed)):
            if change is None:
                continue
            for sha, fails in ((change.commit, end == "introduced"), (change.parent, end == "fixed")):
                row = measured_commit(truth.commits, sha) if sha else None
                if row is not None and (row.exit != 0) != fails:
                    said = f"exit {row.exit}" + (f": {row.last_line[:80]}" if row.last_line else "")
                    right = f"its measured run must {'fail' if fails else 'pass'} for the {end} side ({said})"
                    raise fail(where, f"affected[{n}].{end}", sha, right)


def _check_timed_commits(truth: Truth, rule: SlowdownTruth, where: str) -> None:
    for n, span in enumerate(truth.affected):
        for end, change in (("introduced", span.introduced), ("fixed", span.fixed)):
            if change is None or not change.parent:
                continue
            commit = measured_commit(truth.commits, change.commit)
            parent = measured_commit(truth.commits, change.parent)
            if commit is None or parent is None or not commit.step_ms or not parent.step_ms:
                continue  # not measured yet
            slow, fast = (commit, parent) if end == "introduced" else (parent, commit)
            if slow.median_ms / fast.median_ms <= rule.limit:
                said = f"{slow.median_ms:.2f} ms against {fast.median_ms:.2f} ms"
                right = f"the {end} side must be slower beyond ×{rule.limit:.2f} across the commit ({said})"
                raise fail(where, f"affected[{n}].{end}", change.commit, right)
