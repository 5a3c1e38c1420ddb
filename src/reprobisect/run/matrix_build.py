"""The build phase of a matrix run: every cell's env, every patch overlay and every pytest folder, made before
any run starts, and a record for each unit that cannot run because one of them could not be had.

Bad input (a patch that fits none of its cells) stops the run here, with nothing written; what this machine
or a release cannot do (a cell that does not build, a patch written for other releases) becomes ENV_ERROR
records with the reason, so that the run phase only ever sees units that can start.
"""

from __future__ import annotations

import dataclasses
import threading
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path

from reprobisect import __version__
from reprobisect.cells.build_jail import BuildJail
from reprobisect.cells.envs import CellEnv, ensure_env
from reprobisect.cells.op_builds import DEFAULT_MAX_BYTES, OPS, cache_root
from reprobisect.cells.patches import PatchDoesNotApplyError, prepare_overlay
from reprobisect.cells.tools import pytest_folder
from reprobisect.errors import ConfigError, EnvBuildError, ToolError
from reprobisect.model.cell import SYSTEM, Cell, run_cell
from reprobisect.model.outcome import Outcome
from reprobisect.model.record import Record
from reprobisect.model.signature import PATCH_ERROR, Signature, normalize_message
from reprobisect.model.store import Store
from reprobisect.run.bytecode import BYTECODE, fill_bytecode, script_modules
from reprobisect.run.context import RunContext
from reprobisect.run.matrix_plan import MatrixPlan, Unit
from reprobisect.run.op_prebuild import SHM_OP, cell_ops, prebuild_ops
from reprobisect.run.sandbox import Sandbox
from reprobisect.util.clock import utc_now
from reprobisect.util.console import heartbeat
from reprobisect.util.echo import Echo
from reprobisect.util.redact import redact
from reprobisect.util.stop import in_parallel

