"""``reprobisect nightly``: what changed since last night, for each DeepSpeed release newer than the baseline.

One night:

1. Read the state folder (``nightly_state``): the baseline release and its records.
2. Ask the configured index for DeepSpeed releases newer than the baseline (or take the one release or
   git ref given with ``--deepspeed``). Nothing new: say so, exit 0.
3. Run the nightly slice of the matrix (``nightly:`` in matrix.yaml: every repro listed, every form of
   the backend, every fix) on each new release; the baseline's records are copied beside them, so a
   second night, a resumed night and the bisection reuse every identical run.
4. Compare each release with the baseline on (repro, form, fix), the cell's other pins being equal.
5. Where an outcome changed, bisect between the baseline and that release (``--all-transitions``), so the
   report names the first release with each change even when several came out at once. With ``--slower-than``,
   a run whose step is slower beyond the threshold is searched on timings the same way (nightly/slowdowns.py).
   Each regression runs again with newer Lightning releases: whose side it is (nightly/other_side.py).
6. Write the report, an issue-ready Markdown body (``nightly.md``) and ``nightly.json``; advance the
   baseline to the newest release run; exit 1 when a run that passed on the baseline no longer passes (or,
   with ``--slower-than``, is slower with confidence).
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import pandas as pd
from packaging.version import Version

from reprobisect.bisect.probes import BisectRequest, run_bisect
from reprobisect.cells.index import IndexCache
from reprobisect.config.load import Config
from reprobisect.errors import FAIL_EXIT, ConfigError
from reprobisect.model.record import Record
from reprobisect.model.slowdown import SlowdownRule
from reprobisect.model.store import Store
from reprobisect.model.verdict import Verdict
from reprobisect.nightly.other_side import other_sides
from reprobisect.nightly.regressions import masked, regressed_keys
from reprobisect.nightly.release_follow_up import release_findings
from reprobisect.nightly.release_text import NightNews, issue_body, title_of
from reprobisect.nightly.slowdowns import flagged_slower, night_slowdowns, screen_limit
from reprobisect.nightly.state import (
    NightlyState,
    baseline_records,
    baseline_root,
    commit_state,
    copy_runs,
    load_state,
    stage_baseline,
)
from reprobisect.nightly.targets import AXIS, DEEPSPEED_REPO, Target, target_of, tonights_targets
from reprobisect.report.compare import Comparison, compare
from reprobisect.report.frame import Bisect, Loaded, records_frame
from reprobisect.report.verdicts import Key, verdicts
from reprobisect.report.views import ReportData
from reprobisect.report.write import plots_for, write_report
from reprobisect.run.context import RunContext
from reprobisect.run.matrix_request import MatrixRequest, RunStats
from reprobisect.run.matrix_run import run_matrix
from reprobisect.run.sandbox import Confinement
from reprobisect.util.clock import utc_now
from reprobisect.util.echo import Echo
from reprobisect.util.files import write_atomic

__all__ = ["Night", "NightlyRequest", "NightlyResult", "check_slice", "run_nightly"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class NightlyRequest:
    """One night as asked for on the command line."""

    state: Path
    out: Path
    backend: Literal["auto", "cuda", "cpu"] = "auto"
    deepspeed: str | None = None
    up_to: str | None = None
    baseline_release: str | None = None
    pins: Mapping[str, str] = dataclasses.field(default_factory=dict)
    repros: tuple[str, ...] = ()
    forms: tuple[str, ...] = ()
    fixes: tuple[str, ...] = ()
    jobs: int = 1
    repeat: int = 1  # runs of each key a night: repeats that disagree make it flaky, never a regression
    timeout: float | None = None
    git: Path | None = None  # a clone of DeepSpeed: the night follows its --deepspeed REF (main) commit by commit
    minimize_budget: float = 600.0  # seconds of minimizing each regression of main (nightly/main_follow_up.py)
    max_releases: int = 3
    max_bisects: int = 3
    fail_on_change: bool = False
    keep_baseline: bool = False
    repo: str = DEEPSPEED_REPO
    confinement: Confinement = dataclasses.field(default_factory=Confinement)
    not_run: tuple[str, ...] = ()  # repros asked for that this machine cannot run, each with why (corpus entries)
    slowdown: SlowdownRule | None = None  # --slower-than: a run slower with confidence is a regression too
    other_side: bool = True  # each regression run again with newer Lightning releases (nightly/other_side.py)
    lightning_up_to: str | None = None  # the newest Lightning release that check tries


@dataclasses.dataclass(frozen=True, kw_only=True)
class NightlyResult:
    """What the night found; ``exit_code`` is 1 on a regression (or any change with --fail-on-change)."""

    title: str
    new_releases: list[str]
    ran: list[str]
    regressed: bool
    changed: bool
    exit_code: int
    markdown: Path
    summary: Path


def _slice(config: Config, request: NightlyRequest) -> dict[str, Any]:
    """What tonight runs besides DeepSpeed; kept in the state to notice a changed slice."""
    if config.nightly is None:
        msg = f"{config.path}: no 'nightly:' section (the slice to run each new release through)"
        raise ConfigError(msg)
    axes = {**config.nightly.axes, **{k: v for k, v in request.pins.items() if k != AXIS}}
    return {"axes": axes, "repros": list(request.repros or config.nightly.repros)}


class Night:
    """One night's run: the shared pieces every step needs."""

    def __init__(self, config: Config, request: NightlyRequest, ctx: RunContext) -> None:
        self.config, self.request = config, request
        self.ctx = dataclasses.replace(ctx, store=Store(request.out))  # the night's records go under --out, always
        self.store, self.echo = self.ctx.store, self.ctx.echo
        self.stats = RunStats()
        self.slice = _slice(config, request)

    def run_slice(self, target: Target) -> list[Record]:
        """Tonight's slice on one DeepSpeed release or commit, its records reused when they exist."""
        axes = {name: (value,) for name, value in self.slice["axes"].items()}
        axes[AXIS] = (target.spec,)
        matrix = MatrixRequest(
            repros=tuple(self.slice["repros"]),
            backend=self.request.backend,
            axes=axes,
            forms=self.request.forms,
            fixes=self.request.fixes,
            jobs=self.request.jobs,
            repeat=self.request.repeat,
            timeout=self.request.timeout,
            use_includes=False,
            confinement=self.request.confinement,
        )
        self.echo(f"\n== deepspeed {target.name}: the nightly slice ==")
        return run_matrix(self.config, matrix, self.ctx, stats=self.stats)

    def loaded(self, records: Sequence[Record]) -> list[Loaded]:
        """``records`` as the report's frame reads them, from tonight's store."""
        root = self.store.root
        return [
            Loaded(record=r, root=root, path=self.store.record_path(r.repro, r.cell["id"], r.form, r.fix, r.repeat))
            for r in records
        ]

    def bisect(self, key: Key, good: str, bad: str, *, slowdown: SlowdownRule | None = None) -> Bisect:
        """Every transition of ``key`` between two releases; with ``slowdown`` a timing search, its runs made again
        one at a time (the slice's runs, made beside others, only screened)."""
        repro, _, form, fix = key
        request = BisectRequest(
            repro=repro,
            axis=AXIS,
            good=good,
            bad=bad,
            backend=self.request.backend,
            form=form,
            fix=fix,
            all_transitions=True,
            pins=self.slice["axes"],
            timeout=self.request.timeout,
            slowdown=slowdown,
            fresh=slowdown is not None,
            confinement=self.request.confinement,
        )
        what = "timing search" if slowdown else "bisect"
        self.echo(f"\n== {what} {repro} {form} {fix}: deepspeed {good} .. {bad} ==")
        _, report, path = run_bisect(self.config, request, self.ctx)
        return Bisect(path=path, report=report)


