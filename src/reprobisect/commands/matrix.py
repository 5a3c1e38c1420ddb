"""``reprobisect matrix``: repros (or one script) across the matrix's cells, one venv per cell; ``--list`` and
``--list-json`` print the cells instead (the latter as a GitHub Actions matrix)."""

from __future__ import annotations

import argparse
import dataclasses
import json

from reprobisect.cells.base import base_interpreter
from reprobisect.commands.declared import Flag, add_fields, composed, option, read_fields
from reprobisect.commands.options import (
    REPROS,
    CommonOptions,
    Subparsers,
    add_common,
    prepare,
    run_context,
)
from reprobisect.commands.output import own_command, run_and_summarize
from reprobisect.commands.run_options import RunOptions, add_run_options, matrix_request
from reprobisect.commands.script_options import ScriptOptions, add_script_options, with_script
from reprobisect.config.load import load_config
from reprobisect.errors import ConfigError
from reprobisect.run.matrix_plan import listed_cells
from reprobisect.util.invocation import rerun_head

__all__ = ["MatrixOptions", "run_from_args", "setup_arguments"]


CELL = Flag.of("--cell", action="append", default=[], read=tuple)
LIST = Flag.of("--list", action="store_true")
LIST_JSON = Flag.of("--list-json", action="store_true")


@dataclasses.dataclass(frozen=True, kw_only=True)
class MatrixOptions:
    """``matrix``'s command line, read once; each option declared here once, as its field, in the order ``--help``
    lists them (commands/declared.py)."""

    repros: tuple[str, ...] = option(REPROS, help="repro name(s) from matrix.yaml; default: all", dest="repro")
    script: ScriptOptions = composed(add_script_options, ScriptOptions.from_args, ScriptOptions)
    run: RunOptions = composed(add_run_options, RunOptions.from_args, RunOptions)
    cells: tuple[str, ...] = option(CELL, help="run only the cell(s) with this id", dest="cell")
    list: bool = option(LIST, help="list the cells with their ids and stop")
    list_json: bool = option(LIST_JSON, help="print the cells as a GitHub Actions matrix and stop")
    common: CommonOptions = composed(add_common, CommonOptions.from_args)

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> MatrixOptions:
        """The command line as parsed."""
        return read_fields(cls, args)


def setup_arguments(subparsers: Subparsers) -> None:
    """Add ``matrix`` and its options (``MatrixOptions``)."""
    parser = subparsers.add_parser("matrix", help="run repros across the matrix's cells (one venv per cell)")
    add_fields(parser, MatrixOptions)
    parser.set_defaults(run=run_from_args, script_args=())


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
