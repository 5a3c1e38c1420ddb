"""``reprobisect bisect``: probes are ordinary matrix runs, so a second bisection reuses every record."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Literal

from packaging.version import Version

from reprobisect.bisect import history
from reprobisect.bisect.prebuild import WheelPrebuilder, prebuilder_for
from reprobisect.bisect.search import (
    PROBE_ALL_UP_TO,
    BisectResult,
    ProbeResult,
    Transition,
    all_transitions,
    estimate,
    first_bad,
    first_sample,
)
from reprobisect.bisect.timed import TimedProbes, timed_slots
from reprobisect.cells.build_jail import BuildJail
from reprobisect.cells.index import IndexCache
from reprobisect.config.load import Config
from reprobisect.errors import ConfigError
from reprobisect.model.bisect_report import (
    BisectReport,
    ProbeEntry,
    SeenState,
    SkipEntry,
    StretchEntry,
    TimingSection,
    TransitionEntry,
    write_bisect_report,
)
from reprobisect.model.record import Record
from reprobisect.model.slowdown import SlowdownRule
from reprobisect.model.verdict import fold_repeats
from reprobisect.run.context import RunContext
from reprobisect.run.matrix_request import MatrixRequest, RunStats
from reprobisect.run.matrix_run import run_matrix
from reprobisect.run.matrix_units import gpu_count
from reprobisect.run.sandbox import Confinement
from reprobisect.run.select import detect_cuda

__all__ = [
    "BisectRequest",
    "bisect_slug",
    "git_revisions",
    "probe_result",
    "releases_between",
    "run_bisect",
    "seen_state",
    "transition_entry",
]


@dataclasses.dataclass(frozen=True, kw_only=True)
class BisectRequest:
    """A bisection as asked for on the command line."""

    repro: str  # a name of config.repros (a script is one: config.scripts.script_repro)
    axis: str
    good: str
    bad: str
    backend: Literal["auto", "cuda", "cpu"] = "auto"
    form: str | None = None
    fix: str = "none"
    target: str | None = None
    any_failure: bool = False
    all_transitions: bool = False
    repeat: int = 1
    prereleases: bool = False
    pins: Mapping[str, str] = dataclasses.field(default_factory=dict)
    git: Path | None = None
    fresh: bool = False
    timeout: float | None = None
    confinement: Confinement = dataclasses.field(default_factory=Confinement)
    jobs: int = 1  # probes at a time: the two ends together, then every open segment's middle (all-transitions)
    requires: Mapping[str, str] = dataclasses.field(default_factory=dict)  # --require: other packages, one version
    target_outcome: str | None = None  # bad = this outcome (with ``target``, and that signature): a fix's commit
    probe_all_up_to: int = PROBE_ALL_UP_TO  # all-transitions probes every version of a range this short
    first_parent: bool = True  # commits: the line of the branch --bad is on, each merge one step
    # with ``git``: the releases whose tags are --good and --bad; the two ends are probed as those releases (their
    # records, when a release search made them, answer without a run) instead of as commits built from the clone
    end_releases: tuple[str | None, str | None] | None = None  # None: that end is a commit no release is
    # a timing search (--slower-than): bad = slower than the good end beyond the threshold, with confidence
    slowdown: SlowdownRule | None = None
    # the end a timing search compares every version with: "good" (bad = slower than it: where a slowdown came) or
    # "bad" (bad = no longer slower than it: where a slowdown went, the later end being the fast one)
    compare_with: Literal["good", "bad"] = "good"


def releases_between(index: IndexCache, axis: str, good: str, bad: str, *, prereleases: bool) -> list[str]:
    """Releases of ``axis`` from ``good`` to ``bad`` inclusive, oldest first, as the index lists them."""
    low, high = sorted((Version(good), Version(bad)))
    releases = [
        v
        for v in index.versions(axis, prereleases=prereleases)
        if low <= Version(v) <= high and (prereleases or not Version(v).is_prerelease)
    ]
    for end in (good, bad):
        if end not in releases:
            msg = f"--good/--bad {end!r}: not a release of {axis} on the configured index"
            raise ConfigError(msg)
    return releases


def git_revisions(repo: Path, good: str, bad: str, *, first_parent: bool = True) -> list[str]:
    """Commits from ``good`` to ``bad`` of a whole clone, oldest first, as full hashes (bisect/history.py)."""
    history.check_clone(repo)
    return history.revisions(repo, good, bad, first_parent=first_parent)


def probe_result(version: str, records: Sequence[Record]) -> ProbeResult:
    """What the records of one version say as a probe: their repeats folded into one state (flaky when they
    disagree); no record at all is a skip, never a verdict."""
    if not records:  # a matrix run of several probes that left none for this one: skipped, never a verdict
        return ProbeResult(version=version, outcome="ENV_ERROR", signature="no record of this probe")
    verdict = fold_repeats((r.outcome, r.signature.id if r.signature else "") for r in records)
    sig_id = verdict.signature_id or None
    text = next((r.signature.text for r in records if r.signature and r.signature.id == sig_id), None)
    return ProbeResult(
        version=version,
        outcome=verdict.outcome,
        signature_id=sig_id,
        signature=text,
        flaky=verdict.flaky,
        runs=verdict.runs,
    )


def _records_of(records: Sequence[Record], axis: str, value: str) -> list[Record]:
    """The records of the probe whose ``axis`` pin is ``value`` (one matrix run may hold several probes)."""
    return [r for r in records if str(r.cell.get("packages", {}).get(axis)) == value]


def _target(config: Config, request: BisectRequest) -> Callable[[ProbeResult], bool]:
    """What counts as bad: slower than the good end (a timing search), the target signature id, any failure, or
    (default) the repro's expected signature."""
    if request.slowdown is not None:
        went = request.compare_with == "bad"
        return (lambda p: p.slower is False) if went else (lambda p: p.slower is True)
    if request.any_failure:
        return lambda p: p.outcome in ("REPRODUCED", "OTHER_FAILURE", "CRASH")
    if request.target_outcome:
        outcome, signature = request.target_outcome, request.target
        return lambda p: p.outcome == outcome and (signature is None or p.signature_id == signature)
    if request.target:
        target = request.target
        return lambda p: p.signature_id == target
    expected = config.repro(request.repro).expected_signature
    if expected is None:
        msg = "no target signature: pass --signature ID or --any-failure (the repro has no expected_signature)"
        raise ConfigError(msg)
    return lambda p: p.outcome == "REPRODUCED"  # classification already matched the expected signature


