"""Run repros across the matrix: plan cells, build one env per cell, run every unit, keep records.

A unit is (cell, repro, form, fix, repeat). Identical units already on record are reused unless
``fresh`` is asked for, so a second run, a bisection over the same releases or a resumed run repeats
nothing. Units run ``jobs`` at a time: on the CPU each job gets its share of the cores, on a GPU host
each job gets its own GPU through CUDA_VISIBLE_DEVICES.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Literal, TypeVar

from packaging.utils import canonicalize_name

from reprobisect.cells.base import BaseInterpreter, base_interpreter
from reprobisect.cells.envs import CellEnv, ensure_env, find_python
from reprobisect.cells.index import IndexCache
from reprobisect.cells.ops import DEFAULT_MAX_BYTES, cache_root, prune
from reprobisect.cells.patches import PatchDoesNotApplyError, patched_paths, prepare_overlay
from reprobisect.cells.tools import pytest_folder
from reprobisect.config.load import Config, load_config
from reprobisect.config.matrix import NON_PACKAGE_AXES, PINNED_AXES, RANKS_AXIS, PlannedCell, expand, matches
from reprobisect.errors import ConfigError, EnvBuildError, NothingToDoError, ToolError
from reprobisect.model.cell import SYSTEM, Cell, run_cell
from reprobisect.model.outcome import Outcome
from reprobisect.model.record import Record
from reprobisect.model.repro import Fix, Form, Repro
from reprobisect.model.signature import PATCH_ERROR
from reprobisect.run.console import WIDTH, cut, heartbeat, known_name
from reprobisect.run.execute import RunSpec, execute, unrun_record
from reprobisect.run.executor import MatrixExecutor
from reprobisect.run.sandbox import Confinement, Sandbox
from reprobisect.run.select import detect_cuda, select_fixes, select_forms
from reprobisect.run.store import Store
from reprobisect.util.cmd import run_tool
from reprobisect.util.echo import Echo
from reprobisect.util.redact import redact
from reprobisect.util.stop import stoppable_children

__all__ = [
    "MatrixRequest",
    "RunStats",
    "Unit",
    "cell_ids",
    "job_cpus",
    "listed_cells",
    "plan_cells",
    "plan_units",
    "run_matrix",
]

_T = TypeVar("_T")
_R = TypeVar("_R")


@dataclasses.dataclass(frozen=True, kw_only=True)
class MatrixRequest:
    """A matrix run as the user asked for it."""

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
    cpus_per_run: int | None = None  # None: 1 on the cuda backend (comparable step times), 0 (unpinned) on the CPU
    confinement: Confinement = dataclasses.field(default_factory=Confinement)
    executor: MatrixExecutor | None = None  # None: here; else an engine runs each cell (run/executor.py)


@dataclasses.dataclass
class RunStats:
    """How many runs were executed and how many were taken from the store."""

    executed: int = 0
    reused: int = 0
    not_applicable: int = 0  # patch fixes not run on a form that never imports what they patch


@dataclasses.dataclass(frozen=True, kw_only=True)
class Unit:
    """One run to do (or to take from the store)."""

    planned: PlannedCell
    cell: Cell
    interpreter: BaseInterpreter
    repro: Repro
    form: Form
    fix: Fix
    repeat: int

    @property
    def nproc(self) -> int:
        """Ranks per run: the cell's ``nproc`` axis value (1 without one)."""
        return int(self.planned.pins.get(RANKS_AXIS, "1"))

    @property
    def rerun(self) -> tuple[str, ...]:
        """The words of a command that re-runs this unit: the repro's own command with the cell's pins when the
        command line can say them, else ``nox -s matrix`` naming the cell."""
        pins = self.planned.pins
        python = pins.get("python", SYSTEM)
        if set(pins) <= {"python", *PINNED_AXES, RANKS_AXIS} and (python == SYSTEM or self.repro.rerun):
            options = [*(["--python", python] if python != SYSTEM else [])]
            for axis in PINNED_AXES:  # every pin, 'system' and 'match' too: defaults differ
                if axis in pins:
                    options += [f"--{axis}", pins[axis]]
            options += ["--nproc", str(self.nproc)] if self.nproc != 1 else []
            return tuple(self.repro.rerun_command(options, self.form.name, self.fix))
        cell = _matrix_cell_id(self).removesuffix(f"_nproc-{self.nproc}")
        options = ["--cell", cell, *(["--nproc", str(self.nproc)] if self.nproc != 1 else [])]
        return (
            "nox",
            "-s",
            "matrix",
            "--",
            "--repro",
            self.repro.name,
            *options,
            "--form",
            self.form.name,
            "--fix",
            self.fix.name,
        )


