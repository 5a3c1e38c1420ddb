"""``reprobisect matrix``: repros (or one script) across the matrix's cells, one venv per cell; ``--list`` and
``--list-json`` print the cells instead (the latter as a GitHub Actions matrix)."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

from reprobisect.cells.base import base_interpreter
from reprobisect.commands.options import (
    Subparsers,
    add_backend,
    add_common,
    add_executor,
    add_fixes,
    add_forms,
    add_nproc,
    add_script_options,
    add_timeout,
    confinement,
    engine_summary,
    prepare,
    run_context,
    split,
    with_script,
)
from reprobisect.commands.output import print_runs
from reprobisect.config.expand import PINNED_AXES
from reprobisect.config.load import Config, load_config
from reprobisect.errors import ConfigError
from reprobisect.model.record import Record
from reprobisect.report.summary import markdown_summary
from reprobisect.run.matrix_request import MatrixRequest
from reprobisect.run.matrix_run import run_matrix
from reprobisect.run.plan import listed_cells
from reprobisect.util.files import write_atomic

__all__ = ["add_run_options", "axis_values", "matrix_request", "run_and_summarize", "run_from_args", "setup_arguments"]


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
    parser.add_argument("--jobs", type=int, default=1, help="runs at a time (each gets its GPU or share of cores)")
    parser.add_argument("--repeat", type=int, default=1, help="run each unit N times")
    parser.add_argument("--fresh", action="store_true", help="re-run units that already have a record")
    parser.add_argument("--refresh-index", action="store_true", help="ask the index again for ranges and latest")
    add_timeout(parser)
    add_executor(parser)


def axis_values(value: str) -> tuple[str, ...]:
    """``0.16.4,0.19.8`` is two values; a specifier such as ``>=0.16,<0.20`` is one."""
    if value.startswith(("<", ">", "=", "!", "~")):
        return (value,)
    return tuple(v.strip() for v in value.split(",") if v.strip())


def matrix_request(
    args: argparse.Namespace, repros: tuple[str, ...], *, base_axes: dict[str, tuple[str, ...]] | None = None
) -> MatrixRequest:
    """The options as a MatrixRequest; contradictions are refused here, before anything is planned. ``base_axes``
    replace matrix.yaml's axes (triage starts from the default cell) before the command line's do."""
    axes = dict(base_axes or {})
    axes.update(
        {name: axis_values(getattr(args, name)) for name in (*PINNED_AXES, "python", "nproc") if getattr(args, name)}
    )
    if args.jobs < 1 or args.repeat < 1:
        msg = f"--jobs {args.jobs} / --repeat {args.repeat}: both must be at least 1"
        raise ConfigError(msg)
    return MatrixRequest(
        repros=repros,
        backend=args.backend,
        axes=axes,
        select=tuple(args.select),
        fixes=split(args.fix),
        forms=split(args.form),
        jobs=args.jobs,
        repeat=args.repeat,
        fresh=args.fresh,
        refresh_index=args.refresh_index,
        timeout=args.timeout,
        cpus_per_run=args.cpus_per_run,
        confinement=confinement(args),
        use_includes=base_axes is None,
    )


def run_from_args(args: argparse.Namespace) -> int:
    """List the cells, or run the selection, print the table and write ``summary-matrix.md``; 0 whatever the
    outcomes."""
    prepare(args)
    if (args.script or args.pytest) and args.repro:
        msg = "--script/--pytest and --repro contradict each other: run canonical repros or a script, not both"
        raise ConfigError(msg)
    config, made = with_script(
        load_config(args.config), args, args.script, repros=split(args.repro), rerun=("nox", "-s", "triage", "--")
    )
    request = matrix_request(args, made or split(args.repro))
    base = base_interpreter(args.base_python)
    if args.list or args.list_json:
        cells = listed_cells(config, request, base, args.envs)
        print(
            json.dumps({"include": cells})
            if args.list_json
            else "\n".join(f"{c['cell']}  {c['status']}" for c in cells)
        )
        return 0
    run_and_summarize(config, request, args, title="Matrix", summary="summary-matrix.md", cells=tuple(args.cell))
    return 0


def run_and_summarize(
    config: Config,
    request: MatrixRequest,
    args: argparse.Namespace,
    *,
    title: str,
    summary: str,
    cells: tuple[str, ...] = (),
    command: str | None = None,
) -> tuple[list[Record], Path]:
    """Run the request, print the table and write the Markdown summary under ``--out``; returns the records and
    the summary's path. ``command``: the one that re-runs it, when the caller knows it better than this process's
    own command line (``corpus`` runs ``triage`` for each entry: its own argv would re-run the corpus command)."""
    ctx = run_context(args)
    records = run_matrix(config, request, ctx, cells=cells)
    print_runs(records)
    for line in engine_summary(ctx.executor):
        print(line)
    path = args.out / summary
    path.parent.mkdir(parents=True, exist_ok=True)
    command = command or f"nox -s {args.command} -- " + shlex.join(sys.argv[2:])
    write_atomic(path, markdown_summary(records, title=title, command=command), what="the summary")
    print(f"\nRecords: {args.out / 'records'}  Summary: {path}")
    return records, path
