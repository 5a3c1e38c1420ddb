"""Where runs happen and where what they make goes: one object instead of five arguments.

Every entry point that runs repros — the matrix run, one repro's cell, a bisection, its culprit search, a
night — needs the same five things: the interpreter cells are made from, the store records go to, the
folder cells live in, the environment runs start from and the function that prints progress. They were
threaded one by one through every layer; a command now makes one ``RunContext`` and hands it down.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path

from reprobisect.cells.base import BaseInterpreter
from reprobisect.model.store import Store
from reprobisect.util.echo import Echo

__all__ = ["RunContext"]


def _silent(_: str) -> None:
    """An echo that says nothing (a bisection's probes: the search prints its own lines)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class RunContext:
    """The machine-side setting of every run: which interpreter, which store, which cells folder, which
    environment, who hears about it."""

    base: BaseInterpreter
    store: Store
    envs_dir: Path
    environ: Mapping[str, str]
    echo: Echo = print

    def quiet(self) -> RunContext:
        """The same setting with nothing printed: for runs whose caller says what they found."""
        return dataclasses.replace(self, echo=_silent)
