"""A matrix run, start to end: plan (``run.matrix_plan``) → build (``run.matrix_build``) → run (``run.matrix_units``).

Identical units already on record are reused unless ``fresh`` is asked for, so a second run, a bisection over
the same releases or a resumed run repeats nothing. Every caller — ``matrix``, one repro's cell, a bisection's
probes, a night — comes through ``run_matrix``; the phases it strings together know nothing of each other's
insides.
"""

from __future__ import annotations

from collections.abc import Sequence

from reprobisect.config.load import Config
from reprobisect.model.record import Record
from reprobisect.run.context import RunContext
from reprobisect.run.matrix_build import bound_op_cache, prepare_units, unbuilt_records
from reprobisect.run.matrix_plan import MatrixPlan, plan_matrix
from reprobisect.run.matrix_request import MatrixRequest, RunStats
from reprobisect.run.matrix_units import run_units
from reprobisect.util.console import plural
from reprobisect.util.echo import Echo

__all__ = ["run_matrix"]


def run_matrix(
    config: Config,
    request: MatrixRequest,
    ctx: RunContext,
    *,
    cells: Sequence[str] = (),
    stats: RunStats | None = None,
) -> list[Record]:
    """Plan, build, run; returns one record per unit (stored ones included): first those that could not run,
    then the runs in the plan's order. ``cells`` keeps only the cells with these ids.

    With ``ctx.executor`` set, the engine takes the whole call (run/context.py): each of its workers comes back
    here for one cell with a context whose ``executor`` is None."""
    if ctx.executor is not None:
        return ctx.executor.run_matrix(config, request, ctx.here(), cells=cells, stats=stats)
    bound_op_cache(ctx)
    plan = plan_matrix(config, request, ctx, cells=cells)
    sandbox = request.confinement.open()  # no sandbox here stops the run before anything is built
    _announce(plan, request, ctx.echo)
    prepared = prepare_units(plan.units, ctx, jobs=request.jobs, sandbox=sandbox)
    # Bad input has had its chance to stop the run: from here on records are written.
    records = unbuilt_records(plan, prepared, ctx.store)
    runnable = [unit for unit in plan.units if prepared.why_not(unit) is None]
    stats = stats if stats is not None else RunStats()
    return records + run_units(runnable, prepared, request, ctx, backend=plan.backend, stats=stats)


def _announce(plan: MatrixPlan, request: MatrixRequest, echo: Echo) -> None:
    """The plan in a line, then each cell that will get records but no run, with its reason."""
    echo(
        f"{plural(len(plan.cells), 'cell')} ({len(plan.blocked)} not installable or not buildable here), "
        f"{plural(len(plan.units), 'run')}, backend {plan.backend}, {request.jobs} at a time"
    )
    for blocked in plan.blocked:
        echo(f"  - {blocked.cell.id}: {blocked.reason}")