def _select(cells: list[PlannedCell], select: Sequence[str], system_versions: Mapping[str, str]) -> list[PlannedCell]:
    wanted = []
    for item in select:
        axis, sep, pattern = item.partition("=")
        if not sep:
            msg = f"--select {item!r}: expected AXIS=PATTERN, e.g. 'deepspeed=0.18.*'"
            raise ConfigError(msg)
        wanted.append((axis.strip(), pattern.strip()))
    return [c for c in cells if all(a in c.pins and matches(a, c.pins[a], p, system_versions) for a, p in wanted)]


def plan_cells(config: Config, request: MatrixRequest, base: BaseInterpreter, index: IndexCache) -> list[PlannedCell]:
    """The matrix's cells for this request (axes replaced from the command line, then --select)."""
    axes = dict(config.matrix.axes)
    for axis, values in request.axes.items():
        if axis not in axes and axis != RANKS_AXIS:
            msg = f"--{axis}: {axis!r} is not an axis of {config.path.name} (axes: {', '.join(axes)})"
            raise ConfigError(msg)
        axes[axis] = values
    spec = dataclasses.replace(config.matrix, axes=axes)
    if not request.use_includes:
        spec = dataclasses.replace(spec, include=())
    system_versions = {"torch": base.torch or "", "torchvision": base.torchvision or "", "python": base.version}
    available = lambda axis: index.versions(axis, prereleases=spec.prereleases, refresh=request.refresh_index)  # noqa: E731
    cells = _select(expand(spec, available, system_versions=system_versions), request.select, system_versions)
    if request.repros:  # an include entry for other repros would be a job with nothing to run
        cells = [c for c in cells if any(c.runs_repro(name) for name in request.repros)]
    if not cells:
        msg = "the selection leaves no cell; check --select and the axes"
        raise NothingToDoError(msg)
    return cells


def to_cell(planned: PlannedCell, base: BaseInterpreter) -> tuple[Cell | None, BaseInterpreter | None, str | None]:
    """A concrete cell and the interpreter to build it from, or the reason this machine cannot."""
    python = planned.pins.get("python", SYSTEM)
    interpreter = base
    if python != SYSTEM:
        found = find_python(python)
        if found is None:
            return None, None, f"no Python {python} interpreter on this machine (nothing is downloaded)"
        interpreter = base_interpreter(found)
    torch = planned.pins.get("torch", SYSTEM)
    if "torch" in planned.pins and torch == SYSTEM and interpreter.torch is None:
        return None, None, f"torch 'system' but {interpreter.executable} has no torch"
    packages = {k: v for k, v in planned.pins.items() if k not in NON_PACKAGE_AXES}
    cell = Cell(
        python=interpreter.version,
        torch=(interpreter.torch or "none") if torch == SYSTEM else torch,
        torch_source=SYSTEM if torch == SYSTEM else "pinned",
        packages=packages,
        python_source=python,
    )
    return cell, interpreter, None


def _named_cell(planned: PlannedCell, base: BaseInterpreter) -> Cell:
    """The cell a planned combination is called by, whether or not this machine can build it."""
    return to_cell(planned, base)[0] or _placeholder(planned, base)


def _placeholder(planned: PlannedCell, base: BaseInterpreter) -> Cell:
    """A cell to name in records when the real one cannot even be described (no such Python)."""
    packages = {k: v for k, v in planned.pins.items() if k not in NON_PACKAGE_AXES}
    torch = planned.pins.get("torch", SYSTEM)
    return Cell(
        python=planned.pins.get("python", base.version),
        torch=base.torch or "none" if torch == SYSTEM else torch,
        torch_source=SYSTEM if torch == SYSTEM else "pinned",
        packages=packages,
        python_source=planned.pins.get("python", SYSTEM),
    )


