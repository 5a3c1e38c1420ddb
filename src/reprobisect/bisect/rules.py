"""A grid's failing cells as rules a person can read and act on: "fails where lightning < 2.4.0 and deepspeed ≥
0.14.1". Pure.

A rule is a rectangle of the grid, said per axis in the versions present: ``< v`` where it stops before ``v`` (the
first version past it), ``≥ v`` where it starts at ``v``, both where it does neither, ``= v`` for one version in
the middle, and no clause for an axis it spans whole (a span touching an end of its axis is always said open). The
rules together cover exactly the failing cells, never a cell that is not one (a passing, skipped or not-run cell
lies in no rule), so a reader can check each rule against the grid:

* a staircase (failures monotone along each axis) becomes one rule per step, each open towards the failing corner
  ("fails where lightning < 2.4.0 and deepspeed ≥ 0.14.1, or where lightning < 2.2.0 and deepspeed ≥ 0.13.0"):
  the rules overlap, and their union is the region;
* any other shape becomes a cover by maximal rectangles, grown from the first cell not yet covered.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Collection, Sequence

__all__ = ["Rule", "rules_for", "staircase_orientation"]

Position = tuple[int, int]
_ORIENTATIONS = ((1, 1), (1, -1), (-1, 1), (-1, -1))


@dataclasses.dataclass(frozen=True, kw_only=True)
class Rule:
    """The rectangle ``rows[row_span[0]..row_span[1]]`` × ``cols[col_span[0]..col_span[1]]`` (inclusive)."""

    row_span: tuple[int, int]
    col_span: tuple[int, int]

    def holds(self, position: Position) -> bool:
        """Whether the rule says this cell fails."""
        row, col = position
        return self.row_span[0] <= row <= self.row_span[1] and self.col_span[0] <= col <= self.col_span[1]

    def clauses(self, row_axis: str, rows: Sequence[str], col_axis: str, cols: Sequence[str]) -> list[str]:
        """The rule's conditions, one per axis it does not span whole."""
        found = [_clause(row_axis, rows, self.row_span), _clause(col_axis, cols, self.col_span)]
        return [c for c in found if c]

    def text(self, row_axis: str, rows: Sequence[str], col_axis: str, cols: Sequence[str]) -> str:
        """``fails where lightning < 2.4.0 and deepspeed ≥ 0.14.1``."""
        clauses = self.clauses(row_axis, rows, col_axis, cols)
        return "fails where " + " and ".join(clauses) if clauses else "fails everywhere in the grid"


def _clause(axis: str, versions: Sequence[str], span: tuple[int, int]) -> str | None:
    low, high = span
    last = len(versions) - 1
    if low == 0 and high == last:
        return None
    if low == 0:
        return f"{axis} < {versions[high + 1]}"
    if high == last:
        return f"{axis} ≥ {versions[low]}"
    if low == high:
        return f"{axis} = {versions[low]}"
    return f"{versions[low]} ≤ {axis} < {versions[high + 1]}"


def _beyond(orientation: tuple[int, int], low: Position, high: Position) -> bool:
    row_sign, col_sign = orientation
    return row_sign * (high[0] - low[0]) >= 0 and col_sign * (high[1] - low[1]) >= 0


def staircase_orientation(failing: Collection[Position], rows: int, cols: int) -> tuple[int, int] | None:
    """An orientation in which every cell beyond a failing cell fails (the region is a staircase), or None."""
    every = list(itertools.product(range(rows), range(cols)))
    for orientation in _ORIENTATIONS:
        if all(q in failing for f in failing for q in every if _beyond(orientation, f, q)):
            return orientation
    return None


def rules_for(failing: Collection[Position], rows: int, cols: int) -> list[Rule]:
    """Rules covering exactly ``failing`` in a grid of ``rows`` × ``cols``: one per step of a staircase, else a
    cover by maximal rectangles; none when nothing fails."""
    cells = set(failing)
    if not cells:
        return []
    orientation = staircase_orientation(cells, rows, cols)
    if orientation is not None:
        return _steps(cells, orientation, rows, cols)
    return _cover(cells)


def _steps(cells: set[Position], orientation: tuple[int, int], rows: int, cols: int) -> list[Rule]:
    """One rule per corner of the staircase: each failing cell with no other failing cell on its passing side,
    opened towards the failing corner."""
    corners = [f for f in sorted(cells) if not any(g != f and _beyond(orientation, g, f) for g in cells)]
    row_sign, col_sign = orientation
    return [
        Rule(
            row_span=(row, rows - 1) if row_sign > 0 else (0, row),
            col_span=(col, cols - 1) if col_sign > 0 else (0, col),
        )
        for row, col in corners
    ]


def _cover(cells: set[Position]) -> list[Rule]:
    """Maximal rectangles of failing cells, each grown from the first cell (row by row) no rule covers yet: along its
    row both ways, then row by row up and down while the whole span fails."""
    rules: list[Rule] = []
    uncovered = set(cells)
    while uncovered:
        row, col = min(uncovered)
        left, right = col, col
        while (row, left - 1) in cells:
            left -= 1
        while (row, right + 1) in cells:
            right += 1
        top, bottom = row, row
        while all((top - 1, c) in cells for c in range(left, right + 1)):
            top -= 1
        while all((bottom + 1, c) in cells for c in range(left, right + 1)):
            bottom += 1
        rule = Rule(row_span=(top, bottom), col_span=(left, right))
        rules.append(rule)
        uncovered -= {p for p in uncovered if rule.holds(p)}
    return rules
