"""``reprobisect matrix``: repros (or one script) across the matrix's cells, one venv per cell; ``--list`` and
``--list-json`` print the cells instead (the latter as a GitHub Actions matrix)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import Literal

from reprobisect.cells.base import base_interpreter
from reprobisect.commands.engine_options import EngineOptions, add_executor, engine_summary
from reprobisect.commands.options import (
    CommonOptions,
    Subparsers,
    add_backend,
    add_common,
    add_fixes,
    add_forms,
    add_jobs,
    add_nproc,
    add_repeat,
    add_timeout,
    checked,
    number_option,
    prepare,
    run_context,
    split,
)
from reprobisect.commands.output import print_runs
from reprobisect.commands.script_options import ScriptOptions, add_script_options, with_script
from reprobisect.config.expand import MAX_CELLS
from reprobisect.config.load import Config, load_config
from reprobisect.errors import ConfigError
from reprobisect.model.record import Record
from reprobisect.report.summary import markdown_summary
from reprobisect.run.context import RunContext
from reprobisect.run.matrix_plan import listed_cells
from reprobisect.run.matrix_request import MatrixRequest
from reprobisect.run.matrix_run import run_matrix
from reprobisect.util.bounds import CELLS
from reprobisect.util.files import write_atomic
from reprobisect.util.invocation import rerun_head, rerun_words
from reprobisect.util.neutral import command_line
from reprobisect.util.shell import shown_argv

__all__ = [
    "MatrixOptions",
    "RunOptions",
    "add_run_options",
    "axis_values",
    "matrix_request",
    "own_command",
    "run_and_summarize",
    "run_from_args",
    "setup_arguments",
    "summarize_runs",
]


def setup_arguments(subparsers: Subparsers) -> None:
    """Add ``matrix`` and its options."""
    parser = subparsers.add_parser("matrix", help="run repros across the matrix's cells (one venv per cell)")
    parser.add_argument("--repro", action="append", help="repro name(s) from matrix.yaml; default: all")
    add_script_options(parser)
    add_run_options(parser)
    parser.add_argument("--cell", action="append", default=[], help="run only the cell(s) with this id")
    parser.add_argument("--list", action="store_true", help="list the cells with their ids and stop")
    parser.add_argument("--list-json", action="store_true", help="print the cells as a GitHub Actions matrix and stop")
    add_common(parser)
    parser.set_defaults(run=run_from_args, script_args=())


def add_run_options(parser: argparse.ArgumentParser) -> None:
    """The options ``matrix`` and ``triage`` share: which forms, fixes and cells, how many at a time, how often."""
    add_backend(parser)
    parser.add_argument(
        "--select", action="append", default=[], help="keep cells where AXIS=PATTERN, e.g. 'deepspeed=0.18.*'"
    )
    parser.add_argument("--python", help="replace the python axis (comma-separated values)")
    add_nproc(parser)
    add_fixes(parser)
    add_forms(parser)
    add_jobs(parser, help="runs at a time (each gets its GPU or share of cores)")
    add_repeat(parser)
    parser.add_argument("--fresh", action="store_true", help="re-run units that already have a record")
    parser.add_argument("--refresh-index", action="store_true", help="ask the index again for ranges and latest")
    add_timeout(parser)
    parser.add_argument(
        "--max-cells",
        type=number_option("--max-cells", CELLS),
        default=MAX_CELLS,
        metavar="N",
        help=f"plan at most N cells (default {MAX_CELLS}): a matrix whose axes expand to more is refused",
    )
    add_executor(parser)


def axis_values(value: str) -> tuple[str, ...]:
    """``0.16.4,0.19.8`` is two values; a specifier such as ``>=0.16,<0.20`` is one."""
    if value.startswith(("<", ">", "=", "!", "~")):
        return (value,)
    return tuple(v.strip() for v in value.split(",") if v.strip())


@dataclasses.dataclass(frozen=True, kw_only=True)
class RunOptions:
    """``add_run_options``'s group, read once: the options ``matrix`` and ``triage`` share."""

    backend: Literal["auto", "cuda", "cpu"] = "auto"
    select: tuple[str, ...] = ()
    python: str | None = None  # replaces the python axis
    nproc: str | None = None  # replaces the nproc axis
    fixes: tuple[str, ...] = ()  # --fix, split
    forms: tuple[str, ...] = ()  # --form, split
    jobs: int = 1
    repeat: int = 1
    fresh: bool = False
    refresh_index: bool = False
    timeout: float | None = None
    max_cells: int = MAX_CELLS
    engine: EngineOptions = dataclasses.field(default_factory=EngineOptions)

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> RunOptions:
        """The group as parsed; --python is checked as every pin is (``checked``)."""
        return cls(
            backend=args.backend,
            select=tuple(args.select),
            python=checked(args.python, "--python"),
            nproc=args.nproc,
            fixes=split(args.fix),
            forms=split(args.form),
            jobs=args.jobs,
            repeat=args.repeat,
            fresh=args.fresh,
            refresh_index=args.refresh_index,
            timeout=args.timeout,
            max_cells=args.max_cells,
            engine=EngineOptions.from_args(args),
        )


