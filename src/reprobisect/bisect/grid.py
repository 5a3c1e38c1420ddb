"""Search two ordered version lists at once for the region where a repro fails. Pure: the probe is injected.

A bug may live between packages: Fabric's DeepSpeed ``load_checkpoint`` imported a class DeepSpeed 0.14.1
removed, so it fails where deepspeed ≥ 0.14.1 *and* Lightning predates the fix; each package alone is fine. The
grid (rows: one package's releases, columns: the other's) is not run whole: its failing region's boundary is
found with as few cells as the region's shape allows.

**What is assumed**: the failing region is monotone along each axis — a staircase. In each row the failing cells
form one interval touching the same end (the same for every row), and the boundary moves one way from row to row;
equivalently, there is an orientation of the two axes in which every cell beyond a failing cell (in both axes)
fails too. Under it:

1. the four corners are probed together (one wave); they tell along which axis and at which end failures lie
   (the longer axis is searched along when both tell; when all four agree the centre cell is probed as a check);
2. the first and last row (along the searched axis) get a binary search for their boundary, then the middle row of
   every pair of rows done, bounded by those two rows' boundaries (the staircase: a row's boundary lies between
   its neighbours'; rows between two with the same boundary are not probed at all); every row open at once
   advances one probe per wave, the wave's cells probed together;
3. **checked**: the cells run must fit the assumption — some orientation in which no failing cell run lies on the
   passing side of a passing cell run. Every other cell is then *inferred* only where every such orientation
   implies it, naming the cell run that implies it; a cell no probe implies is probed (a wave), so nothing is
   guessed;
4. where a cell run contradicts the assumption, it is said (the pair of cells), and the search falls back: every
   cell of a grid of at most ``PROBE_ALL_UP_TO`` cells, else every row and column through the contradicting cells;
   nothing is inferred then — a cell not run is ``not run``.

Cells whose probe says nothing (ENV_ERROR, TIMEOUT, flaky: ``ProbeResult.skipped``) are named as skipped, like
git bisect's 125; they are never read as passing or failing, and a row search moves to a neighbour past them.

A cell fails when its outcome is a failure (REPRODUCED, OTHER_FAILURE, CRASH); its signature travels with it, so
the regions (bisect/rules.py) say which failure each holds.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Sequence
from typing import Literal

from reprobisect.bisect.grid_result import FAILING_OUTCOMES, CellState, Edge, GridResult, Position
from reprobisect.bisect.search import PROBE_ALL_UP_TO, ProbeResult
from reprobisect.errors import BisectInconclusiveError

__all__ = [
    "FAILING_OUTCOMES",
    "CellState",
    "Edge",
    "GridResult",
    "Position",
    "grid_search",
]

Probe = Callable[[Sequence[tuple[str, str]]], Sequence[ProbeResult]]
_ORIENTATIONS = ((1, 1), (1, -1), (-1, 1), (-1, -1))  # (row sign, column sign): failures lie towards the sign


def _fails(result: ProbeResult) -> bool:
    return result.outcome in FAILING_OUTCOMES


@dataclasses.dataclass(frozen=True)
class _Frame:
    """Where the row searches look: ``transpose`` (they walk the grid's rows, i.e. search along the row axis) and
    ``flip`` (failures at the low end of the searched axis). Normalised, failures lie at the high inner index."""

    transpose: bool
    flip: bool
    outer: int  # rows searched (normalised)
    inner: int  # cells per searched row

    def real(self, outer: int, inner: int) -> Position:
        inner = self.inner - 1 - inner if self.flip else inner
        return (inner, outer) if self.transpose else (outer, inner)


class _Grid:
    """The probes made so far, memoized, with the probe function that makes more (a wave at a time)."""

    def __init__(self, rows: Sequence[str], cols: Sequence[str], probe: Probe, log: Callable[[str], None]) -> None:
        self.rows, self.cols = list(rows), list(cols)
        self._probe = probe
        self.log = log
        self.results: dict[Position, ProbeResult] = {}
        self.order: list[Position] = []
        self.waves = 0

    def wave(self, positions: Sequence[Position]) -> None:
        """Probe the positions not probed yet, together."""
        wanted = [p for p in dict.fromkeys(positions) if p not in self.results]
        if not wanted:
            return
        found = self._probe([(self.rows[r], self.cols[c]) for r, c in wanted])
        if len(found) != len(wanted):
            msg = f"the grid's probe answered {len(found)} cells for {len(wanted)} asked"
            raise BisectInconclusiveError(msg)
        self.waves += 1
        for position, result in zip(wanted, found, strict=True):
            self.results[position] = result
            self.order.append(position)
        self.log(f"wave {self.waves}: {len(wanted)} cells, {len(self.order)} run of {len(self.rows) * len(self.cols)}")

    def state(self, position: Position) -> bool | None:
        """True fails, False passes, None not probed or skipped."""
        result = self.results.get(position)
        if result is None or result.skipped:
            return None
        return _fails(result)

    def measured(self) -> tuple[list[Position], list[Position]]:
        """The failing and the passing cells run (skipped ones are neither)."""
        failing = [p for p in self.order if self.state(p) is True]
        passing = [p for p in self.order if self.state(p) is False]
        return failing, passing


@dataclasses.dataclass
class _RowSearch:
    """One row's binary search for its boundary ``b`` (normalised: the row fails from ``b`` on), known to lie in
    ``[lo, hi]``; a row that fails nowhere has ``b`` = the row's length."""

    outer: int
    lo: int
    hi: int

    def tighten(self, grid: _Grid, frame: _Frame) -> None:
        """Narrow the bounds with the row's cells already run (the corners, a cell run by an earlier search)."""
        for inner in range(frame.inner):
            state = grid.state(frame.real(self.outer, inner))
            if state is True and inner < self.hi:
                self.hi = max(inner, self.lo)
            elif state is False and inner >= self.lo:
                self.lo = min(inner + 1, self.hi)

    def advance(self, grid: _Grid, frame: _Frame) -> Position | None:
        """The cell to probe next, or None when the search is done (exactly, or with only skipped cells left in
        its bounds): a skipped cell is stepped past to its usable neighbour nearest the middle, as git bisect's
        125 is."""
        while self.lo < self.hi:
            middle = (self.lo + self.hi) // 2
            candidates = sorted(range(self.lo, self.hi), key=lambda i: (abs(i - middle), i))
            usable = [i for i in candidates if not _skipped(grid, frame.real(self.outer, i))]
            if not usable:
                return None
            position = frame.real(self.outer, usable[0])
            state = grid.state(position)
            if position not in grid.results:
                return position
            if state:
                self.hi = usable[0]
            else:
                self.lo = usable[0] + 1
        return None


def _skipped(grid: _Grid, position: Position) -> bool:
    result = grid.results.get(position)
    return result is not None and result.skipped is not None


def _frame(grid: _Grid) -> _Frame:
    """Along which axis the row searches look, and at which end failures lie, as the corners tell: a row whose two
    ends differ tells the columns' end, a column whose ends differ the rows'; the longer axis is searched along when
    both tell (its binary searches save the most)."""
    rows, cols = len(grid.rows), len(grid.cols)
    col_signs = _signs(grid, [((r, 0), (r, cols - 1)) for r in (0, rows - 1)])
    row_signs = _signs(grid, [((0, c), (rows - 1, c)) for c in (0, cols - 1)])
    along_rows = len(row_signs) == 1 and (len(col_signs) != 1 or rows > cols)
    if along_rows:
        return _Frame(transpose=True, flip=row_signs == {-1}, outer=cols, inner=rows)
    return _Frame(transpose=False, flip=col_signs == {-1}, outer=rows, inner=cols)


def _signs(grid: _Grid, pairs: Sequence[tuple[Position, Position]]) -> set[int]:
    """+1 where a pair's high end fails and its low end passes, -1 the other way round."""
    signs = set()
    for low, high in pairs:
        low_state, high_state = grid.state(low), grid.state(high)
        if low_state is not None and high_state is not None and low_state != high_state:
            signs.add(1 if high_state else -1)
    return signs


def _staircase(grid: _Grid, frame: _Frame) -> None:
    """The first and last row searched in full, then the middle row of every pair of rows done, bounded by their
    boundaries (rows between two exactly alike are not probed); every open search advances one probe per wave."""
    last = frame.outer - 1
    active = [_RowSearch(outer=o, lo=0, hi=frame.inner) for o in (0, last)]
    done: dict[int, tuple[int, int]] = {}
    segments = [(0, last)]
    while True:
        wanted: list[Position] = []
        progressed = True
        while progressed:
            wanted, progressed = [], False
            for search in list(active):
                search.tighten(grid, frame)
                position = search.advance(grid, frame)
                if position is None:
                    done[search.outer] = (min(search.lo, search.hi), max(search.lo, search.hi))
                    active.remove(search)
                    progressed = True
                else:
                    wanted.append(position)
            spawned, segments = _spawn(segments, done)
            active += spawned
            progressed = progressed or bool(spawned)
        if not active:
            return
        grid.wave(wanted)


def _spawn(
    segments: list[tuple[int, int]], done: dict[int, tuple[int, int]]
) -> tuple[list[_RowSearch], list[tuple[int, int]]]:
    """For each pair of rows both done with rows between them: a search of the middle row, bounded by the two
    rows' bounds, and the two halves as new pairs; a pair whose rows have the same exact boundary is closed."""
    spawned: list[_RowSearch] = []
    kept: list[tuple[int, int]] = []
    for first, second in segments:
        if second - first < 2:
            continue
        if first not in done or second not in done:
            kept.append((first, second))
            continue
        (lo_a, hi_a), (lo_b, hi_b) = done[first], done[second]
        if lo_a == hi_a == lo_b == hi_b:
            continue  # the staircase: every row between has this boundary too
        middle = (first + second) // 2
        spawned.append(_RowSearch(outer=middle, lo=min(lo_a, lo_b), hi=max(hi_a, hi_b)))
        kept += [(first, middle), (middle, second)]
    return spawned, kept


def _beyond(orientation: tuple[int, int], low: Position, high: Position) -> bool:
    """``high`` lies on ``low``'s failing side (or is it) along both axes, in this orientation."""
    row_sign, col_sign = orientation
    return row_sign * (high[0] - low[0]) >= 0 and col_sign * (high[1] - low[1]) >= 0


def _violations(grid: _Grid, orientation: tuple[int, int]) -> list[tuple[Position, Position]]:
    """Pairs (failing cell run, passing cell run on its failing side): each contradicts this orientation."""
    failing, passing = grid.measured()
    return [(f, p) for f in failing for p in passing if _beyond(orientation, f, p)]


def _fitting(grid: _Grid) -> tuple[list[tuple[int, int]], list[tuple[Position, Position]]]:
    """The orientations no cell run contradicts; when there is none, the contradicting pairs of the orientation
    that fits best (fewest pairs), nearest pairs first."""
    found = {o: _violations(grid, o) for o in _ORIENTATIONS}
    fitting = [o for o, pairs in found.items() if not pairs]
    if fitting:
        return fitting, []
    best = min(found.values(), key=len)
    return [], sorted(best, key=lambda pair: abs(pair[0][0] - pair[1][0]) + abs(pair[0][1] - pair[1][1]))


def _implied(grid: _Grid, orientations: Sequence[tuple[int, int]], position: Position) -> CellState | None:
    """What the cells run imply for a cell not run, in every fitting orientation alike, or None."""
    failing, passing = grid.measured()
    states, because = set(), []
    for orientation in orientations:
        below = [f for f in failing if _beyond(orientation, f, position)]
        above = [p for p in passing if _beyond(orientation, position, p)]
        if not below and not above:
            return None
        witnesses = below or above
        states.add(bool(below))
        because.append(min(witnesses, key=lambda w: (abs(w[0] - position[0]) + abs(w[1] - position[1]), w)))
    if len(states) != 1:
        return None
    state: Literal["fails", "passes"] = "fails" if states.pop() else "passes"
    return CellState(state=state, how="inferred", because=tuple(dict.fromkeys(because)))


ASSUMPTION = (
    "the failing region is monotone along each axis (a staircase): in each row the failing cells form one interval "
    "touching the same end, and the boundary moves one way from row to row"
)


def grid_search(
    row_axis: str,
    rows: Sequence[str],
    col_axis: str,
    cols: Sequence[str],
    probe: Probe,
    *,
    log: Callable[[str], None] = lambda _: None,
    probe_all_up_to: int = PROBE_ALL_UP_TO,
) -> GridResult:
    """The failing region of the grid ``rows`` × ``cols`` (each oldest first), found as the module's doc says;
    ``probe`` runs a wave of (row version, column version) cells and returns their results in that order."""
    if len(rows) < 2 or len(cols) < 2 or len(set(rows)) != len(rows) or len(set(cols)) != len(cols):
        msg = (
            f"a grid needs two distinct versions or more on each axis: {row_axis} {list(rows)}, {col_axis} {list(cols)}"
        )
        raise BisectInconclusiveError(msg[:400])
    grid = _Grid(rows, cols, probe, log)
    grid.wave(_corners(len(rows), len(cols)))
    searched = "none (the corners already contradict the assumption)"
    if _fitting(grid)[0]:
        frame = _frame(grid)
        if len({grid.state(p) for p in _corners(len(rows), len(cols))}) == 1:
            grid.wave([(len(rows) // 2, len(cols) // 2)])  # the corners agree: the centre checks they are all
        _staircase(grid, frame)
        searched = row_axis if frame.transpose else col_axis
    fitting = _close_gaps(grid)
    fallback = None if fitting else _fall_back(grid, probe_all_up_to)
    fitting, contradictions = _fitting(grid)
    cells = {
        position: _cell_state(grid, fitting, position)
        for position in itertools.product(range(len(rows)), range(len(cols)))
    }
    return GridResult(
        row_axis=row_axis,
        col_axis=col_axis,
        rows=tuple(rows),
        cols=tuple(cols),
        cells=cells,
        probed=tuple(grid.order),
        waves=grid.waves,
        assumption=ASSUMPTION,
        assumption_held=bool(fitting),
        checked=_checked(grid, fitting, contradictions, row_axis, col_axis),
        contradictions=tuple(contradictions[:5]),
        fallback=fallback,
        searched_along=searched,
    )


def _corners(rows: int, cols: int) -> list[Position]:
    return [(0, 0), (0, cols - 1), (rows - 1, 0), (rows - 1, cols - 1)]


def _close_gaps(grid: _Grid) -> list[tuple[int, int]]:
    """While the assumption fits the cells run, probe (one wave) every cell neither run nor implied by them, so that
    no cell is guessed; the orientations that fit, or none when a cell run contradicts the assumption."""
    while True:
        fitting, _ = _fitting(grid)
        if not fitting:
            return []
        every = itertools.product(range(len(grid.rows)), range(len(grid.cols)))
        gaps = [p for p in every if p not in grid.results and _implied(grid, fitting, p) is None]
        if not gaps:
            return fitting
        grid.wave(gaps)


def _fall_back(grid: _Grid, probe_all_up_to: int) -> str:
    """The assumption broke on the cells run: probe every cell of a small grid, else every row and column through
    the contradicting cells; say what was probed."""
    _, pairs = _fitting(grid)
    size = len(grid.rows) * len(grid.cols)
    if size <= probe_all_up_to:
        grid.wave(list(itertools.product(range(len(grid.rows)), range(len(grid.cols)))))
        return f"every cell of the grid ({size} cells, at most {probe_all_up_to}) was run"
    lines_rows = sorted({p[0] for pair in pairs for p in pair})
    lines_cols = sorted({p[1] for pair in pairs for p in pair})
    grid.wave(
        [(r, c) for r in lines_rows for c in range(len(grid.cols))]
        + [(r, c) for c in lines_cols for r in range(len(grid.rows))]
    )
    return (
        f"every cell of the {len(lines_rows)} rows and {len(lines_cols)} columns through the contradicting cells was "
        f"run; the {size - len(grid.order)} cells not run are not inferred"
    )


def _cell_state(grid: _Grid, fitting: Sequence[tuple[int, int]], position: Position) -> CellState:
    """Measured, skipped, inferred (only while the assumption fits) or not run."""
    result = grid.results.get(position)
    if result is not None and result.skipped:
        return CellState(state="skipped", how="skipped", result=result)
    if result is not None:
        return CellState(state="fails" if _fails(result) else "passes", how="measured", result=result)
    implied = _implied(grid, fitting, position) if fitting else None
    return implied or CellState(state="not run", how="not run")


def _checked(
    grid: _Grid,
    fitting: Sequence[tuple[int, int]],
    contradictions: Sequence[tuple[Position, Position]],
    row_axis: str,
    col_axis: str,
) -> str:
    """What was checked, on how many cells, and what it found."""
    run = len(grid.order)
    if fitting:
        sides = [_side(row_axis, {o[0] for o in fitting}), _side(col_axis, {o[1] for o in fitting})]
        where = " and ".join(s for s in sides if s)
        said = f"failures lie towards {where}" if where else "the cells run tell no side apart"
        return f"held on the {run} cells run: no cell run contradicts it; {said}"
    failing, passing = contradictions[0]

    def label(p: Position) -> str:
        return f"{row_axis} {grid.rows[p[0]]}, {col_axis} {grid.cols[p[1]]}"

    return (
        f"broken on the {run} cells run: no orientation fits them; e.g. ({label(failing)}) fails while "
        f"({label(passing)}) passes though it lies beyond it on both axes "
        f"({len(contradictions)} such pair{'s' if len(contradictions) != 1 else ''} in the closest orientation)"
    )


def _side(axis: str, signs: set[int]) -> str:
    if signs == {1}:
        return f"newer {axis}"
    if signs == {-1}:
        return f"older {axis}"
    return ""
