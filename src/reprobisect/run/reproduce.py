"""Run one repro's forms × fixes in one cell: what ``nox -s repro_gan`` and ``repro_zero3`` do."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from reprobisect.cells.pinning import resolve_cell
from reprobisect.config.load import Config
from reprobisect.model.record import Record
from reprobisect.model.repro import Backend
from reprobisect.run.context import RunContext
from reprobisect.run.matrix_request import MatrixRequest
from reprobisect.run.matrix_run import run_matrix
from reprobisect.run.sandbox import Confinement
from reprobisect.run.select import detect_cuda, select_fixes, select_forms
from reprobisect.util.console import heartbeat
from reprobisect.util.redact import redact

__all__ = ["ReproRequest", "default_jobs", "reproduce"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class ReproRequest:
    """What the user asked for on the command line."""

    repro: str
    backend: Literal["auto", "cuda", "cpu"] = "auto"
    fixes: tuple[str, ...] = ()
    forms: tuple[str, ...] = ()
    pins: Mapping[str, str] = dataclasses.field(default_factory=dict)
    nproc: tuple[str, ...] = ()  # ranks per run (an axis: several values, several rows)
    repeat: int = 1
    jobs: int | None = None  # None: one per core the harness may use, at most 8 (``default_jobs``)
    resume: bool = False
    timeout: float | None = None
    cpus_per_run: int | None = None
    confinement: Confinement = dataclasses.field(default_factory=Confinement)


def default_jobs() -> int:
    """Runs at a time when not asked: one per core the harness may use, at most 8. A newcomer's first
    ``nox -s repro_gan`` ran its five CPU runs one after another after the op build (#41); each CPU form runs on one
    thread, and eight GPU runs of the GAN at once cost each about what one alone does (1.06x bare, on an H100)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return max(1, min(8, cores))


def reproduce(
    config: Config,
    request: ReproRequest,
    ctx: RunContext,
) -> list[Record]:
    """Resolve one cell (newest releases that install together, unless pinned) and run it as a one-cell matrix."""
    base, echo = ctx.base, ctx.echo
    repro = config.repro(request.repro)
    fixes = request.fixes or repro.default_fixes  # a newcomer's first run: the report's code and what answers it
    select_fixes(repro, fixes)  # unknown names fail before anything is built
    backend: Backend
    if request.backend == "auto":
        with heartbeat(echo, "asking torch whether a CUDA device is here"):
            backend = "cuda" if detect_cuda(Path(base.executable)) else "cpu"
    else:
        backend = request.backend
    forms = select_forms(repro, backend, request.forms)
    names = ", ".join(form.name for form in forms)
    if backend == "cpu" and request.backend == "auto" and not request.forms:
        echo(f"No CUDA device here: running the CPU forms ({names}) of {repro.name!r}, not the cuda form.")
    else:
        echo(f"Running the {names} form(s) of {repro.name!r}.")
    wanted = {**config.default_cell, **request.pins}
    echo("Resolving the cell: " + redact(", ".join(f"{name} {spec}" for name, spec in wanted.items())) + " …")
    with heartbeat(echo, "resolving the cell against the package index"):
        cell = resolve_cell(base, wanted)
    pins = {"torch": cell.torch if cell.torch_source != "system" else "system", **cell.packages}
    axes = {axis: (pins[axis],) if axis in pins else values[:1] for axis, values in config.matrix.axes.items()}
    axes.update({axis: (value,) for axis, value in pins.items()})
    if request.nproc:
        axes["nproc"] = request.nproc
    matrix = MatrixRequest(
        repros=(repro.name,),
        backend=backend,
        axes=axes,
        fixes=tuple(f.name for f in select_fixes(repro, fixes)),
        forms=tuple(form.name for form in forms),
        repeat=request.repeat,
        jobs=request.jobs if request.jobs is not None else default_jobs(),
        fresh=not request.resume,
        timeout=request.timeout,
        use_includes=False,
        cpus_per_run=request.cpus_per_run,
        confinement=request.confinement,
    )
    return run_matrix(config, matrix, ctx)
