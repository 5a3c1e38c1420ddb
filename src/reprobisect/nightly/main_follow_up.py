"""What a night does about one regression of DeepSpeed's main, with no human step: the three answers a maintainer
used to get by hand with ``bisect --git``, ``minimize`` and ``--fix-override`` after reading the issue.

1. **The commit**: the commits of the clone between last night's main and tonight's are bisected for tonight's
   outcome and signature (``run_bisect`` with ``git=clone``, as ``find_culprits`` does for a release transition).
   The two ends are the night's own cells (the same ``git+file://CLONE@SHA`` pin), so their records answer them.
2. **A minimized script**: the form's script (with the fix's arguments) cut down by ``minimize`` between tonight's
   cell (it must fail there the same way) and last night's (it must not), within ``--minimize-budget``.
3. **Which fixes pass tonight**: the repro's own fixes, as tonight's slice ran them, and one run more: tonight's
   cell with DeepSpeed overridden back to last night's commit (``--fix-override``), the workaround to offer.

A step that cannot answer says why (a search the commits do not settle, a script that does not fail alone) and the
others still run; an error of the harness itself is not an answer and stops the night (exit 2 and up).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from reprobisect.bisect import history
from reprobisect.bisect.probes import BisectRequest, run_bisect
from reprobisect.config.load import Config
from reprobisect.config.scripts import CliFixes, cli_fixes, with_fixes
from reprobisect.errors import BisectInconclusiveError, NotInterestingError
from reprobisect.minimize.request import Budget, MinimizeRequest
from reprobisect.model.outcome import Outcome
from reprobisect.model.record import Record
from reprobisect.nightly.targets import AXIS
from reprobisect.report.verdicts import Key
from reprobisect.run.context import RunContext
from reprobisect.run.matrix_request import MatrixRequest
from reprobisect.run.matrix_run import run_matrix
from reprobisect.run.sandbox import Confinement
from reprobisect.util.neutral import command_line

__all__ = [
    "BACK_TO_BASELINE",
    "Finding",
    "MainPair",
    "NightSettings",
    "follow_up",
    "pair_for",
    "passing_fixes",
    "repro_source",
]

BACK_TO_BASELINE = "back-to-last-night"  # the override fix: tonight's cell, DeepSpeed at last night's commit


@dataclasses.dataclass(frozen=True, kw_only=True)
class MainPair:
    """Last night's and tonight's commit of main in one clone, and what tonight's slice ran besides DeepSpeed."""

    clone: Path
    good: str  # full hashes
    bad: str
    pins: Mapping[str, str]
    backend: Any
    timeout: float | None
    jobs: int
    minimize_budget: float
    out: Path
    confinement: Confinement  # the night's: every follow-up run is confined as the slice's runs were
    # a release night's pair: good and bad are the two releases' tags, whose pins are the releases themselves
    releases: tuple[str, str] | None = None

    def spec(self, sha: str) -> str:
        """The DeepSpeed pin of a commit: the one commit bisection gives its probes, so records meet (a release for
        a release night's ends)."""
        if self.releases is not None and sha in (self.good, self.bad):
            return self.releases[0] if sha == self.good else self.releases[1]
        return f"git+file://{self.clone.resolve()}@{sha}"

    @property
    def back_fix(self) -> str:
        """The override fix's name: DeepSpeed back at last night's main, or at the last good release."""
        return BACK_TO_BASELINE if self.releases is None else f"back-to-{self.releases[0]}"

    @property
    def good_end(self) -> str:
        """Where the regression did not show, in words: what the override fix takes DeepSpeed back to."""
        return "last night's commit" if self.releases is None else f"{self.releases[0]}, the last good release"

    @property
    def span(self) -> str:
        """What the commit search spans, for the night's output."""
        if self.releases is None:
            return f"which commit of main made {{}} fail: {self.good[:12]} .. {self.bad[:12]}"
        return f"which commit between {self.good} and {self.bad} made {{}} fail"


class NightSettings(Protocol):
    """What a follow-up takes from the night's request (nightly/release_night.py's ``NightlyRequest``)."""

    @property
    def backend(self) -> Any: ...
    @property
    def timeout(self) -> float | None: ...
    @property
    def jobs(self) -> int: ...
    @property
    def minimize_budget(self) -> float: ...
    @property
    def out(self) -> Path: ...
    @property
    def confinement(self) -> Confinement: ...


