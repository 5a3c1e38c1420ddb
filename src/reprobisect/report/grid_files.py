"""The grid answers a records folder holds (``grid-*.json``, written by a triage over two packages' ranges:
bisect/grid_answer.py), read as hostile input for the report's page, as ``bisect-*.json`` files are."""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Sequence
from pathlib import Path

from reprobisect.errors import ConfigError
from reprobisect.model.grid_report import GridReport
from reprobisect.model.record import MAX_RECORD_BYTES
from reprobisect.report.frame import SkippedFileWarning
from reprobisect.util.safe_read import UnsafeFileError, load_json_file

__all__ = ["GridFile", "load_grids"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class GridFile:
    """One grid search's answer file (``<out>/grid-*.json``), read back as the answer it holds."""

    path: Path
    report: GridReport


def _read_grid(path: Path, root: Path) -> GridFile | None:
    """A grid search's answer (``grid-*.json``, bisect/grid_answer.py) read back (``GridReport.from_json``: a grid
    that is not rows × cols of cells, a state no search writes, a key missing is refused by name); a file that is not
    one is skipped with a warning that says why."""
    try:
        data = load_json_file(path, root=root, max_bytes=MAX_RECORD_BYTES)
        return GridFile(path=path, report=GridReport.from_json(data, where=str(path)))
    except UnsafeFileError as exc:
        warnings.warn(f"skipping {path}: not read as a grid answer ({exc.why})", SkippedFileWarning, stacklevel=3)
    except ConfigError as exc:
        why = str(exc).removeprefix(f"{path}: ")
        warnings.warn(f"skipping {path}: not a grid answer ({why})", SkippedFileWarning, stacklevel=3)
    return None


def load_grids(roots: Sequence[Path]) -> list[GridFile]:
    """Every ``grid-*.json`` directly under each root (a triage over two packages' ranges); unreadable ones are
    skipped with a warning."""
    found = (_read_grid(path, root) for root in roots for path in sorted(root.glob("grid-*.json")))
    return [g for g in found if g is not None]
