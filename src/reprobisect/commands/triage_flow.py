"""The work of ``triage``, below the command: run the script across the cells its pins name, answer (the affected
ranges, a grid's rule, the commits behind each change, a timing search), print it and write it into the summary.

``commands/triage.py`` runs it for a maintainer; ``commands/corpus.py`` runs it on every corpus entry and scores
what it returns (``Triaged``), so that no command imports another.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path

from reprobisect.bisect import history
from reprobisect.bisect.answer import Answer, answer_markdown, sweep_answers
from reprobisect.bisect.culprits import find_culprits
from reprobisect.bisect.edge_culprits import EdgeSearch, GridClones, edge_culprits, refuse_clones
from reprobisect.bisect.grid import grid_search
from reprobisect.bisect.grid_answer import grid_report, grid_slug
from reprobisect.bisect.grid_probes import GridPlan, GridProbes, grid_plan
from reprobisect.bisect.probes import BisectRequest, run_bisect, timing_jobs, transition_entry
from reprobisect.bisect.slowdown_answer import slowdown_markdown
from reprobisect.commands.options import prepare, run_context
from reprobisect.commands.output import run_and_summarize, summarize_runs
from reprobisect.commands.run_options import axis_values, matrix_request
from reprobisect.commands.script_options import source_options, with_script
from reprobisect.commands.timing_options import refuse_beside_others, timing_rule
from reprobisect.commands.triage_options import TriageOptions
from reprobisect.config.load import Config, load_config
from reprobisect.errors import BisectInconclusiveError, ConfigError
from reprobisect.minimize.sections import sections_under
from reprobisect.model.bisect_report import BisectReport, TransitionEntry, write_bisect_report
from reprobisect.model.culprit import Culprit
from reprobisect.model.grid_report import GridReport, write_grid_report
from reprobisect.model.record import Record
from reprobisect.model.slowdown import SlowdownRule
from reprobisect.report.grid_view import grid_markdown, grid_terminal
from reprobisect.run.context import RunContext
from reprobisect.run.matrix_request import MatrixRequest
from reprobisect.util.files import write_atomic
from reprobisect.util.invocation import rerun_head

__all__ = ["Triaged", "triage_answers"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class Triaged:
    """What one triage answered: each form's outcome answer with the commits behind its changes, and with
    ``--slower-than`` each form's timing search (its report, or None when it could not start) with its commits."""

    answers: list[tuple[Answer, list[Culprit]]]
    timed: list[tuple[Answer, BisectReport | None, list[Culprit]]]
    grids: list[GridReport] = dataclasses.field(default_factory=list)  # two ranges: each form's grid answer