def pair_for(
    request: NightSettings,
    *,
    clone: Path,
    good: str,
    bad: str,
    pins: Mapping[str, str],
    releases: tuple[str, str] | None = None,
) -> MainPair:
    """The pair a night's follow-ups search between, with the night's own settings (both tracks build it so)."""
    return MainPair(
        clone=clone,
        good=good,
        bad=bad,
        pins=pins,
        backend=request.backend,
        timeout=request.timeout,
        jobs=request.jobs,
        minimize_budget=request.minimize_budget,
        out=request.out,
        confinement=request.confinement,
        releases=releases,
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class Finding:
    """One regression of main and the answers the night found for it (each None with a ``why`` when it has none)."""

    key: Key
    before: str  # last night's verdict label
    after: str  # tonight's
    commit: Mapping[str, Any] | None = None  # {"sha", "subject", "pull_request"}
    last_good: Mapping[str, Any] | None = None
    commit_why: str | None = None
    probes: int = 0
    bisect_rerun: str | None = None
    minimized: Mapping[str, Any] | None = None  # {"path", "text", "original", "minimized", "stopped", "runs"}
    minimize_why: str | None = None
    fixes: Mapping[str, str] = dataclasses.field(default_factory=dict)  # fix -> tonight's outcome
    rerun: tuple[str, ...] = ()  # the commands that run it again on tonight's main
    good_end: str = "last night's commit"  # where it did not show, in words (MainPair.good_end)
    back_fix: str = BACK_TO_BASELINE  # the override fix that takes DeepSpeed back there (MainPair.back_fix)

    def to_json(self) -> dict[str, Any]:
        """The finding as ``nightly.json`` carries it."""
        repro, cell, form, fix = self.key
        data = {k: v for k, v in dataclasses.asdict(self).items() if k != "key"}
        return {"repro": repro, "cell": cell, "form": form, "fix": fix, **data, "fixes_passing": self.passing()}

    def passing(self) -> list[str]:
        """The fixes that pass tonight."""
        return [name for name, outcome in self.fixes.items() if outcome == Outcome.PASS.value]


def passing_fixes(records: Sequence[Record], key: Key, cell_of: Mapping[str, str]) -> dict[str, str]:
    """Tonight's outcome of every fix of ``key``'s repro and form (the slice ran them all), ``none`` left out.
    ``cell_of`` maps a record's cell id to its masked id (the key's)."""
    repro, cell, form, _ = key
    found: dict[str, str] = {}
    for r in records:
        if (r.repro, cell_of.get(r.cell["id"]), r.form) == (repro, cell, form) and r.fix != "none":
            found[r.fix] = r.outcome if found.get(r.fix, r.outcome) == r.outcome else "FLAKY"
    return found


def follow_up(
    config: Config,
    pair: MainPair,
    ctx: RunContext,
    finding: Finding,
    target: tuple[str, str | None],
) -> Finding:
    """The commit, the minimized script and the passing fixes of one regression; ``target`` is tonight's outcome
    and signature id. Its runs are this machine's, whatever engine ran the night's slice (``ctx.here()``)."""
    ctx = ctx.here()
    finding = dataclasses.replace(finding, good_end=pair.good_end, back_fix=pair.back_fix)
    finding = _commit(config, pair, ctx, finding, target)
    finding = _minimized(config, pair, ctx, finding)
    back = _back_to_baseline(config, pair, ctx, finding.key)
    return dataclasses.replace(finding, fixes={**finding.fixes, pair.back_fix: back})


def _commit(
    config: Config, pair: MainPair, ctx: RunContext, finding: Finding, target: tuple[str, str | None]
) -> Finding:
    repro, _, form, fix = finding.key
    request = BisectRequest(
        repro=repro,
        axis=AXIS,
        good=pair.good,
        bad=pair.bad,
        backend=pair.backend,
        form=form,
        fix=fix,
        pins=pair.pins,
        git=pair.clone,
        target_outcome=target[0],
        target=target[1],
        timeout=pair.timeout,
        jobs=pair.jobs,
        end_releases=pair.releases,
        confinement=pair.confinement,
    )
    ctx.echo(f"\n== {pair.span.format(f'{repro} {form} {fix}')} ==")
    rerun = _bisect_command(pair, request, repro_source(config, repro, form))
    try:
        result, report, _ = run_bisect(config, request, ctx)
    except BisectInconclusiveError as exc:
        return dataclasses.replace(finding, commit_why=f"the commits do not say: {exc}", bisect_rerun=rerun)
    [step] = result.transitions
    slug = history.github_slug(pair.clone, AXIS)
    return dataclasses.replace(
        finding,
        commit=history.commit_info(pair.clone, step.first, slug).describe(),
        last_good=history.commit_info(pair.clone, step.last, slug).describe(),
        probes=report.probes_made,
        bisect_rerun=rerun,
    )


def repro_source(config: Config, repro_name: str, form_name: str) -> list[str]:
    """The options that name the repro on a command line: ``--script FILE`` for one made from a script (it is not
    in matrix.yaml, so ``--repro`` would not find it), else ``--repro NAME``."""
    repro = config.repros[repro_name]
    if not repro.rerun:
        return ["--repro", repro_name]
    form = next(f for name, f in repro.forms.items() if name == form_name)
    return ["--script", str(form.script)]


def _bisect_command(pair: MainPair, request: BisectRequest, source: Sequence[str]) -> str:
    words = ["reprobisect", "bisect", *source, "--axis", AXIS, "--git", str(pair.clone)]
    words += ["--good", pair.good, "--bad", pair.bad, "--form", str(request.form), "--fix", request.fix]
    words += ["--target-outcome", str(request.target_outcome), "--backend", str(pair.backend)]
    words += ["--signature", request.target] if request.target else []
    words += _pin_options(pair.pins)
    return command_line(words)


def _minimized(config: Config, pair: MainPair, ctx: RunContext, finding: Finding) -> Finding:
    """``minimize`` of the form's script between tonight's cell and last night's, within the budget."""
    repro_name, _, form_name, fix_name = finding.key
    repro = config.repros[repro_name]
    form = next(f for name, f in repro.forms.items() if name == form_name)  # the key's form: the repro has it
    fix = repro.fixes[fix_name]
    if fix.override or fix.patch:
        why = f"fix {fix_name} changes the cell (an override or a patch), which a minimized script cannot carry"
        return dataclasses.replace(finding, minimize_why=why)
    request = MinimizeRequest(
        script=form.script_for(fix),
        bad={AXIS: pair.spec(pair.bad)},
        good={AXIS: pair.spec(pair.good)},
        pins={k: v for k, v in pair.pins.items() if k != AXIS},
        backend=pair.backend,
        form=form_name,
        script_args=(*form.args, *fix.args_for(form_name)),
        env={**form.env, **fix.env},
        shim=form.shim is not None,
        timeout=pair.timeout,
        jobs=pair.jobs,
        budget=Budget(seconds=pair.minimize_budget),
        out=pair.out,
        confinement=pair.confinement,
    )
    # imported here: the reducers (pyflakes, picire) load only when a night has something to minimize
    from reprobisect.minimize.outputs import write_outputs
    from reprobisect.minimize.pipeline import minimize

    ctx.echo(f"\n== minimize {request.script.name} for {repro_name} {form_name} {fix_name} ==")
    try:
        result = minimize(config, request, ctx)
    except NotInterestingError as exc:
        return dataclasses.replace(finding, minimize_why=str(exc))
    write_outputs(result, request, request.script.read_text(encoding="utf-8"))
    minimized = {
        "path": str(result.folder / "minimized.py"),
        "text": result.text,
        "original": str(result.original),
        "minimized": str(result.minimized),
        "stopped": result.stopped,
        "tells_apart": result.verdict.interesting,
        "runs": [f"{run.cell}: {run.said}" for run in result.verdict.runs],
        "rerun": _minimize_command(request, pair.minimize_budget),
    }
    return dataclasses.replace(finding, minimized=minimized)


def _pin_options(pins: Mapping[str, str]) -> list[str]:
    """The slice's pins as command-line options; python and nproc have none (the base interpreter; one rank)."""
    return [f"--{axis}={value}" for axis, value in sorted(pins.items()) if axis not in ("python", "nproc", AXIS)]


def _minimize_command(request: MinimizeRequest, budget: float) -> str:
    """The command that runs this minimization again (its verdicts are kept: it goes on where it stopped)."""
    words = ["reprobisect", "minimize", str(request.script), "--bad", f"{AXIS}=={request.bad[AXIS]}"]
    words += ["--good", f"{AXIS}=={(request.good or {})[AXIS]}", "--form", str(request.form)]
    words += ["--backend", str(request.backend), "--budget", f"{budget:g}"]
    words += _pin_options(request.pins)
    words += ["--", *request.script_args] if request.script_args else []
    return command_line(words)


def _back_to_baseline(config: Config, pair: MainPair, ctx: RunContext, key: Key) -> str:
    """Tonight's cell with DeepSpeed overridden back to last night's commit: its outcome."""
    repro_name, _, form, _ = key
    override = cli_fixes(CliFixes(override=[f"{pair.back_fix}={AXIS}={pair.spec(pair.good)}"]))
    repro = with_fixes(config.repros[repro_name], override)
    config = dataclasses.replace(config, repros={**config.repros, repro_name: repro})
    axes = {axis: (value,) for axis, value in pair.pins.items()} | {AXIS: (pair.spec(pair.bad),)}
    request = MatrixRequest(
        repros=(repro_name,),
        backend=pair.backend,
        axes=axes,
        forms=(form,),
        fixes=(pair.back_fix,),
        timeout=pair.timeout,
        use_includes=False,
        confinement=pair.confinement,
    )
    back = pair.good[:12] if pair.releases is None else pair.releases[0]
    ctx.echo(f"\n== {repro_name} {form} on tonight's cell with DeepSpeed back at {back} ==")
    records = run_matrix(config, request, ctx)
    outcomes = {r.outcome for r in records}
    return outcomes.pop() if len(outcomes) == 1 else ("FLAKY" if outcomes else "ENV_ERROR")