def _bisect_order(comparisons: Mapping[str, Comparison], regressed: Mapping[str, list[Key]]) -> list[tuple[Key, str]]:
    """Changed keys with the newest release each changed in; regressions first, then the unmodified repros."""
    newest: dict[Key, str] = {}
    for release, comp in comparisons.items():
        outcome_changes = comp.changes[comp.changes["kind"] != "timing-regression"]
        for row in outcome_changes.to_dict("records"):
            newest[(row["repro"], row["cell"], row["form"], row["fix"])] = release  # releases come oldest first
    bad = {k for keys in regressed.values() for k in keys}
    return sorted(newest.items(), key=lambda item: (item[0] not in bad, item[0][3] != "none", item[0]))


def check_slice(state: NightlyState, night: Night, request: NightlyRequest) -> None:
    """ConfigError when tonight's backend or pins differ from the state's: the runs would not be comparable."""
    if state.backend and request.backend != "auto" and state.backend != request.backend:
        msg = (
            f"{request.state}: this state was made with --backend {state.backend}, not {request.backend}; "
            "give each backend its own --state folder"
        )
        raise ConfigError(msg)
    # Other pins would make every key differ; fewer repros, forms or fixes only compare fewer runs.
    if state.slice and state.slice.get("axes") != night.slice["axes"]:
        msg = (
            f"{request.state}: the baseline was run with pins {json.dumps(state.slice.get('axes'))}, tonight's "
            f"are {json.dumps(night.slice['axes'])}; re-seed with --baseline-release RELEASE (or restore the pins)"
        )
        raise ConfigError(msg)


