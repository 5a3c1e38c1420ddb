"""Run one repro's forms × fixes in one cell: what ``nox -s repro_gan`` and ``repro_zero3`` do."""

from __future__ import annotations

import dataclasses
import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Literal

from reprobisect.config import Config, Fix, Form, Repro
from reprobisect.envs import BaseInterpreter, CellEnv, ensure_env, resolve_cell
from reprobisect.errors import ConfigError, EnvBuildError, NothingToDoError
from reprobisect.record import Record
from reprobisect.execute import RunSpec, execute, unrun_record
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
    """Build (or reuse) the cell, then run every selected form × fix and store a record for each."""
    repro = config.repro(request.repro)
    fixes = select_fixes(repro, request.fixes)
    cell = resolve_cell(base, {**config.default_cell, **request.pins})
    try:
        env: CellEnv | EnvBuildError = ensure_env(cell, base, envs_dir)
    except EnvBuildError as exc:
        env = exc
    backend: Literal["cuda", "cpu"]
    if request.backend == "auto":
        backend = "cuda" if isinstance(env, CellEnv) and detect_cuda(env.python) else "cpu"
    else:
        backend = request.backend
    forms = select_forms(repro, backend, request.forms)
    names = ", ".join(form.name for form in forms)
    if backend == "cpu" and request.backend == "auto" and not request.forms:
        echo(f"No CUDA device here: running the CPU forms ({names}) of {repro.name!r}, not the cuda form.")
    else:
        echo(f"Running the {names} form(s) of {repro.name!r}.")
    if isinstance(env, CellEnv):
        how = "reused" if env.reused else "built"
        echo(f"Cell {cell.id} ({how} in {env.build_seconds:.1f} s; torch from {cell.torch_source}) at {env.path}")
    else:
        echo(f"Cell {cell.id} could not be built: every run is ENV_ERROR.\n{env}")
    records: list[Record] = []
    total = len(forms) * len(fixes) * request.repeat
    for form in forms:
        for fix in fixes:
            for repeat in range(request.repeat):
                position = f"[{len(records) + 1}/{total}] {form.name} {fix.name}" + (f" #{repeat}" if repeat else "")
                if not isinstance(env, CellEnv):
                    records.append(unrun_record(repro, form, fix, cell, str(env), store, kind="EnvBuildError"))
                    continue
                spec = RunSpec(repro=repro, form=form, fix=fix, env=env, repeat=repeat,
                               timeout=request.timeout, extra_args=request.extra_args)
                stored = None
                if request.resume:
                    stored = store.find(spec.key, repro.name, cell.id, form.name, fix.name, repeat)
                record = stored or execute(spec, store, environ=environ)
                records.append(record)
                sig = f" {record.signature['id']} {record.signature['text'][:90]}" if record.signature else ""
                reused = " (stored)" if stored else ""
                echo(f"{position}: {record.outcome}{sig} [{record.wall_seconds:.1f} s]{reused}")
    return records
