"""Where this process's time went: seconds and counts by kind of work (cells made, op builds, commit wheels, runs).

Why a tally and not the records: a record says what one run cost, but not what the harness paid around it — a
cell built before the runs, an op compiled ahead of them, a commit's wheel built for a culprit probe — and records
reused from an earlier call are no work of this one. Each place that does such work adds what it took, the moment
it ends (``add``); ``reprobisect corpus`` reads the tally of each entry's process to say where an entry's wall time
went. Work done at once in several threads adds up past the wall time: the sum says what was spent, not how long
anyone waited.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "CELLS",
    "COMMIT_WHEELS",
    "KINDS",
    "OP_BUILDS",
    "PROBES",
    "RUNS",
    "Spent",
    "add",
    "add_run",
    "reset",
    "snapshot",
]

CELLS = "cells made"
OP_BUILDS = "op builds"
COMMIT_WHEELS = "commit wheels built"
RUNS = "runs"  # the runs of release cells
PROBES = "probe runs"  # the runs of a commit's cell: a culprit search's probes
KINDS = (CELLS, OP_BUILDS, COMMIT_WHEELS, RUNS, PROBES)


@dataclasses.dataclass(frozen=True)
class Spent:
    """How many pieces of work of one kind ended, and their seconds together."""

    count: int = 0
    seconds: float = 0.0


_LOCK = threading.Lock()
_SPENT: dict[str, Spent] = {}


def add(kind: str, seconds: float) -> None:
    """One piece of work of ``kind`` took ``seconds``; safe from any thread."""
    with _LOCK:
        before = _SPENT.get(kind, Spent())
        _SPENT[kind] = Spent(before.count + 1, before.seconds + max(0.0, float(seconds)))


def add_run(seconds: float, ops: Sequence[Mapping[str, Any]], *, probe: bool) -> None:
    """A run ended after ``seconds``: a release cell's run, or a commit's (``probe``); each op it built itself (its
    record's ``config.ops``, built) is an op build too, whose seconds lie inside the run's."""
    add(PROBES if probe else RUNS, seconds)
    for op in ops:
        if isinstance(op, Mapping) and op.get("built") is True and isinstance(op.get("seconds"), (int, float)):
            add(OP_BUILDS, float(op["seconds"]))


def snapshot() -> Mapping[str, Spent]:
    """What was added since the last ``reset`` (or the process's start), by kind."""
    with _LOCK:
        return dict(_SPENT)


def reset() -> None:
    """Start counting afresh (an entry's process counts its own work only)."""
    with _LOCK:
        _SPENT.clear()
