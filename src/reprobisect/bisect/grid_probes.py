"""A grid search's probes as matrix runs: each wave of cells is one ``run_matrix`` call over those cells, so its
records are stored as any run's are and a second triage reuses every one.

The grid is read off the plan of the matrix the command line asks for (planning builds nothing): when exactly two
axes vary (two package ranges, or a package and python), their values are the grid's rows and columns and each
planned cell one of its cells. Which form and fix a cell's state is read from: the form searched, fix ``none``;
candidate fixes run beside it in every cell probed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from packaging.version import InvalidVersion, Version

from reprobisect.bisect.probes import probe_result
from reprobisect.bisect.search import ProbeResult
from reprobisect.config.expand import RANKS_AXIS
from reprobisect.config.load import Config
from reprobisect.model.record import Record
from reprobisect.run.context import RunContext
from reprobisect.run.matrix_plan import named_cell, plan_matrix
from reprobisect.run.matrix_request import MatrixRequest
from reprobisect.run.matrix_run import run_matrix

__all__ = ["GridPlan", "GridProbes", "grid_plan"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class GridPlan:
    """The grid a request's matrix is: its two varying axes (rows: the one with more values), each pair of values'
    cell id, the forms its repro runs in, and the pins of every other axis."""

    repro: str
    row_axis: str
    rows: tuple[str, ...]
    col_axis: str
    cols: tuple[str, ...]
    cells: Mapping[tuple[str, str], str]
    forms: tuple[str, ...]
    held: Mapping[str, str]

    @property
    def size(self) -> int:
        return len(self.rows) * len(self.cols)


def _order(value: str) -> tuple[int, Version | str]:
    try:
        return (0, Version(value))
    except InvalidVersion:
        return (1, value)


def grid_plan(config: Config, request: MatrixRequest, ctx: RunContext) -> GridPlan | None:
    """The grid of the request's matrix when it is one: one repro, exactly two axes varying (not ``nproc``), one
    cell per pair of their values; else None (the matrix is run whole, as before)."""
    if len(request.repros) != 1:
        return None
    plan = plan_matrix(config, request, ctx)
    pins = [cell.pins for cell in plan.cells]
    axes = sorted({axis for p in pins for axis in p})
    varying = [axis for axis in axes if len({p.get(axis) for p in pins}) > 1]
    if len(varying) != 2 or RANKS_AXIS in varying or any(axis not in p for p in pins for axis in varying):
        return None
    values = {axis: tuple(sorted({p[axis] for p in pins}, key=_order)) for axis in varying}
    row_axis, col_axis = sorted(varying, key=lambda axis: (-len(values[axis]), axis))
    cells: dict[tuple[str, str], str] = {}
    for planned in plan.cells:
        key = (planned.pins[row_axis], planned.pins[col_axis])
        if key in cells:
            return None  # two cells for one pair of values: not a grid
        cells[key] = named_cell(planned, ctx.base).id
    units = [*plan.units, *(unit for blocked in plan.blocked for unit in blocked.units)]
    held = {axis: str(pins[0][axis]) for axis in axes if axis not in varying}
    return GridPlan(
        repro=request.repros[0],
        row_axis=row_axis,
        rows=values[row_axis],
        col_axis=col_axis,
        cols=values[col_axis],
        cells=cells,
        forms=tuple(sorted({unit.form.name for unit in units})),
        held=held,
    )


@dataclasses.dataclass(kw_only=True)
class GridProbes:
    """The probe of one form's grid search: a wave of cells is one matrix run over those cells (every other option
    as the request has it); every record it returned is kept (``records``) for the summary."""

    config: Config
    request: MatrixRequest
    ctx: RunContext
    plan: GridPlan
    form: str
    records: list[Record] = dataclasses.field(default_factory=list)

    def __call__(self, cells: Sequence[tuple[str, str]]) -> list[ProbeResult]:
        ids = [self.plan.cells[cell] for cell in cells if cell in self.plan.cells]
        request = dataclasses.replace(self.request, forms=(self.form,))
        found = run_matrix(self.config, request, self.ctx.quiet(), cells=ids) if ids else []
        self.records += found
        return [self._result(cell, found) for cell in cells]

    def _result(self, cell: tuple[str, str], found: Sequence[Record]) -> ProbeResult:
        name = f"{self.plan.row_axis} {cell[0]}, {self.plan.col_axis} {cell[1]}"
        cell_id = self.plan.cells.get(cell)
        if cell_id is None:
            return ProbeResult(version=name, outcome="ENV_ERROR", signature="not a cell of the matrix (excluded)")
        mine = [
            r
            for r in found
            if (r.repro, r.form, r.fix) == (self.plan.repro, self.form, "none")
            and str(r.cell.get("id", "")).partition("_nproc-")[0] == cell_id
        ]
        return probe_result(name, mine)