def run_bisect(
    config: Config,
    request: BisectRequest,
    ctx: RunContext,
) -> tuple[BisectResult, BisectReport, Path]:
    """Search, write ``<out>/bisect-<id>.json`` under the context's store and return the result, the report and
    its path. The probes run quietly: the search prints its own lines."""
    echo = ctx.echo
    repo = request.git.resolve() if request.git is not None else None
    versions = _versions(request, ctx, repo)
    repro = config.repro(request.repro)
    form = request.form or _default_form(list(repro.forms), request.backend)
    held = {**config.default_cell, **request.pins}
    held.pop(request.axis, None)
    backend = resolved_backend(request.backend, ctx)
    runs = _MatrixProbes(
        config=config, request=request, ctx=ctx, repro=repro.name, form=form, held=held, backend=backend, repo=repo
    )
    ends = zip((versions[0], versions[-1]), request.end_releases or (), strict=False)
    runs.ends = {version: release for version, release in ends if release is not None}
    mode = "all-transitions" if request.all_transitions else "first-bad"
    echo(
        f"Bisecting {repro.name} ({form}, fix {request.fix}) over {len(versions)} {request.axis} "
        f"{'commits' if request.git else 'releases'} {versions[0][:12]} … {versions[-1][:12]} ({mode}); "
        f"about {estimate(len(versions))} probes for one transition" + _timing_words(request)
    )
    short = [v[:12] for v in versions] if request.git else versions
    full = dict(zip(short, versions, strict=True))
    timed = _timed_probes(request, runs, short, full) if request.slowdown is not None else None
    probe = timed.probe if timed is not None else (lambda v: runs.probes([full[v]])[0])
    many = None if timed is not None else (lambda chosen: runs.probes([full[v] for v in chosen]))
    if request.all_transitions:
        chosen = first_sample(short, request.probe_all_up_to)
        echo(
            f"Probing {'every one' if len(chosen) == len(short) else f'{len(chosen)}'} of the {len(short)} versions "
            "first (a bug may come and go between two ends that agree)"
        )
        result = all_transitions(short, probe, log=echo, probe_many=many, probe_all_up_to=request.probe_all_up_to)
    else:
        prebuilder = _prebuilder(request, ctx, repo)
        prepare = None if prebuilder is None else (lambda chosen: prebuilder.submit([full[v] for v in chosen]))
        try:
            many = many if request.jobs > 1 else None
            result = first_bad(
                short, probe, _target(config, request), log=echo, probe_many=many, jobs=request.jobs, prepare=prepare
            )
        finally:
            if prebuilder is not None:
                prebuilder.close()
    stats = runs.stats
    timing = _timing_report(request, timed) if timed is not None else None
    report = _report(config, request, (repro.name, form, versions), result, stats, held, timing)
    path = ctx.store.root / f"bisect-{bisect_slug(repro.name, form, request, mode)}.json"
    write_bisect_report(path, report)
    return result, report, path


