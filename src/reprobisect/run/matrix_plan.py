"""The plan phase of a matrix run: the cells a request selects, the units to run in them, the backend.

A unit is (cell, repro, form, fix, repeat). Planning builds nothing and writes nothing: an unknown axis, cell
or selection stops the run here. Cells this machine cannot build (no such Python, packages that do not
install together) are planned too, so that their units get records that say why.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from reprobisect.cells.base import BaseInterpreter, base_interpreter
from reprobisect.cells.index import IndexCache
from reprobisect.cells.pythons import find_python
from reprobisect.config.expand import NON_PACKAGE_AXES, PINNED_AXES, RANKS_AXIS, PlannedCell, expand, matches
from reprobisect.config.load import Config, load_config
from reprobisect.config.script_imports import rules_for_scripts
from reprobisect.errors import ConfigError, NothingToDoError
from reprobisect.model.cell import SYSTEM, Cell, run_cell
from reprobisect.model.repro import Backend, Fix, Form, Repro
from reprobisect.run.context import RunContext
from reprobisect.run.matrix_request import MatrixRequest
from reprobisect.run.select import detect_cuda, select_fixes, select_forms

__all__ = [
    "BlockedCell",
    "MatrixPlan",
    "Unit",
    "cell_ids",
    "listed_cells",
    "named_cell",
    "plan_cells",
    "plan_matrix",
    "to_cell",
]


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
    def matrix_cell(self) -> str:
        """The row a run belongs to: an override fix runs in a cell of its own but reports beside its row; a run
        of several ranks is a row of its own (``_nproc-N``)."""
        cell = self.cell
        if self.fix.override:
            base_packages = {k: v for k, v in self.planned.pins.items() if k not in NON_PACKAGE_AXES}
            cell = dataclasses.replace(self.cell, packages=base_packages)
        return str(run_cell(cell, self.nproc)["id"])

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
        cell = self.matrix_cell.removesuffix(f"_nproc-{self.nproc}")
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
        if axis not in axes and values == (request.requires.get(axis),):
            continue  # a search's held pins, read from the cells it starts from, name the --require it carries
        if axis not in axes and axis != RANKS_AXIS:
            msg = f"--{axis}: {axis!r} is not an axis of {config.path.name} (axes: {', '.join(axes)})"
            raise ConfigError(msg)
        axes[axis] = values
    for name, version in request.requires.items():  # --require: an axis of one value that no matrix.yaml names
        if name in axes:
            msg = f"--require {name}=={version}: {name!r} is an axis of {config.path.name}; pin it with --{name}"
            raise ConfigError(msg)
        axes[name] = (version,)
    spec = dataclasses.replace(
        config.matrix, axes=axes, rules=rules_for_scripts(config.matrix.rules, _scripts(config, request))
    )
    if not request.use_includes:
        spec = dataclasses.replace(spec, include=())
    system_versions = {"torch": base.torch or "", "torchvision": base.torchvision or "", "python": base.version}
    available = lambda axis: index.versions(axis, prereleases=spec.prereleases, refresh=request.refresh_index)  # noqa: E731
    planned = expand(spec, available, system_versions=system_versions, max_cells=request.max_cells)
    cells = _select(planned, request.select, system_versions)
    if request.repros:  # an include entry for other repros would be a job with nothing to run
        cells = [c for c in cells if any(c.runs_repro(name) for name in request.repros)]
    if not cells:
        msg = "the selection leaves no cell; check --select and the axes"
        raise NothingToDoError(msg)
    return cells


def _scripts(config: Config, request: MatrixRequest) -> list[Path]:
    """Every file a run of the request may start (each form's script and fix script): a rule about a package's
    import holds only where one of them imports it."""
    repros = [config.repro(name) for name in (request.repros or tuple(config.repros))]
    forms = [form for repro in repros for form in repro.forms.values()]
    return [path for form in forms for path in (form.script, form.fix_script) if path is not None]


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


def named_cell(planned: PlannedCell, base: BaseInterpreter) -> Cell:
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


def _units(
    config: Config,
    request: MatrixRequest,
    cells: list[tuple[PlannedCell, Cell, BaseInterpreter]],
    backend: Backend,
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


@dataclasses.dataclass(frozen=True, kw_only=True)
class BlockedCell:
    """A planned cell that gets records but no run: not installable together, or not buildable here."""

    planned: PlannedCell
    cell: Cell  # the cell its records are filed under
    reason: str
    units: list[Unit]  # its runs, each to be recorded as ENV_ERROR with the reason


@dataclasses.dataclass(frozen=True, kw_only=True)
class MatrixPlan:
    """What a matrix run will do: every cell of the selection, the units of those this machine can build, and
    those it cannot (with their reasons)."""

    cells: list[PlannedCell]
    units: list[Unit]
    blocked: list[BlockedCell]
    backend: Backend


def plan_matrix(config: Config, request: MatrixRequest, ctx: RunContext, *, cells: Sequence[str] = ()) -> MatrixPlan:
    """The plan of a matrix run: cells (only those named in ``cells``, when any), their units, the backend.

    Nothing is built and nothing written; bad input (an unknown axis or cell, an empty selection) stops here.
    """
    base = ctx.base
    index = IndexCache(ctx.envs_dir / "index-cache.json", base.executable)
    planned = plan_cells(config, request, base, index)
    if cells:
        planned = [p for p in planned if named_cell(p, base).id in cells]
        if not planned:
            msg = f"--cell {', '.join(cells)}: no such cell; list them with --list"
            raise NothingToDoError(msg)
    resolved: list[tuple[PlannedCell, Cell, BaseInterpreter]] = []
    blocked: list[tuple[PlannedCell, Cell, str]] = []
    for cell_plan in planned:
        cell, interpreter, why = to_cell(cell_plan, base)
        reason = cell_plan.blocked or why
        if reason or cell is None or interpreter is None:
            blocked.append((cell_plan, cell or _placeholder(cell_plan, base), reason or "unknown"))
            continue
        resolved.append((cell_plan, cell, interpreter))
    backend = _backend(request, base)
    return MatrixPlan(
        cells=planned,
        units=_units(config, request, resolved, backend),
        blocked=[
            BlockedCell(
                planned=cell_plan,
                cell=cell,
                reason=reason,
                units=_units(config, request, [(cell_plan, cell, base)], backend),
            )
            for cell_plan, cell, reason in blocked
        ],
        backend=backend,
    )


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


def _backend(request: MatrixRequest, base: BaseInterpreter) -> Backend:
    if request.backend != "auto":
        return request.backend
    return "cuda" if base.torch and detect_cuda(Path(base.executable)) else "cpu"


def cell_ids(config_path: str, base_python: str) -> list[str]:
    """Ids of the matrix's buildable cells, answered from the index cache (for listing sessions)."""
    config = load_config(Path(config_path))
    base = base_interpreter(base_python)
    envs_dir = Path(os.environ.get("REPROBISECT_ENVS", ".cells"))
    return [c["cell"] for c in listed_cells(config, MatrixRequest(), base, envs_dir) if c["status"] == "ok"]