class _Progress:
    """One line per finished unit: ``[done/total, n running] what: outcome``, cut to the console's width."""

    def __init__(self, total: int, echo: Echo) -> None:
        self.total, self.done, self.running, self.echo = total, 0, 0, echo
        self.lock = threading.Lock()

    def start(self) -> None:
        with self.lock:
            self.running += 1

    def finish(self, text: str) -> None:
        with self.lock:
            self.running -= 1
            self.done += 1
            running = f", {self.running} running" if self.running else ""
            self.echo(cut(f"[{self.done}/{self.total}{running}] {text}", WIDTH))


def _units(
    config: Config,
    request: MatrixRequest,
    cells: list[tuple[PlannedCell, Cell, BaseInterpreter]],
    backend: Literal["cuda", "cpu"],
) -> list[Unit]:
    repros = [config.repro(name) for name in (request.repros or tuple(config.repros))]
    units: list[Unit] = []
    for planned, cell, interpreter in cells:
        for repro in repros:
            if not planned.runs_repro(repro.name):
                continue
            for form in select_forms(repro, backend, request.forms):
                for fix in select_fixes(repro, request.fixes):
                    fix_cell = (
                        dataclasses.replace(cell, packages={**cell.packages, **fix.override}) if fix.override else cell
                    )
                    units.extend(
                        Unit(
                            planned=planned,
                            cell=fix_cell,
                            interpreter=interpreter,
                            repro=repro,
                            form=form,
                            fix=fix,
                            repeat=r,
                        )
                        for r in range(request.repeat)
                    )
    return units


def listed_cells(config: Config, request: MatrixRequest, base: BaseInterpreter, envs_dir: Path) -> list[dict[str, str]]:
    """The cells with stable ids and their status, for ``--list`` and a CI fan-out (``--list-json``)."""
    index = IndexCache(envs_dir / "index-cache.json", base.executable)
    listed = []
    for planned in plan_cells(config, request, base, index):
        cell, _, why = to_cell(planned, base)
        cell = cell or _placeholder(planned, base)
        status = (
            f"not installable together: {planned.blocked}"
            if planned.blocked
            else (f"cannot build here: {why}" if why else "ok")
        )
        entry = {"cell": cell.id, "status": status, "args": _cell_args(planned)}
        if planned.label:
            entry["label"] = planned.label
        listed.append(entry)
    return listed


def _cell_args(planned: PlannedCell) -> str:
    """Harness arguments that select exactly this cell."""
    return " ".join(f"--select {axis}={value}" for axis, value in planned.pins.items())