def resolved_backend(backend: str, ctx: RunContext) -> Literal["cuda", "cpu"]:
    """``auto`` made ``cuda`` or ``cpu`` for the base interpreter: asked once per search, not by every probe (each
    ask imports torch: seconds on a small CPU)."""
    if backend == "auto":
        return "cuda" if ctx.base.torch and detect_cuda(Path(ctx.base.executable)) else "cpu"
    return "cuda" if backend == "cuda" else "cpu"


def timing_jobs(jobs: int, backend: str, ctx: RunContext) -> int:
    """How many runs a timing search lets go side by side on this machine (``timed_slots``): what a sweep whose
    records the search reuses must run at too, or its records and the search's would differ in how they ran."""
    if jobs <= 1:
        return 1
    resolved = resolved_backend(backend, ctx)
    return timed_slots(jobs, resolved, gpu_count() if resolved == "cuda" else 0)[0]


def _timed_probes(
    request: BisectRequest, runs: _MatrixProbes, short: Sequence[str], full: Mapping[str, str]
) -> TimedProbes:
    """A timing search's probe, its runs side by side where each gets a GPU of its own (``timed_slots``)."""
    assert request.slowdown is not None  # only a timing search has a rule
    gpus = gpu_count() if runs.backend == "cuda" and request.jobs > 1 else 0
    runs.timed_jobs, why = timed_slots(request.jobs, runs.backend, gpus)
    if why:
        runs.ctx.echo(why)
    reference = short[-1] if request.compare_with == "bad" else short[0]
    run = lambda version, n: runs.records([full[version]], n)[0]  # noqa: E731 - one line, read where it is used
    return TimedProbes(request.slowdown, reference, run, probe_result, step=runs.timed_jobs)