@dataclasses.dataclass(frozen=True, kw_only=True)
class MatrixOptions:
    """``matrix``'s command line, read once."""

    repros: tuple[str, ...] = ()  # --repro, split; default: all
    script: ScriptOptions = dataclasses.field(default_factory=ScriptOptions)
    run: RunOptions = dataclasses.field(default_factory=RunOptions)
    cells: tuple[str, ...] = ()  # --cell
    list: bool = False
    list_json: bool = False
    common: CommonOptions

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> MatrixOptions:
        """The command line as parsed."""
        common = CommonOptions.from_args(args)
        return cls(
            repros=split(args.repro),
            script=ScriptOptions.from_args(args, script_args=args.script_args),
            run=RunOptions.from_args(args),
            cells=tuple(args.cell),
            list=args.list,
            list_json=args.list_json,
            common=common,
        )


def matrix_request(
    options: RunOptions,
    common: CommonOptions,
    repros: tuple[str, ...],
    *,
    base_axes: dict[str, tuple[str, ...]] | None = None,
) -> MatrixRequest:
    """The options as a MatrixRequest; contradictions are refused here, before anything is planned. ``base_axes``
    replace matrix.yaml's axes (triage starts from the default cell) before the command line's do."""
    axes = dict(base_axes or {})
    given = {**common.pins, "python": options.python, "nproc": options.nproc}
    axes.update({name: axis_values(value) for name, value in given.items() if value})
    if options.jobs < 1 or options.repeat < 1:
        msg = f"--jobs {options.jobs} / --repeat {options.repeat}: both must be at least 1"
        raise ConfigError(msg)
    return MatrixRequest(
        repros=repros,
        backend=options.backend,
        axes=axes,
        select=options.select,
        fixes=options.fixes,
        forms=options.forms,
        jobs=options.jobs,
        repeat=options.repeat,
        fresh=options.fresh,
        refresh_index=options.refresh_index,
        timeout=options.timeout,
        cpus_per_run=common.cpus_per_run,
        confinement=common.confinement,
        use_includes=base_axes is None,
        max_cells=options.max_cells,
    )


def run_from_args(args: argparse.Namespace) -> int:
    """List the cells, or run the selection, print the table and write ``summary-matrix.md``; 0 whatever the
    outcomes."""
    options = MatrixOptions.from_args(args)
    common, script = options.common, options.script
    prepare(common)
    if (script.script or script.pytest) and options.repros:
        msg = "--script/--pytest and --repro contradict each other: run canonical repros or a script, not both"
        raise ConfigError(msg)
    config, made = with_script(
        load_config(common.config),
        script,
        timeout=options.run.timeout,
        repros=options.repros,
        rerun=tuple(rerun_head("triage", ["triage"])),
    )
    request = matrix_request(options.run, common, made or options.repros)
    if options.list or options.list_json:
        cells = listed_cells(config, request, base_interpreter(common.base_python), common.envs)
        print(
            json.dumps({"include": cells})
            if options.list_json
            else "\n".join(f"{c['cell']}  {c['status']}" for c in cells)
        )
        return 0
    ctx = run_context(common, options.run.engine.engine())
    run_and_summarize(
        config,
        request,
        ctx,
        common.out,
        title="Matrix",
        summary="summary-matrix.md",
        cells=options.cells,
        command=own_command("matrix"),
    )
    return 0


def own_command(name: str) -> str:
    """The command that re-runs this process's command ``name`` with the options it was given, where it runs (nox's
    session of that name in a checkout, ``reprobisect NAME`` installed)."""
    return command_line(rerun_words(name, [name], shown_argv(sys.argv[2:])))


def run_and_summarize(
    config: Config,
    request: MatrixRequest,
    ctx: RunContext,
    out: Path,
    *,
    title: str,
    summary: str,
    cells: tuple[str, ...] = (),
    command: str,
) -> tuple[list[Record], Path]:
    """Run the request where ``ctx`` says, print the table (and what the engine says) and write the Markdown summary
    under ``out``; returns the records and the summary's path. ``command``: the one that re-runs it (``own_command``,
    or what the caller knows better: ``corpus`` runs ``triage`` for each entry, and its own argv would re-run the
    corpus command)."""
    records = run_matrix(config, request, ctx, cells=cells)
    return records, summarize_runs(records, ctx, out, title=title, summary=summary, command=command)


def summarize_runs(
    records: list[Record], ctx: RunContext, out: Path, *, title: str, summary: str, command: str
) -> Path:
    """Print the table of ``records`` (and what the engine says) and write the Markdown summary under ``out``;
    returns its path (a grid search runs its waves itself, then summarizes them as a matrix run is)."""
    print_runs(records)
    for line in engine_summary(ctx.executor):
        print(line)
    path = out / summary
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, markdown_summary(records, title=title, command=command), what="the summary")
    print(f"\nRecords: {out / 'records'}  Summary: {path}")
    return path