def _write_outputs(out: Path, news: NightNews, report: ReportData | None) -> tuple[Path, Path]:
    out.mkdir(parents=True, exist_ok=True)
    if report is not None:
        write_report(report, out / "report")
    markdown, summary = out / "nightly.md", out / "nightly.json"
    write_atomic(markdown, issue_body(news, report), what="the nightly issue body")
    write_atomic(summary, json.dumps(news.summary(), indent=2, sort_keys=True) + "\n", what="the nightly summary")
    return markdown, summary


def _resolved_backend(records: Sequence[Record], request: NightlyRequest) -> str:
    if request.backend != "auto":
        return request.backend
    return "cuda" if records and all(r.form.startswith("cuda") for r in records) else "cpu"


def _close(
    night: Night,
    news: NightNews,
    report: ReportData | None,
    after: NightlyState,
    new_baseline: Sequence[Record] | None,
) -> NightlyResult:
    """Every night ends here: outputs written, the new baseline staged, then the state committed.

    ``after`` is the state to keep (its history and baseline folder are filled in here); ``new_baseline``
    holds the records that become the baseline, None when the baseline stays.
    """
    request = night.request
    news = dataclasses.replace(news, repros_not_run=list(request.not_run))
    if report is None:
        shutil.rmtree(request.out / "report", ignore_errors=True)  # an earlier night's report would read as tonight's
    markdown, summary = _write_outputs(request.out, news, report)
    folder = after.baseline_dir
    if new_baseline is not None and after.baseline is not None:
        folder = stage_baseline(request.state, new_baseline, night.store.root, after.baseline)
    commit_state(
        request.state, dataclasses.replace(after, history=(*after.history, news.history()), baseline_dir=folder)
    )
    if report is not None:
        night.echo("\n" + news.terminal_summary() + f"\nWrote {markdown}, {summary} and {request.out / 'report'}")
    failed = news.is_regression or (request.fail_on_change and news.is_change)
    return NightlyResult(
        title=title_of(news),
        new_releases=news.new_releases,
        ran=news.ran,
        regressed=news.is_regression,
        changed=news.is_change,
        exit_code=FAIL_EXIT if failed else 0,
        markdown=markdown,
        summary=summary,
    )


def run_nightly(config: Config, request: NightlyRequest, ctx: RunContext) -> NightlyResult:
    """One night: find new releases, run, compare, bisect changes, write the body, advance the baseline. The
    night's records go under ``request.out``, whatever store ``ctx`` names."""
    night = Night(config, request, ctx)
    state = load_state(request.state)
    if not request.baseline_release:
        check_slice(state, night, request)
    index = IndexCache(ctx.envs_dir.resolve() / "index-cache.json", ctx.base.executable)
    available = index.versions(AXIS, refresh=True)
    if request.baseline_release or state.baseline is None:
        return _seed(night, state, available, ctx.echo)
    baseline = state.baseline
    targets, news = _tonight(night, state, available, baseline)
    if not targets:
        return _close(night, news, None, state, None)
    base_records, base_frame = _baseline(night, state)
    ran = _run_releases(night, targets, base_frame)
    news = _compared(news, targets, ran)
    bisects = _bisects(night, news, targets, baseline)
    news = _slowdowns(night, news, targets, baseline)
    news = dataclasses.replace(news, other_sides=other_sides(night, news.regressed, targets))
    news = _found(night, news, bisects, ran, base_frame)
    report = _report(night, state, [*base_records, *ran.records], bisects, ran.comparisons[targets[-1].name])
    news, after, new_baseline = _advanced(night, state, news, targets[-1], ran)
    return _close(night, news, report, after, new_baseline)


