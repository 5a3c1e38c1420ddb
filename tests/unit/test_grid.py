"""The two-axis search (bisect/grid.py) and its rules (bisect/rules.py), against fake probes of grids whose truth is
known: monotone ones are found exactly with fewer cells than the grid, any other is reported truthfully and never
given a rule a cell run contradicts."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reprobisect.bisect.grid import GridResult, grid_search
from reprobisect.bisect.rules import Rule, rules_for, staircase_orientation
from reprobisect.bisect.search import ProbeResult
from reprobisect.errors import BisectInconclusiveError

Truth = dict[tuple[int, int], str]  # "F" fails, "P" passes, "S" skipped (ENV_ERROR)


class FakeProbe:
    """Answers from a planted grid; counts what it was asked and refuses to be asked a cell twice."""

    def __init__(self, truth: Truth, rows: int, cols: int) -> None:
        self.truth = truth
        self.rows = [f"2.{i}.0" for i in range(rows)]
        self.cols = [f"0.{i}.1" for i in range(cols)]
        self.asked: list[tuple[int, int]] = []
        self.waves = 0

    def __call__(self, cells: Sequence[tuple[str, str]]) -> list[ProbeResult]:
        self.waves += 1
        found = []
        for row, col in cells:
            position = (self.rows.index(row), self.cols.index(col))
            assert position not in self.asked, f"{position} probed twice"
            self.asked.append(position)
            found.append(_result(f"{row}/{col}", self.truth[position]))
        return found

    def search(self) -> GridResult:
        return grid_search("lightning", self.rows, "deepspeed", self.cols, self)


def _result(name: str, state: str) -> ProbeResult:
    if state == "F":
        return ProbeResult(version=name, outcome="REPRODUCED", signature_id="sig-a", signature="ImportError: gone")
    if state == "S":
        return ProbeResult(version=name, outcome="ENV_ERROR", signature="no wheel")
    return ProbeResult(version=name, outcome="PASS")


@st.composite
def monotone(draw: st.DrawFn) -> tuple[Truth, int, int]:
    """A staircase: row r fails from its boundary b[r] on, b non-increasing, then the axes flipped at random."""
    rows = draw(st.integers(2, 12))
    cols = draw(st.integers(2, 16))
    bounds = sorted(draw(st.lists(st.integers(0, cols), min_size=rows, max_size=rows)), reverse=True)
    flip_rows, flip_cols = draw(st.booleans()), draw(st.booleans())
    truth = {}
    for r, c in itertools.product(range(rows), range(cols)):
        real = (rows - 1 - r if flip_rows else r, cols - 1 - c if flip_cols else c)
        truth[real] = "F" if c >= bounds[r] else "P"
    return truth, rows, cols


def _bound(rows: int, cols: int) -> int:
    """rows·(log2(cols)+2) + corners and the centre, along whichever axis the search walks."""
    along = max(rows * (math.log2(cols) + 2), cols * (math.log2(rows) + 2))
    return min(rows * cols, math.floor(along) + 5)


@settings(max_examples=300)
@given(monotone())
def test_a_monotone_grid_is_found_exactly_with_few_cells(planted: tuple[Truth, int, int]) -> None:
    truth, rows, cols = planted
    probe = FakeProbe(truth, rows, cols)
    result = probe.search()
    assert result.assumption_held and result.fallback is None
    assert {p for p, s in truth.items() if s == "F"} == result.failing()
    assert all(cell.state in ("fails", "passes") for cell in result.cells.values())
    assert result.run == len(probe.asked) <= _bound(rows, cols)
    if rows * cols >= 40 and min(rows, cols) >= 4:
        assert result.run < rows * cols
    for cell in result.cells.values():  # an inferred cell names cells run that imply it
        assert cell.how == "measured" or (cell.how == "inferred" and cell.because)
        assert all(result.cells[b].how == "measured" for b in cell.because)


@settings(max_examples=200)
@given(monotone())
def test_the_rules_evaluated_on_every_cell_reproduce_the_grid(planted: tuple[Truth, int, int]) -> None:
    truth, rows, cols = planted
    failing = {p for p, s in truth.items() if s == "F"}
    rules = rules_for(failing, rows, cols)
    assert {p for p in truth if any(rule.holds(p) for rule in rules)} == failing
    names = ([f"2.{i}" for i in range(rows)], [f"0.{i}" for i in range(cols)])
    for rule in rules:  # a staircase's rules are open towards the failing corner: one bound per axis at most
        assert all(" ≤ " not in clause for clause in rule.clauses("l", names[0], "d", names[1]))
    row_sets = {frozenset(c for c in range(cols) if (r, c) in failing) for r in range(rows)}
    assert len(rules) == len(row_sets - {frozenset()})  # one rule per step


@settings(max_examples=300)
@given(st.data())
def test_any_other_grid_is_reported_truthfully_and_no_rule_contradicts_a_cell_run(data: st.DataObject) -> None:
    rows, cols = data.draw(st.integers(2, 9)), data.draw(st.integers(2, 9))
    states = st.lists(st.sampled_from("FFPPS"), min_size=rows * cols, max_size=rows * cols)
    truth = dict(zip(itertools.product(range(rows), range(cols)), data.draw(states), strict=True))
    probe = FakeProbe(truth, rows, cols)
    result = probe.search()
    for position in probe.asked:  # every cell run says what its probe said
        expected = {"F": "fails", "P": "passes", "S": "skipped"}[truth[position]]
        assert result.cells[position].state == expected and result.cells[position].how != "inferred"
    for position, cell in result.cells.items():  # a skipped cell is never a verdict
        if truth[position] == "S":
            assert cell.state in ("skipped", "not run") or cell.how == "inferred"
    rules = rules_for(result.failing(), rows, cols)
    for position in probe.asked:
        assert any(rule.holds(position) for rule in rules) == (truth[position] == "F")
    if not result.assumption_held:
        assert result.contradictions and "broken" in result.checked
        assert all(cell.how != "inferred" for cell in result.cells.values())
        assert result.run == rows * cols or rows * cols > 48  # a grid of at most 48 cells falls back to every one


@settings(max_examples=200)
@given(monotone(), st.data())
def test_skipped_cells_in_a_monotone_grid_leave_every_stated_cell_true(planted, data) -> None:
    truth, rows, cols = planted
    for position in data.draw(st.lists(st.sampled_from(sorted(truth)), max_size=4)):
        truth = {**truth, position: "S"}
    probe = FakeProbe(truth, rows, cols)
    result = probe.search()
    original = planted[0]
    for position, cell in result.cells.items():
        if cell.state in ("fails", "passes"):
            assert (cell.state == "fails") == (original[position] == "F")
        if truth[position] == "S" and position in probe.asked:
            assert cell.state == "skipped"


def _planted(rows: int, cols: int, fails: Callable[[int, int], bool]) -> FakeProbe:
    truth = {(r, c): "F" if fails(r, c) else "P" for r, c in itertools.product(range(rows), range(cols))}
    return FakeProbe(truth, rows, cols)


def test_lightning_20040_reads_as_one_rule_with_its_proving_edges() -> None:
    """Fails where lightning predates the fix (rows 0-3) and deepspeed has dropped the class (columns 5 on)."""
    probe = _planted(6, 12, lambda r, c: r < 4 and c >= 5)
    result = probe.search()
    [rule] = rules_for(result.failing(), 6, 12)
    assert rule.text("lightning", probe.rows, "deepspeed", probe.cols) == (
        "fails where lightning < 2.4.0 and deepspeed ≥ 0.5.1"
    )
    assert result.run < 20 and "older lightning and newer deepspeed" in result.checked
    proven = {(e.axis, e.passing, e.failing) for e in result.edges() if e.measured}
    assert ("deepspeed", "0.4.1", "0.5.1") in proven and ("lightning", "2.4.0", "2.3.0") in proven


def test_a_contradiction_is_named_and_a_small_grid_run_whole() -> None:
    probe = _planted(4, 5, lambda r, c: (r, c) in {(0, 0), (3, 4)})  # two opposite corners fail
    result = probe.search()
    assert not result.assumption_held
    assert result.fallback is not None and "every cell" in result.fallback and result.run == 20
    assert "broken" in result.checked and result.contradictions
    assert result.failing() == {(0, 0), (3, 4)}
    texts = [r.text("l", probe.rows, "d", probe.cols) for r in rules_for(result.failing(), 4, 5)]
    assert sorted(texts) == ["fails where l < 2.1.0 and d < 0.1.1", "fails where l ≥ 2.3.0 and d ≥ 0.4.1"]


def test_a_large_broken_grid_runs_the_lines_through_the_contradiction_and_infers_nothing() -> None:
    probe = _planted(10, 10, lambda r, c: (r, c) in {(0, 0), (9, 9)})
    result = probe.search()
    assert not result.assumption_held and result.fallback is not None and "rows" in result.fallback
    assert result.run < 100 and all(c.how != "inferred" for c in result.cells.values())
    assert sum(c.state == "not run" for c in result.cells.values()) == 100 - result.run


def test_all_corners_agreeing_are_checked_by_the_centre() -> None:
    probe = _planted(5, 5, lambda r, c: (r, c) == (2, 2))  # a hole in the middle: not monotone
    result = probe.search()
    assert (2, 2) in probe.asked and not result.assumption_held and result.failing() == {(2, 2)}


def test_a_region_one_axis_alone_decides_drops_the_other_clause() -> None:
    probe = _planted(6, 4, lambda r, c: r >= 2)
    result = probe.search()
    assert [r.text("lightning", probe.rows, "deepspeed", probe.cols) for r in rules_for(result.failing(), 6, 4)] == [
        "fails where lightning ≥ 2.2.0"
    ]


def test_a_staircase_is_one_rule_per_step() -> None:
    rows, cols = [f"1.{i}" for i in range(4)], [f"0.{i}" for i in range(5)]
    failing = {(r, c) for r in range(4) for c in range(5) if c >= (4, 3, 3, 1)[r]}
    texts = [rule.text("a", rows, "b", cols) for rule in rules_for(failing, 4, 5)]
    assert texts == ["fails where b ≥ 0.4", "fails where a ≥ 1.1 and b ≥ 0.3", "fails where a ≥ 1.3 and b ≥ 0.1"]


def test_a_middle_rectangle_is_said_with_both_bounds() -> None:
    rows, cols = [f"1.{i}" for i in range(5)], [f"0.{i}" for i in range(5)]
    [rule] = rules_for({(r, c) for r in (1, 2) for c in (2,)}, 5, 5)
    assert rule == Rule(row_span=(1, 2), col_span=(2, 2))
    assert rule.text("a", rows, "b", cols) == "fails where 1.1 ≤ a < 1.3 and b = 0.2"


@pytest.mark.parametrize(("rows", "cols"), [(["1.0"], ["0.1", "0.2"]), (["1.0", "1.0"], ["0.1", "0.2"])])
def test_a_grid_needs_two_distinct_versions_per_axis(rows: list[str], cols: list[str]) -> None:
    with pytest.raises(BisectInconclusiveError, match="two distinct versions"):
        grid_search("a", rows, "b", cols, lambda cells: [])


def test_a_probe_that_answers_the_wrong_number_of_cells_is_refused() -> None:
    with pytest.raises(BisectInconclusiveError, match="answered 1 cells for 4"):
        grid_search("a", ["1", "2"], "b", ["1", "2"], lambda cells: [_result("x", "P")])


@settings(max_examples=300)
@given(st.integers(1, 8), st.integers(1, 8), st.data())
def test_any_failing_cells_are_covered_exactly_by_their_rules(rows: int, cols: int, data: st.DataObject) -> None:
    every = list(itertools.product(range(rows), range(cols)))
    failing = set(data.draw(st.lists(st.sampled_from(every), max_size=rows * cols)))
    rules = rules_for(failing, rows, cols)
    assert {p for p in every if any(rule.holds(p) for rule in rules)} == failing
    if staircase_orientation(failing, rows, cols) is None:  # not a staircase: two-sided bounds may be needed
        assert failing and len(rules) >= 1
