"""What a matrix run is asked (``MatrixRequest``) and what it counts as it goes (``RunStats``).

Both sit below ``run/context.py``: the seam to an engine there (``MatrixExecutor``, which ``RunContext.executor``
holds) names them, and must import neither the plan nor the run phase that use them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Literal

from reprobisect.config.expand import MAX_CELLS
from reprobisect.run.sandbox import Confinement

__all__ = ["MatrixRequest", "RunStats"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class MatrixRequest:
    """A matrix run as the user asked for it (where it runs is the context's: ``RunContext.executor``)."""

    repros: tuple[str, ...] = ()  # names of config.repros (a script is one: config.scripts.script_repro)
    backend: Literal["auto", "cuda", "cpu"] = "auto"
    axes: Mapping[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)
    select: tuple[str, ...] = ()
    fixes: tuple[str, ...] = ()
    forms: tuple[str, ...] = ()
    jobs: int = 1
    repeat: int = 1
    fresh: bool = False
    refresh_index: bool = False
    timeout: float | None = None
    use_includes: bool = True
    max_cells: int = MAX_CELLS  # the cells the axes may expand to (--max-cells; config/expand.py)
    cpus_per_run: int | None = None  # None: 1 on the cuda backend (comparable step times), 0 (unpinned) on the CPU
    confinement: Confinement = dataclasses.field(default_factory=Confinement)
    # packages besides the matrix's axes that every cell installs at one version (--require numpy==1.26.4): an axis
    # of one value, so the cell's id names it and a cell without it is another cell
    requires: Mapping[str, str] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class RunStats:
    """How many runs were executed and how many were taken from the store."""

    executed: int = 0
    reused: int = 0
    not_applicable: int = 0  # patch fixes not run on a form that never imports what they patch