def run_matrix(
    config: Config,
    request: MatrixRequest,
    *,
    base: BaseInterpreter,
    store: Store,
    envs_dir: Path,
    environ: Mapping[str, str],
    echo: Echo = print,
    cells: Sequence[str] = (),
    stats: RunStats | None = None,
) -> list[Record]:
    """Plan, build, run; returns one record per unit (stored ones included)."""
    if request.executor is not None:  # each of the engine's workers comes back here with executor=None
        local = dataclasses.replace(request, executor=None)
        return request.executor.run_matrix(
            config,
            local,
            base=base,
            store=store,
            envs_dir=envs_dir,
            environ=environ,
            echo=echo,
            cells=cells,
            stats=stats,
        )
    op_cache = cache_root(envs_dir, environ)
    if op_cache is not None:
        for entry in prune(op_cache):
            echo(f"op cache over {DEFAULT_MAX_BYTES >> 30} GiB: removed {entry.name} (least recently used)")
    index = IndexCache(envs_dir / "index-cache.json", base.executable)
    planned = plan_cells(config, request, base, index)
    if cells:
        planned = [p for p in planned if _named_cell(p, base).id in cells]
        if not planned:
            msg = f"--cell {', '.join(cells)}: no such cell; list them with --list"
            raise NothingToDoError(msg)
    resolved: list[tuple[PlannedCell, Cell, BaseInterpreter]] = []
    records: list[Record] = []
    blocked: list[tuple[PlannedCell, Cell, str]] = []
    for cell_plan in planned:
        cell, interpreter, why = to_cell(cell_plan, base)
        reason = cell_plan.blocked or why
        if reason or cell is None or interpreter is None:
            blocked.append((cell_plan, cell or _placeholder(cell_plan, base), reason or "unknown"))
            continue
        resolved.append((cell_plan, cell, interpreter))
    backend = _backend(request, base)
    units = _units(config, request, resolved, backend)
    sandbox = request.confinement.open()  # no sandbox here stops the run before anything is built
    echo(
        f"{_count(len(planned), 'cell')} ({len(blocked)} not installable or not buildable here), "
        f"{_count(len(units), 'run')}, backend {backend}, {request.jobs} at a time"
    )
    for _, cell, reason in blocked:
        echo(f"  - {cell.id}: {reason}")
    envs = _build_envs(units, envs_dir, echo, request.jobs)
    overlays, patch_failures = _prepare_overlays(units, envs)
    tools, tool_failures = _prepare_tools(units, envs, envs_dir)
    # Bad input has had its chance to stop the run: from here on records are written.
    for cell_plan, cell, reason in blocked:
        kind = "NotInstallable" if cell_plan.blocked else "NotBuildableHere"
        units_of = _units(config, request, [(cell_plan, cell, base)], backend)
        text = f"not installable together: {reason}" if cell_plan.blocked else f"cannot build here: {reason}"
        records.extend(
            unrun_record(
                u.repro, u.form, u.fix, cell, text, store, kind=kind, repeat=u.repeat, nproc=u.nproc, rerun=u.rerun
            )
            for u in units_of
        )
    runnable = [
        u
        for u in units
        if isinstance(envs[u.cell.id], CellEnv)
        and (u.cell.id, u.fix.name) not in patch_failures
        and (u.cell.id not in tool_failures or not u.form.pytest)
    ]
    for unit in units:
        env = envs[unit.cell.id]
        failure = patch_failures.get((unit.cell.id, unit.fix.name))
        if isinstance(env, EnvBuildError):
            records.append(
                unrun_record(
                    unit.repro,
                    unit.form,
                    unit.fix,
                    unit.cell,
                    str(env),
                    store,
                    kind="EnvBuildError",
                    repeat=unit.repeat,
                    nproc=unit.nproc,
                    rerun=unit.rerun,
                )
            )
        elif unit.form.pytest and unit.cell.id in tool_failures:
            records.append(
                unrun_record(
                    unit.repro,
                    unit.form,
                    unit.fix,
                    unit.cell,
                    tool_failures[unit.cell.id],
                    store,
                    kind="EnvBuildError",
                    repeat=unit.repeat,
                    nproc=unit.nproc,
                    rerun=unit.rerun,
                )
            )
        elif failure is not None:
            records.append(
                unrun_record(
                    unit.repro,
                    unit.form,
                    unit.fix,
                    unit.cell,
                    failure,
                    store,
                    kind=PATCH_ERROR,
                    repeat=unit.repeat,
                    nproc=unit.nproc,
                    rerun=unit.rerun,
                )
            )
    stats = stats if stats is not None else RunStats()
    order = {id(unit): index for index, unit in enumerate(runnable)}
    plain = [u for u in runnable if u.fix.patch is None]
    candidates = [u for u in runnable if u.fix.patch is not None]
    # The counter counts what will run: the patch runs only once the unpatched runs showed which apply.
    progress = _Progress(len(plain), echo)
    done = _run_units(plain, envs, overlays, tools, request, store, environ, backend, echo, stats, sandbox, progress)
    patched = _applicable(candidates, dict(zip(map(id, plain), done, strict=True)), plain, echo)
    progress.total += len(patched)
    skipped = len(candidates) - len(patched)
    stats.not_applicable += skipped
    if candidates:
        echo(
            f"{_count(len(patched), 'patched run')} next" + (f" ({skipped} not applicable, not run)" if skipped else "")
        )
    done_patched = _run_units(
        patched, envs, overlays, tools, request, store, environ, backend, echo, stats, sandbox, progress
    )
    ran = sorted(
        [*zip(plain, done, strict=True), *zip(patched, done_patched, strict=True)], key=lambda p: order[id(p[0])]
    )
    records.extend(record for _, record in ran)
    return records


