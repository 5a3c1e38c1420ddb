"""A grid search's answer — as a type, JSON only at the edge (``<out>/grid-<slug>.json``).

A search over two packages' ranges (bisect/grid.py) is answered by bisect/grid_answer.py and read by the commit
searches behind its edges (bisect/edge_culprits.py), the triage command's answer, the report's page
(report/grid_view.py) and the corpus's scoring (corpus/grid_scoring.py). As a ``dict`` shaped like the file, a
renamed key was found at run time by whichever of them came last, and each reader guarded against a hostile file
in its own way; as these frozen types mypy finds the first, and ``from_json`` is the one guard: it refuses, by file,
key and value, what is not an answer (a grid that is not rows × columns of cells, a state no search writes).
``to_json`` writes the very dict the files held before (same keys, same order), led by ``schema_version``; a file
from before that key was written is version 1: the format did not change when the key came.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal, TypedDict, TypeVar

from reprobisect.errors import ConfigError
from reprobisect.model.culprit import Commit, Culprit
from reprobisect.model.json_object import JsonObject
from reprobisect.util.files import write_atomic

__all__ = [
    "GRID_SCHEMA_VERSION",
    "CellAt",
    "Contradiction",
    "EdgeCulprit",
    "EdgeStep",
    "GridCell",
    "GridEdge",
    "GridRegion",
    "GridReport",
    "RegionSignature",
    "write_grid_report",
]

GRID_SCHEMA_VERSION = 1
CellAt = dict[str, str]  # a cell by its two axes' versions: {"deepspeed": "0.14.4", "torch": "2.4.0"}
State = Literal["fails", "passes", "skipped", "not run"]
How = Literal["measured", "inferred", "skipped", "not run"]
Direction = Literal["brought", "fixed"]
_STATES: tuple[State, ...] = ("fails", "passes", "skipped", "not run")
_HOWS: tuple[How, ...] = ("measured", "inferred", "skipped", "not run")
_DIRECTIONS: tuple[Direction, ...] = ("brought", "fixed")
_Word = TypeVar("_Word", bound=str)


def _cell_at(read: JsonObject, key: str) -> CellAt:
    value = read.data.get(key)
    if not isinstance(value, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise read.refuse(key, value, "an object of the two axes' versions")
    return dict(value)


def _cells_at(read: JsonObject, key: str) -> tuple[CellAt, ...]:
    items = read.objects(key, required=False)
    return tuple(_cell_at(JsonObject({"cell": item}, read.where, f"{read.what} {key!r}"), "cell") for item in items)


def _choice(read: JsonObject, key: str, allowed: tuple[_Word, ...]) -> _Word:
    value = read.data.get(key)
    for word in allowed:
        if value == word:
            return word
    raise read.refuse(key, value, "one of " + ", ".join(repr(a) for a in allowed))


def _pair(read: JsonObject, key: str) -> tuple[str, str]:
    values = read.texts(key)
    if len(values) != 2:
        raise read.refuse(key, list(values), "two versions: [first, last]")
    return values[0], values[1]


@dataclasses.dataclass(frozen=True, kw_only=True)
class GridCell:
    """One cell as the answer writes it: its state and how it is known; where a probe answered it, the outcome and
    signature (``outcome`` None: no probe), ``why`` a skipped probe said nothing, ``because`` the cells run an
    inferred state rests on."""

    state: State
    how: How
    outcome: str | None = None
    signature_id: str | None = None
    why: str | None = None
    because: tuple[CellAt, ...] = ()

    @property
    def fails(self) -> bool:
        return self.state == "fails"

    def to_json(self) -> dict[str, object]:
        data: dict[str, object] = {"state": self.state, "how": self.how}
        if self.outcome is not None:
            data.update(outcome=self.outcome, signature_id=self.signature_id)
            if self.why is not None:
                data["why"] = self.why
        if self.because:
            data["because"] = [dict(cell) for cell in self.because]
        return data

    @classmethod
    def read(cls, read: JsonObject) -> GridCell:
        has_probe = "outcome" in read.data
        return cls(
            state=_choice(read, "state", _STATES),
            how=_choice(read, "how", _HOWS),
            outcome=read.text("outcome") if has_probe else None,
            signature_id=read.maybe_text("signature_id") if has_probe else None,
            why=read.maybe_text("why") if has_probe else None,
            because=_cells_at(read, "because"),
        )


@dataclasses.dataclass(frozen=True, kw_only=True)
class RegionSignature:
    """One failure signature of a region's cells run: its id and text, the cells run that showed it, its outcome."""

    id: str | None
    text: str | None
    cells: int
    outcome: str

    def to_json(self) -> dict[str, object]:
        return {"id": self.id, "text": self.text, "cells": self.cells, "outcome": self.outcome}

    @classmethod
    def read(cls, read: JsonObject) -> RegionSignature:
        return cls(
            id=read.maybe_text("id"),
            text=read.maybe_text("text"),
            cells=read.count("cells"),
            outcome=read.text("outcome"),
        )