def triage_answers(options: TriageOptions, *, rerun: str) -> Triaged:
    """The work of ``triage``: run, print and write the summary with the answer sections; return each answer with
    the commits found behind its changes (``corpus`` scores them; ``rerun`` is the command that re-runs it)."""
    common, script = options.common, options.script
    prepare(common)
    config = load_config(common.config)
    if script.script is None and not script.pytest:
        msg = "triage needs a script (reprobisect triage issue.py) or --pytest PATH[::TEST]"
        raise ConfigError(msg)
    rule = timing_rule(options.timing)
    if rule is not None:
        refuse_beside_others(options.run.jobs, options.run.repeat, options.run.backend)
    config, made = with_script(
        config, script, timeout=options.run.timeout, repros=(), rerun=tuple(rerun_head("triage", ["triage"]))
    )
    base_axes = {axis: axis_values(value) for axis, value in config.default_cell.items()}
    ctx = run_context(common, options.run.engine.engine())
    if rule is not None and options.run.jobs > 1:  # the sweep runs as the timing search that reuses its records will
        run = dataclasses.replace(options.run, jobs=timing_jobs(options.run.jobs, options.run.backend, ctx))
        options = dataclasses.replace(options, run=run)
    request = matrix_request(options.run, common, made, base_axes=base_axes)
    title = config.repro(made[0]).title if len(made) == 1 else f"{len(made)} test selections"
    varying = _varying(request)
    plan = None if options.full_grid or len(varying) < 2 else grid_plan(config, request, ctx)
    axes = varying if plan is None else [plan.row_axis, plan.col_axis]
    refuse_clones(options.git, options.git_for, varying=axes, grid=plan is not None)
    grids: list[tuple[GridReport, Path]] = []
    if plan is not None:
        _refuse_beside_a_grid(rule)
        records, grids = _grid_answers(config, request, ctx, plan, options)
        summary = summarize_runs(records, ctx, common.out, title=title, summary=f"summary-{made[0]}.md", command=rerun)
    else:
        records, summary = run_and_summarize(
            config, request, ctx, common.out, title=title, summary=f"summary-{made[0]}.md", command=rerun
        )
    found = [(answer, _culprits(config, answer, options, ctx)) for answer in sweep_answers(records)]
    hint = "" if options.git is not None or options.git_for or options.culprits else _HINT
    sections = [grid_markdown(report, name=path.name, rerun=rerun) for report, path in grids]
    sections += [answer_markdown(a, c, rerun=rerun, culprit_hint=hint) for a, c in found]
    timed = [(a, *_timed(config, a, rule, options, ctx, (hint, rerun))) for a, _ in found] if rule is not None else []
    sections += [section for _, section, _, _ in timed]
    sections += sections_under([common.out], names=made)  # a minimization of this script, made before
    if sections:
        text = "\n".join(sections)
        print("\n" + "\n".join(sections[len(grids) :]))  # a grid's answer is printed in plain words, below
        write_atomic(summary, summary.read_text(encoding="utf-8") + "\n" + text, what="the summary")
    for report, _ in grids:
        print("\n" + "\n".join(grid_terminal(report)))
    return Triaged(
        answers=found,
        timed=[(a, report, culprits) for a, _, report, culprits in timed],
        grids=[report for report, _ in grids],
    )


def _varying(request: MatrixRequest) -> list[str]:
    """The axes asked several values (a list, a range, a glob): with two, the matrix may be a grid, and only then is
    it planned once more to see (planning asks the index, and may ask torch for CUDA)."""
    return [
        axis
        for axis, values in request.axes.items()
        if len(values) > 1 or any(v.startswith(("<", ">", "=", "!", "~")) or "*" in v for v in values)
    ]


def _refuse_beside_a_grid(rule: SlowdownRule | None) -> None:
    """What a grid search does not answer yet, refused before anything runs."""
    if rule is not None:
        msg = "--slower-than times one package's releases; with ranges on two packages give one range or --full-grid"
        raise ConfigError(msg)


def _grid_answers(
    config: Config, request: MatrixRequest, ctx: RunContext, plan: GridPlan, options: TriageOptions
) -> tuple[list[Record], list[tuple[GridReport, Path]]]:
    """Each form's grid search (bisect/grid.py), with the commit behind each edge where clones are given or asked
    for (bisect/edge_culprits.py), its answer written as ``grid-<slug>.json`` beside the records; returns every
    record its waves made or reused, and each answer with its path."""
    records: list[Record] = []
    answers = []
    for form in plan.forms:
        probes = GridProbes(config=config, request=request, ctx=ctx, plan=plan, form=form)
        ctx.echo(
            f"Searching the {len(plan.rows)} × {len(plan.cols)} grid of {plan.row_axis} × {plan.col_axis} for where "
            f"{plan.repro} ({form}) fails, instead of running all {plan.size} cells (--full-grid runs them all)"
        )
        result = grid_search(plan.row_axis, plan.rows, plan.col_axis, plan.cols, probes, log=ctx.echo)
        report = grid_report(result, repro=plan.repro, form=form, held=plan.held, records=probes.records)
        path = ctx.store.root / f"grid-{grid_slug(plan.repro, form, plan.row_axis, plan.col_axis)}.json"
        write_grid_report(path, report)
        search = _edge_search(config, plan, form, probes, options, ctx)
        if search.clones.asked:  # the grid's answer is written first: the commit searches take longer than it
            report = report.with_culprits(edge_culprits(search, report))
            write_grid_report(path, report)
        records += probes.records
        answers.append((report, path))
    return records, answers


