"""``reprobisect matrix``: repros (or one script) across the matrix's cells, one venv per cell; ``--list`` and
``--list-json`` print the cells instead (the latter as a GitHub Actions matrix)."""

from __future__ import annotations

import argparse
import dataclasses
import json

from reprobisect.cells.base import base_interpreter
from reprobisect.commands.options import (
    REPROS,
    CommonOptions,
    Subparsers,
    add_common,
    prepare,
    run_context,
    split,
)
from reprobisect.commands.output import own_command, run_and_summarize
from reprobisect.commands.run_options import RunOptions, add_run_options, matrix_request
from reprobisect.commands.script_options import ScriptOptions, add_script_options, with_script
from reprobisect.config.load import load_config
from reprobisect.errors import ConfigError
from reprobisect.run.matrix_plan import listed_cells
from reprobisect.util.invocation import rerun_head

__all__ = ["MatrixOptions", "run_from_args", "setup_arguments"]


def setup_arguments(subparsers: Subparsers) -> None:
    """Add ``matrix`` and its options."""
    parser = subparsers.add_parser("matrix", help="run repros across the matrix's cells (one venv per cell)")
    REPROS.add_to(parser, "repro", "repro name(s) from matrix.yaml; default: all")
    add_script_options(parser)
    add_run_options(parser)
    parser.add_argument("--cell", action="append", default=[], help="run only the cell(s) with this id")
    parser.add_argument("--list", action="store_true", help="list the cells with their ids and stop")
    parser.add_argument("--list-json", action="store_true", help="print the cells as a GitHub Actions matrix and stop")
    add_common(parser)
    parser.set_defaults(run=run_from_args, script_args=())


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