@dataclasses.dataclass(kw_only=True)
class _MatrixProbes:
    """Probes as matrix runs: the axis holding the versions asked, every other axis held; one matrix run per ask."""

    config: Config
    request: BisectRequest
    ctx: RunContext
    repro: str
    form: str
    held: Mapping[str, str]
    backend: Literal["auto", "cuda", "cpu"]
    repo: Path | None
    stats: RunStats = dataclasses.field(default_factory=RunStats)
    asked: set[str] = dataclasses.field(default_factory=set)  # versions run before: --fresh only their first time
    timed_jobs: int = 1  # a timing search's runs of one version at a time (bisect/timed.py ``timed_slots``)
    # a commit search's two tagged ends and the releases they are (BisectRequest.end_releases): probed as releases
    ends: dict[str, str] = dataclasses.field(default_factory=dict)

    def value(self, version: str) -> str:
        """The axis's pin of a version: the release, the clone at that commit, or the release a tagged end is."""
        if version in self.ends:
            return self.ends[version]
        return f"git+file://{self.repo}@{version}" if self.repo is not None else version

    def records(self, chosen: Sequence[str], repeat: int) -> list[list[Record]]:
        """Each chosen version's records of its first ``repeat`` runs (earlier ones reused), in one matrix run."""
        request = self.request
        axes: dict[str, tuple[str, ...]] = {name: (spec,) for name, spec in self.held.items()}
        axes[request.axis] = tuple(self.value(version) for version in chosen)
        matrix = MatrixRequest(
            repros=(self.repro,),
            backend=self.backend,
            axes=axes,
            forms=(self.form,),
            fixes=(request.fix,),
            repeat=repeat,
            # a timing search asks a version again for one more run: --fresh re-runs only its first ones
            fresh=request.fresh and not self.asked.issuperset(chosen),
            timeout=request.timeout,
            use_includes=False,
            confinement=request.confinement,
            requires=request.requires,
            jobs=self.timed_jobs if request.slowdown is not None else max(1, min(request.jobs, len(chosen))),
        )
        try:
            records = run_matrix(self.config, matrix, self.ctx.quiet(), stats=self.stats)
        except ConfigError:
            if not self.ends.keys() & set(chosen):
                raise
            self.ends.clear()  # a release the index here does not list: the ends are probed as their commits
            return self.records(chosen, repeat)
        self.asked.update(chosen)
        if len(chosen) == 1:
            return [records]
        return [_records_of(records, request.axis, self.value(version)) for version in chosen]

    def probes(self, chosen: Sequence[str]) -> list[ProbeResult]:
        """Each chosen version's outcome as a probe, with ``--repeat`` runs each."""
        found = self.records(chosen, self.request.repeat)
        cut = 12 if self.request.git else None
        results = [probe_result(version[:cut], records) for version, records in zip(chosen, found, strict=True)]
        # an end whose release gave no verdict here (not installable, say) is probed as its commit after all
        again = [v for v, r in zip(chosen, results, strict=True) if v in self.ends and r.skipped]
        for version in again:
            del self.ends[version]
        redone = dict(zip(again, self.probes(again), strict=True)) if again else {}
        return [redone.get(v, r) for v, r in zip(chosen, results, strict=True)]


def _versions(request: BisectRequest, ctx: RunContext, repo: Path | None) -> list[str]:
    """The versions searched, oldest first: the clone's commits from --good to --bad, or the index's releases."""
    if repo is not None:
        return git_revisions(repo, request.good, request.bad, first_parent=request.first_parent)
    index = IndexCache(ctx.envs_dir / "index-cache.json", ctx.base.executable)
    return releases_between(index, request.axis, request.good, request.bad, prereleases=request.prereleases)


def _prebuilder(request: BisectRequest, ctx: RunContext, repo: Path | None) -> WheelPrebuilder | None:
    """Wheels of the next round's commits built while a round runs (bisect/prebuild.py), for a commit search run
    here in rounds: none for one probe at a time (no rounds), a timing search (builds beside a timed run would
    slow it) or a Slurm job (it builds its cells on its node)."""
    rounds = request.jobs > 1 and request.slowdown is None and ctx.executor is None
    return prebuilder_for(
        repo if rounds else None,
        request.axis,
        base=ctx.base,
        envs_dir=ctx.envs_dir,
        log=ctx.store.root / "logs" / "wheel-prebuild.log",
        jobs=request.jobs,
        jail=BuildJail.within(request.confinement.open()) if repo is not None and rounds else None,
    )


def _timing_words(request: BisectRequest) -> str:
    rule = request.slowdown
    if rule is None:
        return ""
    bad = "no longer more than" if request.compare_with == "bad" else "more than"
    return (
        f"; bad = {rule.metric} {bad} {rule.threshold:.0%} slower than the {request.compare_with} end, "
        f"{rule.min_repeats} to {rule.max_repeats} runs a version"
    )


def _timing_report(request: BisectRequest, timed: TimedProbes) -> TimingSection:
    """What a timing search adds to its report: the rule, and whether its runs ran alike."""
    assert request.slowdown is not None  # only timing searches have a TimedProbes
    return TimingSection(
        slowdown=request.slowdown.describe(),
        reference=timed.reference,
        reference_runs=len(timed.records.get(timed.reference, [])),
        unlike=tuple(timed.unlike()),
        busy=timed.busy(),
        claims_refused=tuple(timed.refused()),
    )


