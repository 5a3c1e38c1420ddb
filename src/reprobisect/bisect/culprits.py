"""The change behind each release transition: the commits between the two releases' tags, bisected.

A release transition (last release with one state, first with the next) ends where a maintainer's real question
starts: which commit did it? For each, the commits from the earlier release's tag to the later one's (the first
parent line) are bisected for the later state — a failure's signature when a bug came, PASS when it went — and
the first commit with it is named with its subject and the pull request the subject names. Probes are ordinary
matrix runs of cells whose package is a commit of the clone (built once into the kept wheels, pure Python; ops
from the shared op cache), so a second search reuses every record, and it runs where the GPUs are, offline.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

from reprobisect.bisect import history
from reprobisect.bisect.probes import BisectRequest, run_bisect
from reprobisect.bisect.release_source import UntrustedTagError, search_ends
from reprobisect.config.load import Config
from reprobisect.errors import BisectInconclusiveError
from reprobisect.model.bisect_report import SeenState, TransitionEntry
from reprobisect.model.culprit import ChangeKind, Culprit, SearchTarget
from reprobisect.run.context import RunContext
from reprobisect.util.neutral import command_line
from reprobisect.util.stop import in_parallel

__all__ = ["change_kind", "find_culprits", "timing_kind"]

FAILING = ("REPRODUCED", "OTHER_FAILURE", "CRASH")


def timing_kind(before: SeenState, after: SeenState) -> ChangeKind:
    """A timing search's transition: ``introduced`` (the slowdown came), ``fixed`` (it went) or ``changed``."""
    if after.slower and not before.slower:
        return "introduced"
    if before.slower and not after.slower:
        return "fixed"
    return "changed"


def change_kind(before: str, after: str) -> ChangeKind:
    """``introduced`` (a pass became a failure), ``fixed`` (a failure became a pass) or ``changed``."""
    if before == "PASS" and after in FAILING:
        return "introduced"
    if before in FAILING and after == "PASS":
        return "fixed"
    return "changed"


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Search:
    """What one culprit search needs besides the transition."""

    config: Config
    request: BisectRequest
    clone: Path
    slug: str | None
    ctx: RunContext
    source: Sequence[str]  # the options that name the repro (``--script issue.py --env …``), for the re-run line