def _tonight(
    night: Night, state: NightlyState, available: Sequence[str], baseline: str
) -> tuple[list[Target], NightNews]:
    """What tonight runs and the night's first news, said in a line: the targets, or that there is nothing new."""
    request = night.request
    targets, fresh, skipped = tonights_targets(
        available,
        baseline,
        asked=request.deepspeed,
        repo=request.repo,
        up_to=request.up_to,
        max_releases=request.max_releases,
    )
    news = NightNews(
        at=utc_now(),
        backend=state.backend or request.backend,
        baseline=baseline,
        since=state.since,
        new_releases=fresh,
        skipped=skipped,
        newest=available[-1] if available else None,
        up_to=request.up_to,
    )
    if not targets:
        night.echo(
            f"No DeepSpeed release newer than the baseline {baseline} (baseline since {state.since}; newest on the "
            f"index: {news.newest}{f', up to {request.up_to}' if request.up_to else ''}). Nothing to run."
        )
    else:
        night.echo(
            f"Baseline deepspeed {baseline} (since {state.since}); tonight: "
            + ", ".join(t.name for t in targets)
            + (f"; not run (older new releases): {', '.join(skipped)}" if skipped else "")
        )
    return targets, news


def _baseline(night: Night, state: NightlyState) -> tuple[list[Record], pd.DataFrame]:
    """The baseline's records, copied beside tonight's (so a second night, a resumed night and a bisection reuse
    every identical run), and their frame with DeepSpeed masked, to compare each target with."""
    base_records = baseline_records(night.request.state, state)
    copy_runs(base_records, baseline_root(night.request.state, state), night.store.root)
    return base_records, masked(records_frame(night.loaded(base_records)))


@dataclasses.dataclass(frozen=True, kw_only=True)
class _ReleaseRuns:
    """Tonight's slice on each target (by name, oldest first), each compared with the baseline: its records, the
    comparison, the keys that regressed and, with a clone, what a follow-up calls each key's state."""

    runs: dict[str, list[Record]]
    comparisons: dict[str, Comparison]
    regressed: dict[str, list[Key]]
    labels: dict[str, Mapping[Key, Verdict]]

    @property
    def records(self) -> list[Record]:
        """Every record tonight's slice made, target by target."""
        return [r for records in self.runs.values() for r in records]


def _run_releases(night: Night, targets: Sequence[Target], base_frame: pd.DataFrame) -> _ReleaseRuns:
    """Tonight's slice on each target in turn, compared with the baseline as soon as it has run."""
    ran = _ReleaseRuns(runs={}, comparisons={}, regressed={}, labels={})
    for target in targets:
        ran.runs[target.name] = night.run_slice(target)
        current = masked(records_frame(night.loaded(ran.runs[target.name])))
        ran.comparisons[target.name] = compare(current, base_frame, threshold=screen_limit(night.request.slowdown))
        ran.regressed[target.name] = regressed_keys(base_frame, current)
        if night.request.git is not None:  # what a follow-up calls each regression's state
            ran.labels[target.name] = verdicts(current)
    return ran


def _compared(news: NightNews, targets: Sequence[Target], ran: _ReleaseRuns) -> NightNews:
    """The news with what ran tonight (releases and refs) and how each target compared with the baseline."""
    return dataclasses.replace(
        news,
        ran=[t.name for t in targets],
        refs=[t.name for t in targets if t.kind == "ref"],
        comparisons=ran.comparisons,
        regressed=ran.regressed,
    )


def _slowdowns(night: Night, news: NightNews, targets: Sequence[Target], baseline: str) -> NightNews:
    """With ``--slower-than``, the news with a timing search of each release's runs flagged as slower."""
    rule = night.request.slowdown
    if rule is None:
        return news
    flagged = flagged_slower({t.name: news.comparisons[t.name] for t in targets if t.kind == "release"})
    slowdowns = night_slowdowns(night, flagged, baseline, rule, limit=night.request.max_bisects)
    return dataclasses.replace(news, slowdowns=slowdowns)