def _timing_target(request: BisectRequest, reference: str) -> str:
    """What a timing search counts as bad, in words: its report's ``target``."""
    assert request.slowdown is not None
    no_longer = "no longer " if request.compare_with == "bad" else ""
    return f"{request.slowdown.metric} {no_longer}slower than {reference} by more than {request.slowdown.threshold:.0%}"


def _default_form(forms: list[str], backend: str) -> str:
    """The pure-DeepSpeed form on the CPU (fastest, no shim), the cuda form on a GPU."""
    order = ["cuda"] if backend == "cuda" else ["cpu-deepspeed", "cpu-shim"]
    if backend == "auto":
        order = ["cpu-deepspeed", "cpu-shim", "cuda"]
    for name in order:
        if name in forms:
            return name
    return next(iter(forms))


def bisect_slug(repro: str, form: str, request: BisectRequest, mode: str) -> str:
    """The result file's name: one per repro, form, fix, axis, range and mode (the fix only when not 'none',
    so the names of unmodified-repro bisections stay as they were)."""
    fix = "" if request.fix == "none" else f"-{request.fix}"
    raw = f"{repro}-{form}{fix}-{request.axis}-{request.good[:12]}-{request.bad[:12]}-{mode}"
    return re.sub(r"[^A-Za-z0-9._-]", "_", raw)


def _target_name(request: BisectRequest, timing: TimingSection | None) -> str | None:
    """What counted as bad, as the report names it: the slowdown in words, a signature or outcome, ``any-failure``
    or ``expected``; None where every transition was asked for."""
    if timing is not None:
        return _timing_target(request, timing.reference)
    if request.all_transitions:
        return None
    if request.target_outcome:
        return request.target_outcome + (f" {request.target}" if request.target else "")
    return request.target or ("any-failure" if request.any_failure else "expected")


def seen_state(probe: ProbeResult) -> SeenState:
    """A probe's state as reports write it (``slower`` and ``timing`` only in a timing search)."""
    timed = probe.timing is not None
    return SeenState(
        outcome=probe.outcome,
        signature_id=probe.signature_id,
        signature=probe.signature,
        slower=probe.slower if timed else None,
        timing=dict(probe.timing) if probe.timing is not None else None,
    )


def transition_entry(t: Transition) -> TransitionEntry:
    """A transition as bisect reports write it (and culprit searches read it)."""
    return TransitionEntry(
        last=t.last,
        first=t.first,
        before=seen_state(t.before),
        after=seen_state(t.after),
        skipped_between=tuple(t.skipped_between),
    )


def _report(
    config: Config,
    request: BisectRequest,
    asked: tuple[str, str, list[str]],
    result: BisectResult,
    stats: RunStats,
    held: Mapping[str, str],
    timing: TimingSection | None,
) -> BisectReport:
    """The search's report: what it was asked (``asked``: repro, form, versions), what it found and what it cost."""
    repro, form, versions = asked
    short = [v[:12] for v in versions] if request.git else versions
    probed = {p.version for p in result.probes}
    precision = config.repros[repro].forms[form].precision if repro in config.repros else "as written"  # type: ignore[index]
    return BisectReport(
        repro=repro,
        form=form,
        precision=precision,
        axis=request.axis,
        fix=request.fix,
        mode="all-transitions" if request.all_transitions else "first-bad",
        target=_target_name(request, timing),
        cell=dict(held),
        git=str(request.git) if request.git else None,
        good=request.good,
        bad=request.bad,
        versions=tuple(versions),
        transitions=tuple(transition_entry(t) for t in result.transitions),
        probes=tuple(
            ProbeEntry(version=p.version, state=seen_state(p), flaky=p.flaky, runs=p.runs) for p in result.probes
        ),
        skipped=tuple(SkipEntry(version=p.version, why=p.skipped or "") for p in result.skipped),
        probed=tuple(v for v in short if v in probed),
        not_probed=tuple(v for v in short if v not in probed),
        assumed_constant=tuple(
            StretchEntry(
                last_probed=a.last_probed,
                next_probed=a.next_probed,
                outcome=a.state[0],
                signature_id=a.state[1],
                unprobed=tuple(a.unprobed),
            )
            for a in result.assumed
        ),
        runs=stats.executed,
        reused=stats.reused,
        probes_made=len(result.probes),
        releases_in_range=len(versions),
        timing=timing,
    )