@dataclasses.dataclass(frozen=True, kw_only=True)
class GridRegion:
    """One rectangle of the failing region: its rule (in words and as clauses), its first and last version along
    each axis, its cells and those run, the signatures of the failing cells run in it (most cells first), and how
    many of its edges two cells run prove."""

    rule: str
    clauses: tuple[str, ...]
    rows: tuple[str, str]
    cols: tuple[str, str]
    cells: int
    cells_run: int
    signatures: tuple[RegionSignature, ...]
    edges_proven: int

    def to_json(self) -> dict[str, object]:
        return {
            "rule": self.rule,
            "clauses": list(self.clauses),
            "rows": list(self.rows),
            "cols": list(self.cols),
            "cells": self.cells,
            "cells_run": self.cells_run,
            "signatures": [s.to_json() for s in self.signatures],
            "edges_proven": self.edges_proven,
        }

    @classmethod
    def read(cls, read: JsonObject) -> GridRegion:
        signatures = read.objects("signatures")
        return cls(
            rule=read.text("rule"),
            clauses=read.texts("clauses", required=False),
            rows=_pair(read, "rows"),
            cols=_pair(read, "cols"),
            cells=read.count("cells"),
            cells_run=read.count("cells_run"),
            signatures=tuple(
                RegionSignature.read(JsonObject(s, read.where, f"{read.what} signatures[{i}]"))
                for i, s in enumerate(signatures)
            ),
            edges_proven=read.count("edges_proven"),
        )


class _StepFields(TypedDict):
    axis: str
    at_axis: str
    at: str
    passing: str
    failing: str
    measured: bool


@dataclasses.dataclass(frozen=True, kw_only=True)
class EdgeStep:
    """One step across the failing region's boundary: along ``axis``, at the other axis's ``at``, from ``passing``
    (the last version on the passing side) to ``failing``; ``measured``: both cells ran. What a grid's edge and the
    commit search behind it share, written first by both."""

    axis: str
    at_axis: str
    at: str
    passing: str
    failing: str
    measured: bool

    def step_fields(self) -> _StepFields:
        """The six fields, to make another kind of step of this one (``GridEdge(**edge.step_fields(), ...)``)."""
        return _StepFields(
            axis=self.axis,
            at_axis=self.at_axis,
            at=self.at,
            passing=self.passing,
            failing=self.failing,
            measured=self.measured,
        )

    def step_json(self) -> dict[str, object]:
        return dict(self.step_fields())

    @staticmethod
    def read_step(read: JsonObject) -> _StepFields:
        return _StepFields(
            axis=read.text("axis"),
            at_axis=read.text("at_axis"),
            at=read.text("at"),
            passing=read.text("passing"),
            failing=read.text("failing"),
            measured=read.flag("measured"),
        )


@dataclasses.dataclass(frozen=True, kw_only=True)
class GridEdge(EdgeStep):
    """An edge of the failing region, with its two cells (the passing one and the failing one)."""

    passing_cell: CellAt
    failing_cell: CellAt

    def to_json(self) -> dict[str, object]:
        return {**self.step_json(), "passing_cell": dict(self.passing_cell), "failing_cell": dict(self.failing_cell)}

    @classmethod
    def read(cls, read: JsonObject) -> GridEdge:
        passing, failing = _cell_at(read, "passing_cell"), _cell_at(read, "failing_cell")
        return cls(**cls.read_step(read), passing_cell=passing, failing_cell=failing)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Contradiction:
    """A failing cell run and a passing cell run beyond it: what broke the search's assumption."""

    failing: CellAt
    passing: CellAt

    def to_json(self) -> dict[str, object]:
        return {"failing": dict(self.failing), "passing": dict(self.passing)}

    @classmethod
    def read(cls, read: JsonObject) -> Contradiction:
        return cls(failing=_cell_at(read, "failing"), passing=_cell_at(read, "passing"))


_UNSEARCHED_KEYS = ("commit", "last_good_commit", "commits", "probes", "why", "rerun")