def find_culprits(
    config: Config,
    request: BisectRequest,
    transitions: Sequence[TransitionEntry],
    *,
    clone: Path,
    ctx: RunContext,
    form: str,
    source: Sequence[str],
) -> list[Culprit]:
    """One entry per release transition (as ``bisect``'s report writes them): the first commit with the later
    state, or why none is named. ``request`` is the release search's (repro, fix, pins, sandbox), ``form`` the form
    it probed."""
    clone = clone.resolve()
    history.check_clone(clone)
    search = _Search(
        config=config,
        request=dataclasses.replace(request, form=form),
        clone=clone,
        slug=history.github_slug(clone, request.axis),
        ctx=ctx,
        source=source,
    )
    searched = [t for t in transitions if _tags(search, t) is not None]  # the others end at once, saying why
    if request.jobs <= 1 or len(searched) <= 1:
        return [_culprit(search, t) for t in transitions]
    # independent searches side by side, sharing --jobs, so that a round of one never waits for a round of the
    # other (on an H100, one after another: 17 releases and the first search's 3 rounds took 146 s, the second
    # search was not done at 202 s)
    share = max(1, -(-request.jobs // len(searched)))
    shared = dataclasses.replace(search, request=dataclasses.replace(search.request, jobs=share))
    return in_parallel(lambda t: _culprit(shared, t), list(transitions), len(transitions))


def _tags(search: _Search, transition: TransitionEntry) -> tuple[str, str] | None:
    """The clone's tags of a transition's two releases, or None when it lacks one."""
    last, first = (history.release_tag(search.clone, end) for end in (transition.last, transition.first))
    return (str(last), str(first)) if last is not None and first is not None else None


def _culprit(search: _Search, transition: TransitionEntry) -> Culprit:
    after = transition.after
    timed = search.request.slowdown is not None
    found = _unfound(transition, timed)
    tags = [history.release_tag(search.clone, end) for end in (transition.last, transition.first)]
    if None in tags:
        missing = transition.last if tags[0] is None else transition.first
        why = (
            f"{search.clone} has no tag of {search.request.axis} {missing} (v{missing} or {missing}); "
            f"fetch its tags: git -C {search.clone} fetch --tags"
        )
        return dataclasses.replace(found, why=why)
    good, bad = str(tags[0]), str(tags[1])
    if timed and found.kind == "changed":
        return dataclasses.replace(found, why="the two releases are alike in timing: no commit to look for")
    ends = _search_ends(search, (good, bad), (transition.last, transition.first))
    if isinstance(ends, str):
        return dataclasses.replace(found, why=ends)
    (good, bad), notes = ends
    releases: tuple[str | None, str | None] = (transition.last, transition.first)
    fork = _branch_start(search, good, bad, releases)
    if fork is not None:
        good, releases = fork[0], (None, releases[1])
        notes = (*notes, fork[1])
    found = dataclasses.replace(found, release_sources=notes)
    request = dataclasses.replace(
        search.request,
        git=search.clone,
        good=good,
        bad=bad,
        all_transitions=False,
        any_failure=False,
        target_outcome=after.outcome,
        target=after.signature_id,
        # the tags are the releases the transition was found between: their records answer the ends (no round of
        # two commit builds and runs that only repeat them; on an H100 that round cost 45 s of a 230 s triage)
        end_releases=releases,
        # where a slowdown went, each commit is compared with the later (fast) tag: the first no longer slower
        compare_with="bad" if timed and found.kind == "fixed" else "good",
    )
    found = dataclasses.replace(found, rerun=_rerun(search, request))
    wanted = _wanted(request, found.kind, after)
    shown = [rev[:12] if len(rev) == 40 else rev for rev in (good, bad)]  # a tag, or the commit a release is
    search.ctx.echo(f"\nWhich commit between {shown[0]} and {shown[1]} {found.kind} it: bisecting for {wanted}")
    try:
        result, report, _ = run_bisect(search.config, request, search.ctx)
    except BisectInconclusiveError as exc:
        return dataclasses.replace(found, why=f"the commits between {good} and {bad} do not say: {exc}")
    [step] = result.transitions
    return dataclasses.replace(
        found,
        commits=len(report.versions) - 1,
        probes=report.probes_made,
        skipped_between=tuple(step.skipped_between),
        commit=history.commit_info(search.clone, step.first, search.slug),
        last_good_commit=history.commit_info(search.clone, step.last, search.slug),
    )


def _search_ends(
    search: _Search, tags: tuple[str, str], releases: tuple[str, str]
) -> tuple[tuple[str, str], tuple[str, ...]] | str:
    """The ends to search between (``release_source.search_ends``) with what was said of each end that is not its
    tag; a string, naming why, where a tag is not its release's code (never searched from)."""
    try:
        ends, notes = search_ends(search.clone, tags, releases, search.request.axis, search.ctx.envs_dir)
    except UntrustedTagError as exc:
        search.ctx.echo(str(exc))
        return str(exc)
    for note in notes:
        search.ctx.echo(note)
    return ends, tuple(notes)


def _branch_start(
    search: _Search, good: str, bad: str, releases: tuple[str | None, str | None]
) -> tuple[str, str] | None:
    """The commit to search from where the older release is on a branch of its own (``history.branch_point``),
    with the note that says so (kept beside the other notes on the ends); None where both are on one line."""
    fork = history.branch_point(search.clone, good, bad)
    if fork is None:
        return None
    note = (
        f"{search.request.axis} {releases[0]} ({good}) is not on {releases[1]}'s line: the search starts where its "
        f"branch left that line, {fork[:12]}, a commit no release is, probed as a commit"
    )
    search.ctx.echo(note)
    return fork, note


def _unfound(transition: TransitionEntry, timed: bool) -> Culprit:
    """A transition's entry before its search: the kind of change, what is looked for, nothing found yet."""
    before, after = transition.before, transition.after
    return Culprit(
        last=transition.last,
        first=transition.first,
        kind=timing_kind(before, after) if timed else change_kind(before.outcome, after.outcome),
        target=SearchTarget(outcome=after.outcome, signature_id=after.signature_id),
    )


def _wanted(request: BisectRequest, kind: str, after: SeenState) -> str:
    """What a commit search looks for, as its first line says it."""
    if request.slowdown is None:
        return f"{after.outcome} {after.signature_id or ''}".rstrip()
    if kind == "fixed":
        return f"the first commit no longer slower than {request.bad}"
    return f"the first commit slower than {request.good}"


def _rerun(search: _Search, request: BisectRequest) -> str:
    """The command that runs this commit search again (its probes' records are reused)."""
    argv = ["reprobisect", "bisect", "--axis", request.axis, "--git", str(search.clone), "--backend", request.backend]
    argv += ["--good", request.good, "--bad", request.bad]
    if request.slowdown is not None:
        rule = request.slowdown
        argv += ["--slower-than", f"{rule.threshold * 100:g}", "--metric", rule.metric]
        argv += ["--min-repeats", str(rule.min_repeats), "--max-repeats", str(rule.max_repeats)]
        argv += ["--compare-with", request.compare_with] if request.compare_with != "good" else []
    else:
        argv += ["--target-outcome", str(request.target_outcome)]
    if request.target and request.slowdown is None:
        argv += ["--signature", request.target]
    if request.form:
        argv += ["--form", request.form]
    if request.fix != "none":
        argv += ["--fix", request.fix]
    argv += [f"--{name}={value}" for name, value in sorted(request.pins.items()) if name != "nproc"]
    tail = list(search.source)
    script_args: list[str] = []
    if "--" in tail:
        cut = tail.index("--")
        tail, script_args = tail[:cut], tail[cut:]
    return command_line([*argv, *tail, *script_args])
