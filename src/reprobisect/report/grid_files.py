"""The grid answers a records folder holds (``grid-*.json``, written by a triage over two packages' ranges:
bisect/grid_answer.py), read as hostile input for the report's page, as ``bisect-*.json`` files are."""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from reprobisect.model.record import MAX_RECORD_BYTES
from reprobisect.report.frame import SkippedFileWarning
from reprobisect.util.safe_read import UnsafeFileError, load_json_file

__all__ = ["GridFile", "load_grids"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class GridFile:
    """One grid search's answer file (``<out>/grid-*.json``), kept as the triage wrote it."""

    path: Path
    data: dict[str, Any]


_GRID_KEYS = ("repro", "form", "row_axis", "col_axis", "rows", "cols", "grid", "regions", "edges")


def _read_grid(path: Path, root: Path) -> GridFile | None:
    """A grid search's answer (``grid-*.json``, bisect/grid_answer.py), checked for the shape the page draws: a
    list of rows of cell objects, as many rows as ``rows`` and as many cells a row as ``cols``."""
    try:
        data = load_json_file(path, root=root, max_bytes=MAX_RECORD_BYTES)
    except UnsafeFileError as exc:
        warnings.warn(f"skipping {path}: not read as a grid answer ({exc.why})", SkippedFileWarning, stacklevel=3)
        return None
    missing = [k for k in _GRID_KEYS if k not in data] if isinstance(data, dict) else ["(an object)"]
    if missing or not _grid_shape(data):
        what = f"missing key {missing[0]!r}" if missing else "'grid' is not rows × cols of cell objects"
        warnings.warn(f"skipping {path}: not a grid answer ({what})", SkippedFileWarning, stacklevel=3)
        return None
    return GridFile(path=path, data=data)


def _grid_shape(data: Mapping[str, Any]) -> bool:
    rows, cols, grid = data["rows"], data["cols"], data["grid"]
    if not (isinstance(rows, list) and isinstance(cols, list) and isinstance(grid, list) and len(grid) == len(rows)):
        return False
    lists = all(isinstance(row, list) and len(row) == len(cols) for row in grid)
    return lists and all(isinstance(cell, dict) for row in grid for cell in row) and isinstance(data["regions"], list)


def load_grids(roots: Sequence[Path]) -> list[GridFile]:
    """Every ``grid-*.json`` directly under each root (a triage over two packages' ranges); unreadable ones are
    skipped with a warning."""
    found = (_read_grid(path, root) for root in roots for path in sorted(root.glob("grid-*.json")))
    return [g for g in found if g is not None]
