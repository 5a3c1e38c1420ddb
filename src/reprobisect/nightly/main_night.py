"""``reprobisect nightly --git CLONE``: DeepSpeed's main, followed commit by commit, compared with last night's main.

A release night compares a new release with the last release; main moves every day, so its baseline is last
night's main commit, whose records the state keeps in a folder of their own (``state.main``). One night:

1. Resolve tonight's main in the clone (``origin/main`` after a fetch when the clone has an ``origin``, else the
   branch as it is: offline, the clone you give it). The first night makes it the baseline; a night on which main
   has not moved runs nothing and says so (exit 0).
2. Run the nightly slice on tonight's commit, as a VCS cell pinned ``git+file://CLONE@SHA`` (the pin commit
   bisection gives its probes, so the two nights' records answer the search's ends), and compare it with last
   night's records.
3. For each regression (passed last night, fails now; a run whose repeats disagree is flaky, never a regression),
   ``follow_up``: the commit and pull request, a minimized script, the fixes that pass.
4. Write ``nightly.md`` and ``nightly.json`` (nightly/main_text.py), make tonight's commit the baseline, exit 1 on a
   regression.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path

from reprobisect.config.load import Config
from reprobisect.errors import FAIL_EXIT, ConfigError
from reprobisect.model.cell import id_without
from reprobisect.model.record import Record
from reprobisect.model.verdict import Verdict
from reprobisect.nightly.main_follow_up import Finding, MainPair, follow_up, pair_for, passing_fixes
from reprobisect.nightly.main_text import MainNews, main_body, main_title
from reprobisect.nightly.regressions import flaky_keys, masked, regressed_keys
from reprobisect.nightly.release_night import Night, NightlyRequest, NightlyResult, check_slice
from reprobisect.nightly.slowdowns import flagged_slower, main_slowdowns, screen_limit
from reprobisect.nightly.state import (
    NightlyState,
    commit_state,
    copy_runs,
    load_state,
    main_root,
    records_under,
    stage_baseline,
)
from reprobisect.nightly.targets import AXIS, Target
from reprobisect.report.compare import compare
from reprobisect.report.frame import records_frame
from reprobisect.report.verdicts import Key, verdicts
from reprobisect.report.views import reproduce_command
from reprobisect.run.context import RunContext
from reprobisect.util.clock import utc_now
from reprobisect.util.cmd import run_tool
from reprobisect.util.files import write_atomic

__all__ = ["default_branch", "fetch_origin", "main_commit", "run_main_night"]

Verdicts = dict[Key, Verdict]


def default_branch(clone: Path) -> str:
    """The branch a night follows when ``--deepspeed`` names none: the origin's default branch (DeepSpeed's is
    ``master``, not ``main``), else the branch the clone has checked out, else ``main``."""
    for args in (("refs/remotes/origin/HEAD",), ("HEAD",)):
        done = run_tool(
            ["git", "-C", clone, "symbolic-ref", "--quiet", "--short", *args],
            what=f"--git {clone}",
            timeout=60,
            check=False,
        )
        name = done.stdout.strip().removeprefix("origin/")
        if done.returncode == 0 and name:
            return name
    return "main"


def fetch_origin(clone: Path) -> bool:
    """``git fetch --tags origin`` in the clone when it has an origin; whether it has one."""
    remotes = run_tool(
        ["git", "-C", clone, "remote"], what=f"--git {clone}", timeout=60, error=ConfigError
    ).stdout.split()
    if "origin" not in remotes:
        return False
    run_tool(["git", "-C", clone, "fetch", "--quiet", "--tags", "origin"], what=f"fetching {clone}", timeout=1800)
    return True


def main_commit(clone: Path, ref: str, *, fetch: bool) -> str:
    """The full hash ``ref`` names tonight: ``origin/REF`` after ``git fetch`` when the clone has an origin and
    ``fetch`` is on, else ``REF`` as the clone has it."""
    names = [ref]
    if fetch and fetch_origin(clone):
        names.insert(0, f"origin/{ref}")
    for name in names:
        done = run_tool(
            ["git", "-C", clone, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{name}^{{commit}}"],
            what=f"--git {clone}",
            timeout=60,
            check=False,
        )
        if done.returncode == 0:
            return done.stdout.strip()
    msg = f"--git {clone}: no branch, tag or commit {ref!r} in the clone; give --deepspeed REF of it"
    raise ConfigError(msg)


def run_main_night(config: Config, request: NightlyRequest, ctx: RunContext, *, fetch: bool = True) -> NightlyResult:
    """One night of main (see the module's docstring); ``request.git`` is the clone, ``request.deepspeed`` the
    branch (default: the clone's default branch, see ``default_branch``)."""
    if request.git is None:
        msg = "the main night follows a clone: give --git CLONE"
        raise ConfigError(msg)
    night = Night(config, request, ctx)
    state = load_state(request.state)
    check_slice(state, night, request)
    clone = request.git.resolve()
    ref = request.deepspeed or default_branch(clone)
    sha = main_commit(clone, ref, fetch=fetch)
    last = state.main
    news = MainNews(at=utc_now(), backend=state.backend or request.backend, ref=ref, clone=str(clone), after=sha)
    pair = pair_for(request, clone=clone, good=last["commit"] if last else sha, bad=sha, pins=night.slice["axes"])
    target = Target(kind="ref", name=f"{ref}@{sha[:12]}", spec=pair.spec(sha))
    if last is None:
        records = night.run_slice(target)
        news = dataclasses.replace(news, seeded=True, runs_executed=night.stats.executed)
        return _close(night, state, news, records)
    news = dataclasses.replace(news, before=last["commit"])
    if last["commit"] == sha:
        ctx.echo(f"DeepSpeed {ref} is still {sha[:12]}, as last night: nothing to run.")
        return _close(night, state, news, None)
    return _compare(night, state, news, pair, target)


def _compare(night: Night, state: NightlyState, news: MainNews, pair: MainPair, target: Target) -> NightlyResult:
    """Tonight's slice against last night's records; each regression followed up."""
    root = main_root(night.request.state, state)
    assert root is not None  # a state with a main commit has its folder (load_state checks it)
    base_records = records_under(root)
    copy_runs(base_records, root, night.store.root)
    tonight = night.run_slice(target)
    before = masked(records_frame(night.loaded(base_records)))
    after = masked(records_frame(night.loaded(tonight)))
    regressed = regressed_keys(before, after)
    rule = night.request.slowdown
    comparison = compare(after, before, threshold=screen_limit(rule))
    outcome_changes = comparison.changes[comparison.changes["kind"] != "timing-regression"]
    news = dataclasses.replace(
        news,
        changes=[{str(k): v for k, v in row.items()} for row in outcome_changes.to_dict("records")],
        flaky=flaky_keys(before, after),
        runs_executed=night.stats.executed,
        runs_reused=night.stats.reused,
    )
    labels = (verdicts(before), verdicts(after))
    findings = []
    for key in regressed[: night.request.max_bisects]:
        findings.append(_follow(night, pair, tonight, key, labels))
    news = dataclasses.replace(news, findings=findings, not_followed=len(regressed) - len(findings))
    if rule is not None:  # a run flagged slower: searched over tonight's commits, alone and repeated
        flagged = [key for key, _ in flagged_slower({"tonight": comparison})]
        slowdowns = main_slowdowns(night, flagged, pair, rule, limit=night.request.max_bisects)
        news = dataclasses.replace(news, slowdowns=tuple(slowdowns))
    return _close(night, state, news, tonight)


def _follow(
    night: Night, pair: MainPair, tonight: Sequence[Record], key: Key, labels: tuple[Verdicts, Verdicts]
) -> Finding:
    """One regression: the commands that re-run it, then the commit, the minimized script and the fixes."""
    before, after = labels[0][key], labels[1][key]
    cell_of = {r.cell["id"]: id_without(r.cell["id"], AXIS, pair.spec(pair.bad)) for r in tonight}
    finding = Finding(
        key=key,
        before=before.label,
        after=after.label,
        fixes=passing_fixes(tonight, key, cell_of),
        rerun=tuple(_reproduce(night, tonight, key, cell_of)),
    )
    target = (after.outcome, after.signature_id or None)
    return follow_up(night.config, pair, night.ctx, finding, target)


def _reproduce(night: Night, tonight: Sequence[Record], key: Key, cell_of: dict[str, str]) -> list[str]:
    repro, cell, form, fix = key
    frame = records_frame(night.loaded([r for r in tonight if cell_of.get(r.cell["id"]) == cell]))
    rows = frame[(frame["repro"] == repro) & (frame["form"] == form) & (frame["fix"] == fix)]
    return [] if rows.empty else [reproduce_command(repro, rows.iloc[0], form, fix)]


def _close(night: Night, state: NightlyState, news: MainNews, records: Sequence[Record] | None) -> NightlyResult:
    """Write the body and the summary; make tonight's commit main's baseline (when it ran), then the state."""
    request = night.request
    news = dataclasses.replace(news, repros_not_run=tuple(request.not_run))
    request.out.mkdir(parents=True, exist_ok=True)
    markdown, summary = request.out / "nightly.md", request.out / "nightly.json"
    write_atomic(markdown, main_body(news), what="the nightly issue body")
    write_atomic(summary, json.dumps(news.summary(), indent=2, sort_keys=True) + "\n", what="the nightly summary")
    after = dataclasses.replace(state, backend=state.backend or request.backend, slice=night.slice)
    if records is not None:
        folder = stage_baseline(request.state, records, night.store.root, f"main-{news.after[:12]}")
        main = {"commit": news.after, "ref": news.ref, "since": news.at, "dir": folder, "clone": news.clone}
        after = dataclasses.replace(after, main=main)
    commit_state(request.state, dataclasses.replace(after, history=(*after.history, news.history())))
    night.echo("\n" + news.terminal_summary() + f"\nWrote {markdown} and {summary}")
    failed = news.is_regression or (request.fail_on_change and bool(news.changes))
    return NightlyResult(
        title=main_title(news),
        new_releases=[],
        ran=[] if records is None else [f"{news.ref}@{news.after[:12]}"],
        regressed=news.is_regression,
        changed=bool(news.changes),
        exit_code=FAIL_EXIT if failed else 0,
        markdown=markdown,
        summary=summary,
    )
