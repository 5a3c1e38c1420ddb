"""What a grid search answers (``bisect/grid.py``): each cell's state, the edges of the failing region, the
assumption and whether the cells run bore it out. Plain data: ``grid_answer`` turns it into the rules and the
picture, and a culprit search per edge (issue #51, item 3) starts from an ``Edge``."""

from __future__ import annotations

import dataclasses
from typing import Literal

from reprobisect.bisect.search import ProbeResult
from reprobisect.model.grid_report import EdgeStep

__all__ = ["FAILING_OUTCOMES", "CellState", "Edge", "GridResult", "Position"]

FAILING_OUTCOMES = ("REPRODUCED", "OTHER_FAILURE", "CRASH")
Position = tuple[int, int]  # (row index, column index)


@dataclasses.dataclass(frozen=True, kw_only=True)
class CellState:
    """One cell: what its probe said (``measured``), or what the cells run imply (``inferred``, with ``because``:
    the cells run that imply it), ``skipped`` (its probe said nothing; ``why``), or ``not run``."""

    state: Literal["fails", "passes", "skipped", "not run"]
    how: Literal["measured", "inferred", "skipped", "not run"]
    result: ProbeResult | None = None
    because: tuple[Position, ...] = ()

    @property
    def fails(self) -> bool:
        return self.state == "fails"


@dataclasses.dataclass(frozen=True, kw_only=True)
class Edge(EdgeStep):
    """A step of the boundary between two neighbouring cells, one passing and one failing: along ``axis``, at the
    other axis's ``at`` value, from ``passing`` (the last version on the passing side) to ``failing`` (the first on
    the failing side). ``measured``: both cells ran (the edge is proven by them, not inferred). The commits behind
    an edge (issue #51 item 3) are those of ``axis`` between ``passing`` and ``failing`` with the other axis at
    ``at``."""

    cells: tuple[Position, Position]  # (the passing cell, the failing cell)


@dataclasses.dataclass(frozen=True, kw_only=True)
class GridResult:
    """A grid search's answer: every cell's state, the order cells were probed in, the waves, and the
    assumption with whether the cells run bore it out."""

    row_axis: str
    col_axis: str
    rows: tuple[str, ...]
    cols: tuple[str, ...]
    cells: dict[Position, CellState]
    probed: tuple[Position, ...]  # in the order probed
    waves: int
    assumption: str
    assumption_held: bool
    checked: str  # what was checked, on how many cells, and what contradicted it
    contradictions: tuple[tuple[Position, Position], ...]  # (a failing cell run, a passing cell run beyond it)
    fallback: str | None  # what was probed because the assumption broke, or None
    searched_along: str  # the axis whose boundary each row's binary search looked for

    @property
    def run(self) -> int:
        return len(self.probed)

    @property
    def size(self) -> int:
        return len(self.rows) * len(self.cols)

    def failing(self) -> set[Position]:
        """The cells that fail, measured or inferred."""
        return {p for p, cell in self.cells.items() if cell.fails}

    def label(self, position: Position) -> str:
        """``lightning 2.3.0, deepspeed 0.14.1``."""
        row, col = position
        return f"{self.row_axis} {self.rows[row]}, {self.col_axis} {self.cols[col]}"

    def edges(self) -> list[Edge]:
        """Every step of the boundary between neighbours whose states are known (measured or inferred)."""
        found = []
        for (row, col), cell in sorted(self.cells.items()):
            for other, axis in (((row + 1, col), "row"), ((row, col + 1), "col")):
                neighbour = self.cells.get(other)
                if neighbour is None or {cell.state, neighbour.state} != {"fails", "passes"}:
                    continue
                good, bad = ((row, col), other) if neighbour.fails else (other, (row, col))
                found.append(self._edge(good, bad, along_rows=axis == "row"))
        return found

    def _edge(self, good: Position, bad: Position, *, along_rows: bool) -> Edge:
        measured = self.cells[good].how == "measured" and self.cells[bad].how == "measured"
        if along_rows:
            axis, at_axis, at = self.row_axis, self.col_axis, self.cols[good[1]]
            passing, failing = self.rows[good[0]], self.rows[bad[0]]
        else:
            axis, at_axis, at = self.col_axis, self.row_axis, self.rows[good[0]]
            passing, failing = self.cols[good[1]], self.cols[bad[1]]
        return Edge(
            axis=axis, at_axis=at_axis, at=at, passing=passing, failing=failing, measured=measured, cells=(good, bad)
        )