@dataclasses.dataclass(frozen=True, kw_only=True)
class EdgeCulprit(EdgeStep):
    """The commit search behind the edges of one axis between two releases (bisect/edge_culprits.py): the edge it
    ran at (``at``) and the ``at`` of every edge it stands for (``edges_at``, that one first), whether the change
    ``brought`` or ``fixed`` the failure, the clone searched (None: not searched, ``why``), whether the edge's two
    cells were run for it (``measured_now``; None where no clone was there to search), and what ``find_culprits``
    found (``culprit``, None where no search ran)."""

    edges_at: tuple[str, ...]
    direction: Direction
    clone: str | None
    measured_now: bool | None = None
    culprit: Culprit | None = None
    unsearched: str | None = None  # why no search ran (where ``culprit`` is None)

    @property
    def commit(self) -> Commit | None:
        return self.culprit.commit if self.culprit is not None else None

    @property
    def last_good_commit(self) -> Commit | None:
        return self.culprit.last_good_commit if self.culprit is not None else None

    @property
    def why(self) -> str | None:
        return self.culprit.why if self.culprit is not None else self.unsearched

    @property
    def rerun(self) -> str | None:
        return self.culprit.rerun if self.culprit is not None else None

    @property
    def skipped_between(self) -> tuple[str, ...]:
        return self.culprit.skipped_between if self.culprit is not None else ()

    @property
    def release_sources(self) -> tuple[str, ...]:
        return self.culprit.release_sources if self.culprit is not None else ()

    def to_json(self) -> dict[str, object]:
        data: dict[str, object] = {
            **self.step_json(),
            "edges_at": list(self.edges_at),
            "direction": self.direction,
            "clone": self.clone,
        }
        if self.measured_now is not None:
            data["measured_now"] = self.measured_now
        if self.culprit is None:
            data.update(dict.fromkeys(_UNSEARCHED_KEYS), probes=0, why=self.unsearched)
        else:  # the edge names both ends: the culprit's own last and first are left out
            data.update({k: v for k, v in self.culprit.to_json().items() if k not in ("last", "first")})
        return data

    @classmethod
    def read(cls, read: JsonObject) -> EdgeCulprit:
        step, direction = cls.read_step(read), _choice(read, "direction", _DIRECTIONS)
        culprit = None
        if "kind" in read.data:  # a search ran: the culprit's fields, its ends the edge's, oldest first
            ends = (step["passing"], step["failing"])
            last, first = ends if direction == "brought" else ends[::-1]
            culprit = Culprit.from_json({**read.data, "last": last, "first": first}, where=read.where)
        measured_now = read.data.get("measured_now")
        return cls(
            **step,
            edges_at=read.texts("edges_at"),
            direction=direction,
            clone=read.maybe_text("clone"),
            measured_now=None if measured_now is None else read.flag("measured_now"),
            culprit=culprit,
            unsearched=None if culprit is not None else read.maybe_text("why"),
        )


