"""``reprobisect bench``: what a cell costs to build (cold, warm, against virtualenv+pip) and what the harness
adds to each run, side by side."""

from __future__ import annotations

import argparse
import os

from reprobisect.cells.envs import base_interpreter
from reprobisect.commands.options import Subparsers, add_common, pins, prepare
from reprobisect.config.load import load_config
from reprobisect.run.bench import format_bench, run_bench

__all__ = ["run_from_args", "setup_arguments"]


def setup_arguments(subparsers: Subparsers) -> None:
    """Add ``bench`` and its options."""
    parser = subparsers.add_parser("bench", help="cell build and run overhead figures, side by side")
    parser.add_argument("--runs", type=int, default=5, help="runs of the repro for the overhead ratio")
    parser.add_argument("--no-pip", action="store_true", help="skip the virtualenv+pip comparison")
    parser.add_argument(
        "--workloads",
        action="store_true",
        help="also time a fresh repro gan, a cold all-transitions bisection and --jobs 1 vs 2 (about 20 minutes)",
    )
    add_common(parser)
    parser.set_defaults(run=run_from_args)


def run_from_args(args: argparse.Namespace) -> int:
    """Measure and print the figures."""
    prepare(args)
    result = run_bench(
        load_config(args.config),
        base_interpreter(args.base_python),
        pins(args),
        runs=args.runs,
        with_pip=not args.no_pip,
        environ=os.environ,
        workloads=args.workloads,
        config_path=args.config,
    )
    print()
    print(format_bench(result))
    return 0
