"""A grid search's answer as a ``GridReport`` (model/grid_report.py; the ``grid-<slug>.json`` written beside the
records, and what the report renders: report/grid_view.py reads this, never the search): the rules with each
region's signatures and the cells run in it, the edges with the cells that prove them, every cell's state, the
assumption and its check, and the candidate fixes over the failing cells run.

An edge is the change of one axis between two neighbouring cells at the other axis's value: the last version on the
passing side and the first on the failing side — what a culprit search along that axis (issue #51 item 3) takes as
its good and bad ends, the other package held at ``at``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from reprobisect.bisect.grid_result import Edge, GridResult, Position
from reprobisect.bisect.rules import Rule, rules_for
from reprobisect.bisect.search import ProbeResult
from reprobisect.model.grid_report import (
    CellAt,
    Contradiction,
    GridCell,
    GridEdge,
    GridRegion,
    GridReport,
    RegionSignature,
)
from reprobisect.model.record import Record

__all__ = ["grid_report", "grid_slug"]


def grid_slug(repro: str, form: str, row_axis: str, col_axis: str) -> str:
    """The result file's name (without ``grid-`` and ``.json``): one per repro, form and pair of axes."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", f"{repro}-{form}-{row_axis}-{col_axis}")[:200]


def _cell(result: GridResult, position: Position) -> CellAt:
    return {result.row_axis: result.rows[position[0]], result.col_axis: result.cols[position[1]]}


def grid_report(
    result: GridResult,
    *,
    repro: str,
    form: str,
    held: Mapping[str, str],
    records: Sequence[Record] = (),
) -> GridReport:
    """The answer; ``records``: the runs of the cells probed, for the candidate fixes."""
    rules = rules_for(result.failing(), len(result.rows), len(result.cols))
    edges = result.edges()
    return GridReport(
        repro=repro,
        form=form,
        cell=dict(held),
        row_axis=result.row_axis,
        col_axis=result.col_axis,
        rows=tuple(result.rows),
        cols=tuple(result.cols),
        cells_run=result.run,
        cells_in_grid=result.size,
        waves=result.waves,
        searched_along=result.searched_along,
        assumption=result.assumption,
        assumption_held=result.assumption_held,
        checked=result.checked,
        fallback=result.fallback,
        contradictions=tuple(
            Contradiction(failing=_cell(result, f), passing=_cell(result, p)) for f, p in result.contradictions
        ),
        regions=tuple(_region(result, rule, edges) for rule in rules),
        edges=tuple(_edge(result, edge) for edge in edges),
        grid=tuple(tuple(_state(result, (r, c)) for c in range(len(result.cols))) for r in range(len(result.rows))),
        fixes=_fixes(result, records),
    )


def _state(result: GridResult, position: Position) -> GridCell:
    cell = result.cells[position]
    probe = cell.result
    return GridCell(
        state=cell.state,
        how=cell.how,
        outcome=None if probe is None else probe.outcome,
        signature_id=None if probe is None else probe.signature_id,
        why=None if probe is None else probe.skipped,
        because=tuple(_cell(result, p) for p in cell.because),
    )


def _region(result: GridResult, rule: Rule, edges: Sequence[Edge]) -> GridRegion:
    """A rule with the signatures of the failing cells run inside it and the edges of its failing cells."""
    inside = [p for p in result.cells if rule.holds(p)]
    run = [p for p in inside if result.cells[p].how == "measured"]
    seen: dict[str, list[ProbeResult]] = {}
    for position in run:
        probe = result.cells[position].result
        assert probe is not None  # a measured cell has its probe
        seen.setdefault(probe.signature_id or "", []).append(probe)
    signatures = [  # the first probe's id and text, the last one's outcome, as the cells were walked
        RegionSignature(
            id=probes[0].signature_id, text=probes[0].signature, cells=len(probes), outcome=probes[-1].outcome
        )
        for probes in seen.values()
    ]
    return GridRegion(
        rule=rule.text(result.row_axis, result.rows, result.col_axis, result.cols),
        clauses=tuple(rule.clauses(result.row_axis, result.rows, result.col_axis, result.cols)),
        rows=(result.rows[rule.row_span[0]], result.rows[rule.row_span[1]]),
        cols=(result.cols[rule.col_span[0]], result.cols[rule.col_span[1]]),
        cells=len(inside),
        cells_run=len(run),
        signatures=tuple(sorted(signatures, key=lambda s: -s.cells)),
        edges_proven=sum(1 for e in edges if e.measured and rule.holds(e.cells[1])),
    )


def _edge(result: GridResult, edge: Edge) -> GridEdge:
    passing, failing = (_cell(result, position) for position in edge.cells)
    return GridEdge(**edge.step_fields(), passing_cell=passing, failing_cell=failing)


def _fixes(result: GridResult, records: Sequence[Record]) -> dict[str, tuple[int, int]]:
    """For each candidate fix, on how many of the failing cells run it passed (every repeat), of those it ran in."""
    failing = {(result.rows[r], result.cols[c]) for (r, c), cell in result.cells.items() if cell.how == "measured"}
    failing = {key for key in failing if result.cells[_position(result, key)].fails}
    runs: dict[str, dict[tuple[str, str], list[str]]] = {}
    for record in records:
        key = _key(result, record)
        if record.fix != "none" and key in failing:
            runs.setdefault(record.fix, {}).setdefault(key, []).append(record.outcome)
    return {
        fix: (sum(all(o == "PASS" for o in outcomes) for outcomes in by_cell.values()), len(by_cell))
        for fix, by_cell in sorted(runs.items())
    }


def _position(result: GridResult, key: tuple[str, str]) -> Position:
    return result.rows.index(key[0]), result.cols.index(key[1])


def _key(result: GridResult, record: Record) -> tuple[str, str] | None:
    """The (row, column) values of a record's cell, read from its packages (python from the cell itself)."""
    packages = record.cell.get("packages", {})
    values = []
    for axis in (result.row_axis, result.col_axis):
        value = packages.get(axis, record.cell.get(axis))
        if value is None:
            return None
        values.append(str(value))
    return values[0], values[1]
