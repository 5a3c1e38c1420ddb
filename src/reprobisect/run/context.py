"""Where runs happen and where what they make goes: one object instead of six arguments.

Every entry point that runs repros — the matrix run, one repro's cell, a bisection, its culprit search, a
night — needs the same things: the interpreter cells are made from, the store records go to, the folder
cells live in, the environment runs start from, the function that prints progress and the engine the cells
run on. They were threaded one by one through every layer; a command now makes one ``RunContext`` and hands
it down.

``RunContext.executor`` is the one seam between ``run_matrix`` and an engine (``engine/``): None for this
machine (threads and processes here). An engine that runs each cell somewhere else (Slurm: one job per cell,
one job array per wave) takes the whole call instead: it hands every cell to its workers, each of which calls
``run_matrix`` again for that one cell with a context whose ``executor`` is None (``here()``), and returns the
records as ``run_matrix`` would. The engine moves work; it never decides a verdict. The engine's protocol lives
here, beside the context it is held by and takes, so that neither module has to import the other.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from reprobisect.cells.base import BaseInterpreter
from reprobisect.model.store import Store
from reprobisect.util.echo import Echo

if TYPE_CHECKING:
    from reprobisect.config.load import Config
    from reprobisect.model.record import Record
    from reprobisect.run.matrix_request import MatrixRequest, RunStats

__all__ = ["MatrixExecutor", "RunContext"]


def _silent(_: str) -> None:
    """An echo that says nothing (a bisection's probes: the search prints its own lines)."""


class MatrixExecutor(Protocol):
    """An engine that runs a matrix request's cells elsewhere; its ``run_matrix`` has ``run_matrix``'s contract."""

    def run_matrix(
        self,
        config: Config,
        request: MatrixRequest,
        ctx: RunContext,
        *,
        cells: Sequence[str],
        stats: RunStats | None,
    ) -> list[Record]:
        """One record per unit, as ``run_matrix`` returns them; ``ctx.executor`` is None."""
        ...


@dataclasses.dataclass(frozen=True, kw_only=True)
class RunContext:
    """The machine-side setting of every run: which interpreter, which store, which cells folder, which
    environment, who hears about it, and which engine runs the cells (None: this machine)."""

    base: BaseInterpreter
    store: Store
    envs_dir: Path
    environ: Mapping[str, str]
    echo: Echo = print
    executor: MatrixExecutor | None = None

    def quiet(self) -> RunContext:
        """The same setting with nothing printed: for runs whose caller says what they found."""
        return dataclasses.replace(self, echo=_silent)

    def here(self) -> RunContext:
        """The same setting with every run on this machine: an engine's worker, and runs that never go to one."""
        return dataclasses.replace(self, executor=None)