_HINT = "the commit: add --git CLONE (a clone of the package's repository) or --culprits"


def _edge_search(
    config: Config, plan: GridPlan, form: str, probes: GridProbes, options: TriageOptions, ctx: RunContext
) -> EdgeSearch:
    """What the commit searches behind one form's grid edges start from: the grid's repro, form and held pins."""
    clones = GridClones(named=options.git_for, harness=options.culprits, clones_dir=options.common.envs / "clones")
    # each edge's search sets its axis, its two releases and the other axis's pin
    request = _search_request(options, plan.repro, form, plan.row_axis, (plan.rows[0], plan.rows[-1]), plan.held)
    source = source_options(None, options.script, options.common)
    return EdgeSearch(config=config, request=request, ctx=ctx, clones=clones, measure=probes, source=source)


def _culprits(config: Config, answer: Answer, options: TriageOptions, ctx: RunContext) -> list[Culprit]:
    """The commit behind each change of one form's answer, when a clone is given or asked for; its searches run
    where the sweep ran (``ctx``)."""
    transitions = [transition_entry(t) for t in answer.transitions]
    return _commits_behind(config, _answer_request(answer, options), transitions, options, ctx)


def _commits_behind(
    config: Config,
    request: BisectRequest,
    transitions: Sequence[TransitionEntry],
    options: TriageOptions,
    ctx: RunContext,
) -> list[Culprit]:
    """The commit behind each release transition of a search over the releases (``request``'s), when a clone is
    given or asked for."""
    if (options.git is None and request.axis not in options.git_for and not options.culprits) or not transitions:
        return []
    clone = options.git or options.git_for.get(request.axis)
    if clone is None:
        clone = history.clone_known(request.axis, options.common.envs / "clones")
    return find_culprits(
        config,
        request,
        transitions,
        clone=clone,
        ctx=ctx,
        form=str(request.form),
        source=source_options(None, options.script, options.common),
    )


def _answer_request(answer: Answer, options: TriageOptions) -> BisectRequest:
    """The search over one form's releases, as ``bisect`` would make it."""
    ends = (answer.releases[0], answer.releases[-1])
    return _search_request(options, answer.repro, answer.form, answer.axis, ends, answer.pins)


def _search_request(
    options: TriageOptions, repro: str, form: str, axis: str, ends: tuple[str, str], pins: Mapping[str, str]
) -> BisectRequest:
    """A search from triage's options: its backend, repeats, timeout, sandbox and jobs, the rest as given."""
    return BisectRequest(
        repro=repro,
        form=form,
        axis=axis,
        good=ends[0],
        bad=ends[1],
        backend=options.run.backend,
        pins=dict(pins),
        repeat=options.run.repeat,
        timeout=options.run.timeout,
        confinement=options.common.confinement,
        jobs=options.run.jobs,
        requires=dict(options.run.requires),
    )


def _timed(
    config: Config,
    answer: Answer,
    rule: SlowdownRule,
    options: TriageOptions,
    ctx: RunContext,
    words: tuple[str, str],
) -> tuple[str, BisectReport | None, list[Culprit]]:
    """A timing search over every release of one form's answer against the first, its culprits, as a section
    (``words``: the hint where no clone was given, the command that re-runs the triage); with its report (None
    when the search could not start) and culprits."""
    request = dataclasses.replace(
        _answer_request(answer, options),
        all_transitions=True,
        probe_all_up_to=len(answer.releases),
        slowdown=rule,
    )
    try:
        _, report, path = run_bisect(config, request, ctx)
    except BisectInconclusiveError as exc:  # the first release cannot be timed: say so in the answer
        return f"### Slower: {answer.repro} ({answer.form}) across {answer.axis}\n\nNot measured: {exc}\n", None, []
    culprits = _commits_behind(config, request, report.transitions, options, ctx)
    if culprits:
        report = report.with_culprits(culprits)
        write_bisect_report(path, report)
    return slowdown_markdown(report, culprits, name=path.name, hint=words[0], rerun=words[1]), report, culprits
