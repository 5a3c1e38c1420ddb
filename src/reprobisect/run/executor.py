"""Where the cells of a matrix run are run: the one seam between ``run_matrix`` and an engine (``engine/``).

``MatrixRequest.executor`` is None for this machine (threads and processes here). An engine that runs each cell
somewhere else (Slurm: one job per cell, one job array per wave) takes the whole call instead: it hands every
cell to its workers, each of which calls ``run_matrix`` again for that one cell with ``executor=None``, and
returns the records as ``run_matrix`` would. The engine moves work; it never decides a verdict.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from reprobisect.config.load import Config
    from reprobisect.model.record import Record
    from reprobisect.run.context import RunContext
    from reprobisect.run.matrix_request import MatrixRequest, RunStats

__all__ = ["MatrixExecutor"]


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
        """One record per unit, as ``run_matrix`` returns them; ``request.executor`` is None."""
        ...
