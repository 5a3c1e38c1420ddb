"""What a release night does about each regression when it has a clone of DeepSpeed (``nightly --track releases
--git CLONE``): the three answers the main night gives (nightly/main_follow_up.py), between the two releases its own
release bisection found for the regression.

The release bisection names the adjacent pair (last good release, first bad one); the commits between their tags
are searched for tonight's outcome and signature (the two ends answered by the releases' own records), the form's
script is minimized between the two releases, and tonight's cell is run once more with DeepSpeed overridden back to
the last good release (``back-to-<release>``). A regression whose bisection did not settle on one pair, or whose
releases have no tag in the clone, says why instead.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from reprobisect.bisect import history
from reprobisect.bisect.release_source import UntrustedTagError, search_ends
from reprobisect.model.cell import id_without
from reprobisect.model.record import Record
from reprobisect.model.verdict import Verdict
from reprobisect.nightly.main_follow_up import Finding, follow_up, pair_for, passing_fixes
from reprobisect.nightly.targets import AXIS
from reprobisect.report.frame import Bisect
from reprobisect.report.verdicts import Key

__all__ = ["release_findings", "release_pair"]


def release_pair(bisect: Bisect, clone: Path) -> tuple[tuple[str, str], tuple[str, str]] | str:
    """The (last good, first bad) releases of a regression's release bisection and their tags in ``clone``, or why
    there are none."""
    steps = [t for t in bisect.report.transitions if t.before.outcome == "PASS"]
    if len(steps) != 1:
        return f"the release bisection found {len(steps)} transitions from a pass (one expected)"
    releases = (steps[0].last, steps[0].first)
    tags = [history.release_tag(clone, release) for release in releases]
    if None in tags:
        missing = releases[0] if tags[0] is None else releases[1]
        return f"{clone} has no tag of deepspeed {missing}; fetch its tags: git -C {clone} fetch --tags"
    return releases, (str(tags[0]), str(tags[1]))


def release_findings(
    night: Any,
    bisects: Sequence[Bisect],
    regressed: Mapping[str, Sequence[Key]],
    records: Mapping[str, Sequence[Record]],
    labels: tuple[Mapping[Key, Verdict], Mapping[str, Mapping[Key, Verdict]]],
) -> list[Finding]:
    """One finding per regression with a bisection (``night`` is nightly/release_night.py's Night: its request names the
    clone). ``labels`` are the baseline's verdicts and each release's."""
    found = []
    for release, keys in regressed.items():
        for key in keys:
            bisect = next((b for b in bisects if _bisect_key(b) == (key[0], key[2], key[3])), None)
            if bisect is not None:  # without one (beyond --max-bisects) the issue says how many were not followed
                found.append(_finding(night, bisect, key, records[release], (labels[0][key], labels[1][release][key])))
    return found


def _finding(
    night: Any, bisect: Bisect, key: Key, tonight: Sequence[Record], labels: tuple[Verdict, Verdict]
) -> Finding:
    request = night.request
    before, after = labels
    cell_of = {r.cell["id"]: id_without(r.cell["id"], AXIS, str(r.cell["packages"].get(AXIS, ""))) for r in tonight}
    finding = Finding(key=key, before=before.label, after=after.label, fixes=passing_fixes(tonight, key, cell_of))
    pair = release_pair(bisect, request.git)
    if isinstance(pair, str):
        return dataclasses.replace(finding, commit_why=pair, minimize_why=pair)
    releases, tags = pair
    clone = request.git.resolve()
    try:
        (good, bad), notes = search_ends(clone, tags, releases, AXIS, night.ctx.envs_dir)  # a release is not its tag
    except UntrustedTagError as exc:  # a tag that is not the release's code: named, never searched from
        return dataclasses.replace(finding, commit_why=str(exc), minimize_why=str(exc))
    for note in notes:
        night.ctx.echo(note)
    main_pair = pair_for(request, clone=clone, good=good, bad=bad, pins=night.slice["axes"], releases=releases)
    return follow_up(night.config, main_pair, night.ctx, finding, (after.outcome, after.signature_id or None))


def _bisect_key(bisect: Bisect) -> tuple[str, str, str]:
    return (bisect.report.repro, bisect.report.form, bisect.report.fix)