def plan_units(
    config: Config, request: MatrixRequest, *, base: BaseInterpreter, envs_dir: Path, cells: Sequence[str] = ()
) -> list[Unit]:
    """The units ``run_matrix`` would run for these cells (all buildable ones when empty), nothing built or run: what
    an engine names in the ENV_ERROR records of a worker it lost."""
    index = IndexCache(envs_dir / "index-cache.json", base.executable)
    planned = [p for p in plan_cells(config, request, base, index) if not cells or _named_cell(p, base).id in cells]
    resolved = []
    for cell_plan in planned:
        cell, interpreter, why = to_cell(cell_plan, base)
        if cell is not None and interpreter is not None and not (cell_plan.blocked or why):
            resolved.append((cell_plan, cell, interpreter))
    return _units(config, request, resolved, _backend(request, base))


def _imports(record: Record) -> set[str] | None:
    """Distributions a run imported, as its own report said (None when it never got to say)."""
    if record.versions_source == "installed" or record.outcome == Outcome.ENV_ERROR.value:
        return None
    return {canonicalize_name(name) for name in record.versions}


def _applicable(patched: list[Unit], done: Mapping[int, Record], plain: list[Unit], echo: Echo) -> list[Unit]:
    """The patch units worth running: a patch whose packages the form never imports in this cell (a Lightning
    patch on the pure-DeepSpeed form) cannot change its outcome, so it is said once and not run. Known from
    the run of an unpatched fix of the same cell and form (``none`` first); without one, the unit runs."""
    imported: dict[tuple[str, str], set[str]] = {}
    for unit in plain:
        found = _imports(done[id(unit)])
        if found is not None:
            imported.setdefault((unit.cell.id, unit.form.name), set()).update(found)
    kept, said = [], set()
    for unit in patched:
        assert unit.fix.patch is not None
        seen = imported.get((unit.cell.id, unit.form.name))
        touched = sorted({path.parts[0] for path in patched_paths(unit.fix.patch, unit.fix.patch_strip)})
        if seen is None or any(canonicalize_name(top) in seen for top in touched):
            kept.append(unit)
            continue
        if (unit.form.name, unit.fix.name) not in said:
            said.add((unit.form.name, unit.fix.name))
            echo(
                f"{unit.repro.name} {unit.form.name} {unit.fix.name}: not applicable, not run — the form never "
                f"imports {', '.join(touched)}, which the patch changes"
            )
    return kept


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _backend(request: MatrixRequest, base: BaseInterpreter) -> Literal["cuda", "cpu"]:
    if request.backend != "auto":
        return request.backend
    return "cuda" if base.torch and detect_cuda(Path(base.executable)) else "cpu"


def _build_envs(units: list[Unit], envs_dir: Path, echo: Echo, jobs: int = 1) -> dict[str, CellEnv | EnvBuildError]:
    """One env per distinct cell, ``jobs`` built at a time (uv and pip both lock their caches)."""
    first = {unit.cell.id: unit for unit in reversed(units)}
    ordered = [first[cell_id] for cell_id in dict.fromkeys(u.cell.id for u in units)]

    def build(unit: Unit) -> CellEnv | EnvBuildError:
        def starting() -> None:
            echo(f"cell {unit.cell.id}: building ({_packages(unit.cell)}) …")

        try:
            with heartbeat(echo, f"building cell {unit.cell.id}"):
                env = ensure_env(unit.cell, unit.interpreter, envs_dir, on_build=starting)
        except EnvBuildError as exc:
            echo(f"cell {unit.cell.id}: build failed, its runs are ENV_ERROR: {redact(str(exc).splitlines()[0])}")
            return exc
        echo(f"cell {unit.cell.id}: {'reused' if env.reused else 'built'} in {env.build_seconds:.1f} s")
        return env

    built = _in_parallel(build, ordered, max(1, jobs))  # a Ctrl-C stops the running builds, starts no other
    return {unit.cell.id: env for unit, env in zip(ordered, built, strict=True)}


def _packages(cell: Cell) -> str:
    """What a cell installs, as a build line says it."""
    torch = "torch from the base interpreter" if cell.torch_source == SYSTEM else f"torch {cell.torch}"
    return redact(", ".join([*(f"{name} {pin}" for name, pin in cell.packages.items()), torch]))


