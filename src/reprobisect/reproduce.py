"""Run one repro's forms × fixes in one cell: what ``nox -s repro_gan`` and ``repro_zero3`` do."""

from __future__ import annotations

import dataclasses
import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Literal

from reprobisect.config import Config, Fix, Form, Repro
from reprobisect.console import heartbeat
from reprobisect.envs import BaseInterpreter, resolve_cell
from reprobisect.errors import ConfigError, NothingToDoError
from reprobisect.record import Record
from reprobisect.redact import redact
from reprobisect.sandbox import Confinement
from reprobisect.store import Store

__all__ = ["Backend", "ReproRequest", "detect_cuda", "reproduce", "select_fixes", "select_forms"]

Backend = Literal["auto", "cuda", "cpu"]
Echo = Callable[[str], None]


@dataclasses.dataclass(frozen=True, kw_only=True)
class ReproRequest:
    """What the user asked for on the command line."""

    repro: str
    backend: Backend = "auto"
    fixes: tuple[str, ...] = ()
    forms: tuple[str, ...] = ()
    pins: Mapping[str, str] = dataclasses.field(default_factory=dict)
    repeat: int = 1
    resume: bool = False
    timeout: float | None = None
    extra_args: tuple[str, ...] = ()
    cpus_per_run: int | None = None
    confinement: Confinement = dataclasses.field(default_factory=Confinement)


def detect_cuda(python: Path) -> bool:
    """Does torch in this interpreter see a CUDA device?"""
    code = "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"
    try:
        return subprocess.run([str(python), "-c", code], capture_output=True, timeout=300, check=False).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def select_forms(repro: Repro, backend: Literal["cuda", "cpu"], wanted: Sequence[str] = ()) -> list[Form]:
    """The repro's forms for this backend (all CPU forms without a GPU), or exactly those asked for."""
    if wanted:
        unknown = [name for name in wanted if name not in repro.forms]
        if unknown:
            msg = f"--form {unknown[0]!r}: repro {repro.name!r} has forms {', '.join(repro.forms)}"
            raise ConfigError(msg)
        return [repro.forms[name] for name in wanted]  # type: ignore[index]
    forms = [form for form in repro.forms.values() if form.backend == backend]
    if not forms:
        msg = f"repro {repro.name!r} has no {backend} form; it has {', '.join(repro.forms)}"
        raise NothingToDoError(msg)
    return forms


def select_fixes(repro: Repro, wanted: Sequence[str] = ()) -> list[Fix]:
    """Every fix of the repro (``none`` first), or those asked for by name."""
    if not wanted:
        return list(repro.fixes.values())
    unknown = [name for name in wanted if name not in repro.fixes]
    if unknown:
        msg = f"--fix {unknown[0]!r}: repro {repro.name!r} has fixes {', '.join(repro.fixes)}"
        raise ConfigError(msg)
    return [repro.fixes[name] for name in wanted]


def reproduce(
    config: Config,
    request: ReproRequest,
    *,
    base: BaseInterpreter,
    store: Store,
    envs_dir: Path,
    environ: Mapping[str, str],
    echo: Echo = print,
) -> list[Record]:
    """Resolve one cell (newest releases that install together, unless pinned) and run it as a one-cell matrix."""
    from reprobisect.matrixrun import MatrixRequest, run_matrix

    repro = config.repro(request.repro)
    select_fixes(repro, request.fixes)  # unknown names fail before anything is built
    backend: Literal["cuda", "cpu"]
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
    matrix = MatrixRequest(
        repros=(repro.name,),
        backend=backend,
        axes=axes,
        fixes=request.fixes,
        forms=tuple(form.name for form in forms),
        repeat=request.repeat,
        fresh=not request.resume,
        timeout=request.timeout,
        use_includes=False,
        cpus_per_run=request.cpus_per_run,
        confinement=request.confinement,
    )
    return run_matrix(config, matrix, base=base, store=store, envs_dir=envs_dir, environ=environ, echo=echo)
