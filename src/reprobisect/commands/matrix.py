"""``reprobisect matrix``: repros (or one script) across the matrix's cells, one venv per cell; ``--list`` and
``--list-json`` print the cells instead (the latter as a GitHub Actions matrix)."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from pathlib import Path

from reprobisect.cells.envs import base_interpreter
from reprobisect.commands.options import (
    PINNED,
    Subparsers,
    add_backend,
    add_common,
    add_fixes,
    add_forms,
    add_timeout,
    check_script,
    confinement,
    prepare,
    split,
)
from reprobisect.commands.output import print_runs
from reprobisect.config.load import load_config
from reprobisect.errors import ConfigError
from reprobisect.report.load import markdown_summary
from reprobisect.run.matrix import MatrixRequest, listed_cells, run_matrix
from reprobisect.run.store import Store
from reprobisect.util.files import write_atomic

__all__ = ["run_from_args", "setup_arguments"]


def setup_arguments(subparsers: Subparsers) -> None:
    """Add ``matrix`` and its options."""
    parser = subparsers.add_parser("matrix", help="run repros across the matrix's cells (one venv per cell)")
    parser.add_argument("--repro", action="append", help="repro name(s) from matrix.yaml; default: all")
    parser.add_argument("--script", type=Path, help="run any script (e.g. pasted from an issue) instead of a repro")
    parser.add_argument("--expect-signature", help="with --script: the known name or id that counts as REPRODUCED")
    parser.add_argument("--shim", action="store_true", help="with --script: run it through the Lightning CPU shim")
    add_backend(parser)
    parser.add_argument(
        "--select", action="append", default=[], help="keep cells where AXIS=PATTERN, e.g. 'deepspeed=0.18.*'"
    )
    parser.add_argument("--cell", action="append", default=[], help="run only the cell(s) with this id")
    parser.add_argument("--python", help="replace the python axis (comma-separated values)")
    add_fixes(parser)
    add_forms(parser)
    parser.add_argument("--jobs", type=int, default=1, help="runs at a time (each gets its GPU or share of cores)")
    parser.add_argument("--repeat", type=int, default=1, help="run each unit N times")
    parser.add_argument("--fresh", action="store_true", help="re-run units that already have a record")
    parser.add_argument("--refresh-index", action="store_true", help="ask the index again for ranges and latest")
    add_timeout(parser)
    parser.add_argument("--list", action="store_true", help="list the cells with their ids and stop")
    parser.add_argument("--list-json", action="store_true", help="print the cells as a GitHub Actions matrix and stop")
    add_common(parser)
    parser.set_defaults(run=run_from_args)


def _axis_values(value: str) -> tuple[str, ...]:
    """``0.16.4,0.19.8`` is two values; a specifier such as ``>=0.16,<0.20`` is one."""
    if value.startswith(("<", ">", "=", "!", "~")):
        return (value,)
    return tuple(v.strip() for v in value.split(",") if v.strip())


def _request(args: argparse.Namespace) -> MatrixRequest:
    """The options as a MatrixRequest; contradictions are refused here, before anything is planned."""
    axes = {name: _axis_values(getattr(args, name)) for name in (*PINNED, "python") if getattr(args, name)}
    check_script(args.script)
    if args.expect_signature and not args.script:
        msg = "--expect-signature goes with --script (a canonical repro's expectation lives in matrix.yaml)"
        raise ConfigError(msg)
    if args.script and args.repro:
        msg = "--script and --repro contradict each other: run a canonical repro or a script, not both"
        raise ConfigError(msg)
    if args.jobs < 1 or args.repeat < 1:
        msg = f"--jobs {args.jobs} / --repeat {args.repeat}: both must be at least 1"
        raise ConfigError(msg)
    return MatrixRequest(
        repros=split(args.repro),
        script=args.script,
        expect_signature=args.expect_signature,
        shim=args.shim,
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
    )


def run_from_args(args: argparse.Namespace) -> int:
    """List the cells, or run the selection, print the table and write ``summary-matrix.md``; 0 whatever the
    outcomes."""
    prepare(args)
    config = load_config(args.config)
    request = _request(args)
    base = base_interpreter(args.base_python)
    if args.list or args.list_json:
        cells = listed_cells(config, request, base, args.envs)
        print(
            json.dumps({"include": cells})
            if args.list_json
            else "\n".join(f"{c['cell']}  {c['status']}" for c in cells)
        )
        return 0
    records = run_matrix(
        config,
        request,
        base=base,
        store=Store(args.out),
        envs_dir=args.envs,
        environ=os.environ,
        cells=tuple(args.cell),
    )
    print_runs(records)
    summary = args.out / "summary-matrix.md"
    summary.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(
        summary,
        markdown_summary(records, title="Matrix", command="nox -s matrix -- " + shlex.join(sys.argv[2:])),
        what="the matrix summary",
    )
    print(f"\nRecords: {args.out / 'records'}  Summary: {summary}")
    return 0