def _found(
    night: Night, news: NightNews, bisects: list[Bisect], ran: _ReleaseRuns, base_frame: pd.DataFrame
) -> NightNews:
    """The news with the bisections, what a clone says of each regression (its commit and pull request, a
    minimized script, the fixes that pass), and the night's count of runs made and reused."""
    findings = (
        release_findings(night, bisects, ran.regressed, ran.runs, (verdicts(base_frame), ran.labels))
        if night.request.git
        else []
    )
    return dataclasses.replace(
        news, bisects=bisects, findings=findings, runs_executed=night.stats.executed, runs_reused=night.stats.reused
    )


def _report(
    night: Night, state: NightlyState, records: Sequence[Record], bisects: list[Bisect], comparison: Comparison
) -> ReportData:
    """The night's report: the baseline's and tonight's runs, the bisections, and the newest target compared."""
    frame = records_frame(night.loaded(records))
    return ReportData(
        frame=frame,
        sources=[night.store.root],
        bisects=bisects,
        comparison=comparison,
        baseline=baseline_root(night.request.state, state).resolve(),
        plots=plots_for(frame),
    )


def _advanced(
    night: Night, state: NightlyState, news: NightNews, newest: Target, ran: _ReleaseRuns
) -> tuple[NightNews, NightlyState, list[Record] | None]:
    """The news, the state to keep and the records of the new baseline (None when it stays). The newest target
    becomes the baseline unless ``--keep-baseline``; a release or ref asked for by hand is compared, never made the
    baseline: the nightly's own order stays."""
    request = night.request
    advance = not request.keep_baseline and not request.deepspeed
    news = dataclasses.replace(news, advanced_to=newest.name if advance else None)
    after = dataclasses.replace(
        state, backend=state.backend or _resolved_backend(ran.records, request), slice=night.slice
    )
    if advance:
        after = dataclasses.replace(after, baseline=newest.name, since=news.at)
    return news, after, ran.runs[newest.name] if advance else None


def _bisects(night: Night, news: NightNews, targets: Sequence[Target], baseline: str) -> list[Bisect]:
    """Bisect the changed keys (at most --max-bisects) between the baseline and the release they changed in."""
    releases = {t.name for t in targets if t.kind == "release"}
    order = [(key, release) for key, release in _bisect_order(news.comparisons, news.regressed) if release in releases]
    done: list[Bisect] = []
    for key, release in order[: night.request.max_bisects]:
        done.append(night.bisect(key, baseline, release))
    if len(order) > night.request.max_bisects:
        night.echo(
            f"{len(order) - night.request.max_bisects} more changed run(s) not bisected (--max-bisects "
            f"{night.request.max_bisects})"
        )
    return done


def _seed(night: Night, state: NightlyState, available: Sequence[str], echo: Echo) -> NightlyResult:
    """The first night (or --baseline-release): run the slice on one release and make it the baseline."""
    request = night.request
    if request.baseline_release:
        release = target_of(request.baseline_release, available, repo=request.repo)
        if release.kind != "release":
            msg = f"--baseline-release {request.baseline_release}: the baseline must be a release on the index"
            raise ConfigError(msg)
        name = release.name
    else:
        candidates = [
            v
            for v in available
            if not Version(v).is_prerelease and (not request.up_to or Version(v) <= Version(request.up_to))
        ]
        if not candidates:
            msg = f"--up-to {request.up_to}: no deepspeed release on the configured index is that old"
            raise ConfigError(msg)
        name = candidates[-1]
        echo(f"No baseline in {request.state}: the newest release, deepspeed {name}, becomes the baseline.")
    records = night.run_slice(Target(kind="release", name=name, spec=name))
    news = NightNews(
        at=utc_now(),
        backend=_resolved_backend(records, request),
        baseline=name,
        since=None,
        seeded=True,
        ran=[name],
        advanced_to=name,
        runs_executed=night.stats.executed,
        runs_reused=night.stats.reused,
        newest=available[-1] if available else None,
    )
    frame = records_frame(night.loaded(records))
    report = ReportData(frame=frame, sources=[night.store.root], plots=plots_for(frame))
    after = NightlyState(backend=news.backend, baseline=name, since=news.at, slice=night.slice, history=state.history)
    return _close(night, news, report, after, records)