@dataclasses.dataclass(frozen=True, kw_only=True)
class GridReport:
    """A grid search's answer: the repro and form, the pins held (``cell``), the two axes and their versions, the
    cells run of the grid and in how many waves, the assumption and its check, the failing region's rectangles,
    the edges, every cell's state (``grid``: rows × columns), the candidate fixes over the failing cells run
    (passed on, of), and the commit searches behind the edges (``culprits``; None where none was asked)."""

    repro: str
    form: str
    cell: dict[str, str]
    row_axis: str
    col_axis: str
    rows: tuple[str, ...]
    cols: tuple[str, ...]
    cells_run: int
    cells_in_grid: int
    waves: int
    searched_along: str
    assumption: str
    assumption_held: bool
    checked: str
    fallback: str | None
    contradictions: tuple[Contradiction, ...]
    regions: tuple[GridRegion, ...]
    edges: tuple[GridEdge, ...]
    grid: tuple[tuple[GridCell, ...], ...]
    fixes: dict[str, tuple[int, int]]
    culprits: tuple[EdgeCulprit, ...] | None = None

    def versions(self, axis: str) -> tuple[str, ...]:
        """The versions along ``axis`` (the row axis's rows, else the columns)."""
        return self.rows if axis == self.row_axis else self.cols

    def at(self, row: str, col: str) -> GridCell:
        """The state of the cell at those two versions; a ValueError where the grid has no such."""
        return self.grid[self.rows.index(row)][self.cols.index(col)]

    def with_culprits(self, culprits: Sequence[EdgeCulprit]) -> GridReport:
        return dataclasses.replace(self, culprits=tuple(culprits))

    def to_json(self) -> dict[str, object]:
        data: dict[str, object] = {
            "schema_version": GRID_SCHEMA_VERSION,
            "kind": "grid",
            "repro": self.repro,
            "form": self.form,
            "cell": dict(self.cell),
            "row_axis": self.row_axis,
            "col_axis": self.col_axis,
            "rows": list(self.rows),
            "cols": list(self.cols),
            "cells_run": self.cells_run,
            "cells_in_grid": self.cells_in_grid,
            "waves": self.waves,
            "searched_along": self.searched_along,
            "assumption": self.assumption,
            "assumption_held": self.assumption_held,
            "checked": self.checked,
            "fallback": self.fallback,
            "contradictions": [c.to_json() for c in self.contradictions],
            "regions": [r.to_json() for r in self.regions],
            "edges": [e.to_json() for e in self.edges],
            "grid": [[cell.to_json() for cell in row] for row in self.grid],
            "fixes": {fix: list(counts) for fix, counts in self.fixes.items()},
        }
        if self.culprits is not None:
            data["culprits"] = [c.to_json() for c in self.culprits]
        return data

    @classmethod
    def from_json(cls, data: object, *, where: str) -> GridReport:
        """An answer read back from ``where``; a ConfigError names the file, the key and the value it refuses."""
        read = JsonObject(data, where, "grid answer")
        version = read.data.get("schema_version", GRID_SCHEMA_VERSION)
        if version != GRID_SCHEMA_VERSION:
            newer = type(version) is int and version > GRID_SCHEMA_VERSION
            fix = "upgrade reprobisect to read it" if newer else "triage again to write it anew"
            raise ConfigError(f"{where}: schema_version {version!r}, this harness reads {GRID_SCHEMA_VERSION}; {fix}")
        if read.data.get("kind", "grid") != "grid":
            raise read.refuse("kind", read.data.get("kind"), "'grid'")
        rows, cols = read.texts("rows"), read.texts("cols")
        culprits = read.data.get("culprits")
        return cls(
            repro=read.text("repro"),
            form=read.text("form"),
            cell=read.text_map("cell"),
            row_axis=read.text("row_axis"),
            col_axis=read.text("col_axis"),
            rows=rows,
            cols=cols,
            cells_run=read.count("cells_run"),
            cells_in_grid=read.count("cells_in_grid"),
            waves=read.count("waves"),
            searched_along=read.text("searched_along"),
            assumption=read.text("assumption"),
            assumption_held=read.flag("assumption_held"),
            checked=read.text("checked"),
            fallback=read.maybe_text("fallback"),
            contradictions=read.each("contradictions", Contradiction.read, required=False),
            regions=read.each("regions", GridRegion.read),
            edges=read.each("edges", GridEdge.read),
            grid=_grid(read, len(rows), len(cols)),
            fixes=_fixes(read),
            culprits=None if culprits is None else read.each("culprits", EdgeCulprit.read),
        )


def _grid(read: JsonObject, rows: int, cols: int) -> tuple[tuple[GridCell, ...], ...]:
    """Every cell's state: as many rows as ``rows``, as many cells a row as ``cols``."""
    lines = [line for line in read.objects("grid") if isinstance(line, list) and len(line) == cols]
    if len(lines) != rows or len(read.objects("grid")) != rows:
        raise read.refuse("grid", read.data.get("grid"), f"{rows} rows of {cols} cell objects (rows × cols)")
    return tuple(
        tuple(GridCell.read(JsonObject(cell, read.where, f"grid[{r}][{c}]")) for c, cell in enumerate(line))
        for r, line in enumerate(lines)
    )


def _fixes(read: JsonObject) -> dict[str, tuple[int, int]]:
    """Each candidate fix's [passed on, of] failing cells run."""
    value = read.data.get("fixes", {})
    if not isinstance(value, Mapping):
        raise read.refuse("fixes", value, "an object of fix names to [passed on, of]")
    fixes = {}
    for fix, counts in value.items():
        if not (isinstance(fix, str) and isinstance(counts, list) and len(counts) == 2):
            raise read.refuse("fixes", value, "an object of fix names to [passed on, of]")
        if not all(type(n) is int and n >= 0 for n in counts) or counts[0] > counts[1]:
            raise read.refuse("fixes", value, "an object of fix names to [passed on, of] (counts, passed ≤ of)")
        fixes[fix] = (counts[0], counts[1])
    return fixes


def write_grid_report(path: Path, report: GridReport) -> None:
    """The answer's file, written whole or not at all (a search stopped mid-write leaves the last one)."""
    write_atomic(path, json.dumps(report.to_json(), indent=2), what="the grid search's result")