def _prepare_overlays(
    units: list[Unit], envs: Mapping[str, CellEnv | EnvBuildError]
) -> tuple[dict[tuple[str, str], Path], dict[tuple[str, str], str]]:
    """Apply every patch fix before any run.

    A patch that cannot be used in any of its cells (not a diff, a package the cells do not have) is bad input:
    the run stops with nothing done. One whose hunks do not match a release's code (a patch written for
    other releases) runs where it applies; elsewhere its runs are ENV_ERROR with the reason, also when that
    is every cell of this run (one cell, say: ``nox -s repro_gan`` on the newest release).
    """
    overlays: dict[tuple[str, str], Path] = {}
    failures: dict[tuple[str, str], str] = {}
    mismatched: set[tuple[str, str]] = set()  # the patch is fine, this release's code is not what it expects
    for unit in units:
        env = envs[unit.cell.id]
        key = (unit.cell.id, unit.fix.name)
        if unit.fix.patch is None or not isinstance(env, CellEnv) or key in overlays or key in failures:
            continue
        try:
            overlays[key] = prepare_overlay(env, unit.fix)
        except PatchDoesNotApplyError as exc:
            failures[key] = str(exc)
            mismatched.add(key)
        except ConfigError as exc:
            failures[key] = str(exc)
    for fix in {unit.fix.name for unit in units if unit.fix.patch is not None}:
        tried = [key for key in (*overlays, *failures) if key[1] == fix]
        unusable = [key for key in tried if key in failures and key not in mismatched]
        if tried and len(unusable) == len(tried):
            raise ConfigError(failures[unusable[0]])
    return overlays, failures


def _prepare_tools(
    units: list[Unit], envs: Mapping[str, CellEnv | EnvBuildError], envs_dir: Path
) -> tuple[dict[str, tuple[Path, ...]], dict[str, str]]:
    """pytest for every cell a ``--pytest`` run needs it in (cells.tools): the folders to add to those runs'
    PYTHONPATH, and the cells where it could not be had (their runs are ENV_ERROR with the reason)."""
    tools: dict[str, tuple[Path, ...]] = {}
    failures: dict[str, str] = {}
    for unit in units:
        env = envs[unit.cell.id]
        if not unit.form.pytest or not isinstance(env, CellEnv) or unit.cell.id in tools or unit.cell.id in failures:
            continue
        try:
            folder = pytest_folder(env, envs_dir)
        except (EnvBuildError, ToolError) as exc:
            failures[unit.cell.id] = f"pytest could not be installed for this cell: {exc}"
            continue
        tools[unit.cell.id] = (folder,) if folder is not None else ()
    return tools, failures


def _describe(record: Record, unit: Unit, reused: bool, *, with_cell: bool) -> str:
    sig = record.signature
    label = f" {sig.id} {known_name(record) or sig.text}" if sig else ""
    stored = " (stored)" if reused else f" [{record.wall_seconds:.1f} s]"
    where = f"{unit.cell.id} " if with_cell else ""
    outcome = Outcome(record.outcome)
    return f"{where}{unit.repro.name} {unit.form.name} {unit.fix.name}: {outcome.glyph} {outcome.value}{stored}{label}"


def gpu_count() -> int:
    """GPUs this host shows (nvidia-smi -L), 0 without a driver."""
    try:
        done = run_tool(["nvidia-smi", "-L"], what="counting GPUs", timeout=30, check=False)
    except ToolError:
        return 0
    return sum(1 for line in done.stdout.splitlines() if line.startswith("GPU "))