__all__ = ["Prepared", "bound_op_cache", "prepare_units", "unbuilt_records", "unrun_record"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class Prepared:
    """What the units of a matrix run start in: each cell's env (or why it did not build), each patch fix's
    overlay per cell, the pytest folders of the cells a ``--pytest`` form runs in, and the sandbox."""

    envs: Mapping[str, CellEnv | EnvBuildError]
    overlays: Mapping[tuple[str, str], Path]  # (cell id, fix name) → the patched copy
    tools: Mapping[str, tuple[Path, ...]]  # cell id → folders for PYTHONPATH
    sandbox: Sandbox | None
    patch_failures: Mapping[tuple[str, str], str] = dataclasses.field(default_factory=dict)
    tool_failures: Mapping[str, str] = dataclasses.field(default_factory=dict)

    def why_not(self, unit: Unit) -> tuple[str, str] | None:
        """The kind and reason ``unit`` cannot run here (its cell did not build, pytest could not be had, its
        patch does not apply), or None when it can."""
        env = self.envs[unit.cell.id]
        if isinstance(env, EnvBuildError):
            return "EnvBuildError", str(env)
        if unit.form.pytest and unit.cell.id in self.tool_failures:
            return "EnvBuildError", self.tool_failures[unit.cell.id]
        failure = self.patch_failures.get((unit.cell.id, unit.fix.name))
        if failure is not None:
            return PATCH_ERROR, failure
        return None

    def env(self, unit: Unit) -> CellEnv:
        """The built env of a unit that can run."""
        env = self.envs[unit.cell.id]
        assert isinstance(env, CellEnv)
        return env


def bound_op_cache(ctx: RunContext) -> None:
    """Keep the shared op and byte-code caches under their bounds before a run adds to them (least recently used
    go first)."""
    op_cache = cache_root(ctx.envs_dir, ctx.environ)
    if op_cache is not None:
        for entry in OPS.prune(op_cache):
            ctx.echo(f"op cache over {DEFAULT_MAX_BYTES >> 30} GiB: removed {entry.name} (least recently used)")
    bytecode = BYTECODE.root(ctx.envs_dir, ctx.environ)
    if bytecode is not None:
        for entry in BYTECODE.prune(bytecode):
            ctx.echo(f"byte-code cache over {BYTECODE.default_max_bytes >> 30} GiB: removed {entry.name}")


def prepare_units(units: list[Unit], ctx: RunContext, *, jobs: int, sandbox: Sandbox | None) -> Prepared:
    """Build every cell the units need (``jobs`` at a time), then their patch overlays and pytest folders."""
    envs = _build_envs(units, ctx, jobs, BuildJail.within(sandbox))
    overlays, patch_failures = _prepare_overlays(units, envs)
    tools, tool_failures = _prepare_tools(units, envs, ctx.envs_dir)
    return Prepared(
        envs=envs,
        overlays=overlays,
        tools=tools,
        sandbox=sandbox,
        patch_failures=patch_failures,
        tool_failures=tool_failures,
    )


def unbuilt_records(plan: MatrixPlan, prepared: Prepared, store: Store) -> list[Record]:
    """An ENV_ERROR record for every unit that will not run: first those of cells that cannot be installed or
    built here, then, in the plan's order, those whose env, pytest or patch could not be had."""
    records: list[Record] = []
    for blocked in plan.blocked:
        kind = "NotInstallable" if blocked.planned.blocked else "NotBuildableHere"
        text = (
            f"not installable together: {blocked.reason}"
            if blocked.planned.blocked
            else f"cannot build here: {blocked.reason}"
        )
        records.extend(unrun_record(unit, text, store, kind=kind, cell=blocked.cell) for unit in blocked.units)
    for unit in plan.units:
        why = prepared.why_not(unit)
        if why is not None:
            records.append(unrun_record(unit, why[1], store, kind=why[0]))
    return records


def unrun_record(unit: Unit, reason: str, store: Store, *, kind: str, cell: Cell | None = None) -> Record:
    """An ENV_ERROR record for a unit that could not start: the cell did not build, or no rule allows it; filed
    under ``cell`` when given (a blocked cell's own, not an override fix's), else under the unit's.

    ``kind`` becomes the signature's exception (``EnvBuildError``, ``NotInstallable``); never a verdict. Each
    repeat gets its own record, as a run would, with the time it was decided: without one ``report --latest``
    would rank it below any older record of the same run.
    """
    cell = unit.cell if cell is None else cell
    form, fix = unit.form, unit.fix
    run_id = uuid.uuid4().hex[:12]
    decided_at = utc_now()
    filed = run_cell(cell, unit.nproc)
    log_path = store.log_path(unit.repro.name, str(filed["id"]), form.name, fix.name, unit.repeat, run_id)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    reason = redact(reason)  # a build's output may show an index URL's credentials: never written in clear
    log_path.write_text(reason + "\n", encoding="utf-8")
    record = Record(
        run_id=run_id,
        spec_key="",
        repro=unit.repro.name,
        form=form.name,
        fix=fix.name,
        precision=form.precision,
        repeat=unit.repeat,
        script=form.script.name,
        argv=[],
        cell=filed,
        versions=dict(cell.versions),
        versions_source="pinned",
        outcome=Outcome.ENV_ERROR.value,
        wall_seconds=0.0,
        log_path=str(log_path.relative_to(store.root)),
        harness_version=__version__,
        python=cell.python,
        signature=Signature(exception=kind, message=normalize_message(reason.splitlines()[0])),
        failing_step="setup",
        config={"reason": reason},
        fix_kind=fix.kind,
        matrix_cell=str(filed["id"]),
        nproc=unit.nproc,
        rerun=list(unit.rerun),
        started_at=decided_at,
        finished_at=decided_at,
    )
    store.write(record)
    return record


def _build_envs(units: list[Unit], ctx: RunContext, jobs: int, jail: BuildJail) -> dict[str, CellEnv | EnvBuildError]:
    """One env per distinct cell, ``jobs`` built at a time (uv and pip both lock their caches), each with the
    just-in-time ops its runs load built before any of them starts (``run/op_prebuild.py``); the wheels the
    harness builds for them are built in ``jail``, the runs' sandbox."""
    envs_dir, echo = ctx.envs_dir, ctx.echo
    first = {unit.cell.id: unit for unit in reversed(units)}
    ordered = [first[cell_id] for cell_id in dict.fromkeys(u.cell.id for u in units)]

    def build(unit: Unit) -> CellEnv | EnvBuildError:
        def starting() -> None:
            echo(f"cell {unit.cell.id}: building ({_packages(unit.cell)}) …")

        try:
            with heartbeat(echo, f"building cell {unit.cell.id}"):
                env = ensure_env(unit.cell, unit.interpreter, envs_dir, on_build=starting, jail=jail)
        except EnvBuildError as exc:
            echo(f"cell {unit.cell.id}: build failed, its runs are ENV_ERROR: {redact(str(exc).splitlines()[0])}")
            return exc
        echo(f"cell {unit.cell.id}: {'reused' if env.reused else 'built'} in {env.build_seconds:.1f} s")
        runs = _scripts([u for u in units if u.cell.id == unit.cell.id])
        _fill_bytecode(env, runs, ctx)
        _prebuild_ops(env, runs, ctx)
        return env

    built = in_parallel(build, ordered, max(1, jobs))  # a Ctrl-C stops the running builds, starts no other
    return {unit.cell.id: env for unit, env in zip(ordered, built, strict=True)}


def _scripts(units: list[Unit]) -> list[tuple[str, Mapping[str, str]]]:
    """The text of each unit's script and its form's variables; a package's own tests (``--pytest``) have none
    (what they load is theirs to say, in their runs), nor has a script that cannot be read (its run says why)."""
    runs = []
    for unit in units:
        if unit.form.pytest:
            continue
        try:
            runs.append((unit.form.script_for(unit.fix).read_text(encoding="utf-8", errors="replace"), unit.form.env))
        except OSError:
            continue
    return runs


def _fill_bytecode(env: CellEnv, runs: list[tuple[str, Mapping[str, str]]], ctx: RunContext) -> None:
    """Compile, once, the byte code of what ``runs`` (each a script's text and its form's variables) import where
    the cell's packages ship none (``run/bytecode.py``); say so when it did."""
    modules = script_modules(text for text, _ in runs)
    form_env = runs[0][1] if runs else {}
    with heartbeat(ctx.echo, f"checking the byte code of cell {env.cell.id}"):
        done = fill_bytecode(env, modules, form_env, ctx.environ, ctx.envs_dir)
    if done is None or done.reused:
        return
    if done.failure is not None:
        ctx.echo(f"cell {env.cell.id}: byte code not compiled ahead ({redact(done.failure)}); the runs compile it")
    elif done.lacking:
        ctx.echo(
            f"cell {env.cell.id}: {', '.join(done.lacking)} ship no byte code: compiled once for its runs "
            f"({done.loaded} modules, {done.seconds:.1f} s)"
        )


def _prebuild_ops(env: CellEnv, runs: list[tuple[str, Mapping[str, str]]], ctx: RunContext) -> None:
    """Build the ops ``runs`` will load in ``env`` now, so that no timed run compiles one; say what it cost."""
    for form_env, names in cell_ops(env, runs).items():
        with heartbeat(_first_says(ctx.echo, _why_ops(names)), f"building ops {', '.join(names)} for {env.cell.id}"):
            done = prebuild_ops(env, names, dict(form_env), ctx.environ)
        if done is None or done.reused:
            continue
        if done.failure is not None:
            ctx.echo(f"cell {env.cell.id}: ops {', '.join(names)} did not build ({done.failure}); the runs will try")
        else:
            ctx.echo(f"cell {env.cell.id}: ops {', '.join(names)} ready in {done.seconds:.1f} s, before its runs")


def _why_ops(names: Sequence[str]) -> str:
    """Why a cell's runs wait for these builds, in a line: a script that only imports DeepSpeed waits half a
    minute on two cores on its first run before anything of its own runs."""
    why = (
        ["DeepSpeed's CPU accelerator loads its comm op when a run starts torch.distributed"] if SHM_OP in names else []
    )
    named = [name for name in names if name != SHM_OP]
    if named:
        why.append(f"the script names {', '.join(named)}")
    return "; ".join(why) + ": built once, before the runs, and reused by later cells and runs"


def _first_says(echo: Echo, why: str) -> Echo:
    """``echo`` whose first line also says ``why`` (a build quick enough to print no line says nothing)."""
    said = threading.Event()

    def first(line: str) -> None:
        if not said.is_set():
            said.set()
            echo(line)
            echo(f"    ({why})")
        else:
            echo(line)

    return first


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