def _job_env(slot: int, jobs: int, backend: str, gpus: int) -> dict[str, str]:
    """Each parallel job's share: its own GPU on a GPU host (shared round-robin when jobs > GPUs),
    its share of the cores on the CPU."""
    if jobs <= 1:
        return {}
    threads = {"OMP_NUM_THREADS": str(max(1, (os.cpu_count() or 1) // jobs))}
    if backend == "cuda" and gpus > 0:
        return {**threads, "CUDA_VISIBLE_DEVICES": str(slot % gpus)}
    return threads


def job_cpus(slot: int, jobs: int, per_run: int, allowed: Sequence[int]) -> tuple[int, ...]:
    """The cores job slot ``slot``'s runs are pinned to: ``per_run`` cores of its own, the harness keeping the
    first allowed core when there are more cores than the jobs need; () when pinning is off.

    Why: a small model's GPU step is bound by the host. Unpinned, three repeats of one H200 cell had median
    steps 12.7 % apart (coefficient of variation); with the run on one core of its own, 2.2 %.
    """
    cores = sorted(allowed)
    if per_run <= 0 or not cores:
        return ()
    spare = cores[1:] if len(cores) > jobs * per_run else cores
    start = slot * per_run
    return tuple(sorted({spare[(start + i) % len(spare)] for i in range(min(per_run, len(spare)))}))


def _allowed_cpus() -> list[int]:
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux: no pinning
        return []


def _run_units(
    units: list[Unit],
    envs: Mapping[str, CellEnv | EnvBuildError],
    overlays: Mapping[tuple[str, str], Path],
    tools: Mapping[str, tuple[Path, ...]],
    request: MatrixRequest,
    store: Store,
    environ: Mapping[str, str],
    backend: str,
    echo: Echo,
    stats: RunStats,
    sandbox: Sandbox | None,
    progress: _Progress,
) -> list[Record]:
    per_run = request.cpus_per_run if request.cpus_per_run is not None else (1 if backend == "cuda" else 0)
    allowed = _allowed_cpus()
    with_cell = len({unit.cell.id for unit in units}) > 1
    gpus = gpu_count() if backend == "cuda" and request.jobs > 1 else 0
    slots: list[int] = list(range(max(1, request.jobs)))
    slot_lock = threading.Lock()

    def run(unit: Unit) -> Record:
        env = envs[unit.cell.id]
        assert isinstance(env, CellEnv)
        with slot_lock:
            slot = slots.pop()
        try:
            spec = RunSpec(
                repro=unit.repro,
                form=unit.form,
                fix=unit.fix,
                env=env,
                repeat=unit.repeat,
                timeout=request.timeout,
                overlay=overlays.get((unit.cell.id, unit.fix.name)),
                extra_env=_job_env(slot, request.jobs, backend, gpus),
                cpus=job_cpus(slot, request.jobs, per_run, allowed),
                sandbox=sandbox,
                matrix_cell=_matrix_cell_id(unit),
                nproc=unit.nproc,
                rerun=unit.rerun,
                tools=tools.get(unit.cell.id, ()) if unit.form.pytest else (),
            )
            progress.start()
            stored = (
                None
                if request.fresh
                else store.find(spec.key, unit.repro.name, spec.cell_id, unit.form.name, unit.fix.name, unit.repeat)
            )
            record = stored or execute(spec, store, environ=environ, echo=lambda line: echo(cut(line, WIDTH)))
            with slot_lock:
                if stored is None:
                    stats.executed += 1
                else:
                    stats.reused += 1
            progress.finish(_describe(record, unit, stored is not None, with_cell=with_cell))
            return record
        finally:
            with slot_lock:
                slots.append(slot)

    if request.jobs <= 1:
        return [run(unit) for unit in units]
    return _in_parallel(run, units, request.jobs)


def _in_parallel(run: Callable[[_T], _R], units: Sequence[_T], jobs: int) -> list[_R]:
    """``run`` over ``units`` (runs, cell builds), ``jobs`` at a time, in order; on an interrupt every running
    child is stopped and no further unit starts (see ``util.stop.stoppable_children``)."""
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=jobs)
    try:
        # on an interrupt: cancel the units not started, wait for the running ones to stop their children
        with stoppable_children(on_interrupt=lambda: pool.shutdown(wait=True, cancel_futures=True)):
            return list(pool.map(run, units))
    finally:
        pool.shutdown(wait=True)


def _matrix_cell_id(unit: Unit) -> str:
    """The row a run belongs to: an override fix runs in a cell of its own but reports beside its row; a run of
    several ranks is a row of its own (``_nproc-N``)."""
    cell = unit.cell
    if unit.fix.override:
        base_packages = {k: v for k, v in unit.planned.pins.items() if k not in NON_PACKAGE_AXES}
        cell = dataclasses.replace(unit.cell, packages=base_packages)
    return str(run_cell(cell, unit.nproc)["id"])


def cell_ids(config_path: str, base_python: str) -> list[str]:
    """Ids of the matrix's buildable cells, answered from the index cache (for listing sessions)."""
    config = load_config(Path(config_path))
    base = base_interpreter(base_python)
    envs_dir = Path(os.environ.get("REPROBISECT_ENVS", ".cells"))
    return [c["cell"] for c in listed_cells(config, MatrixRequest(), base, envs_dir) if c["status"] == "ok"]
