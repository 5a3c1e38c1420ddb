"""``reprobisect triage SCRIPT [options] [-- script args]``: a script from an issue in the default cell (or across
the releases its pins name), in every form this machine runs, beside the fixes given on the command line.

It is ``matrix --script`` starting from matrix.yaml's default cell instead of its axes, because a maintainer
triaging a report first asks "does it fail on the newest releases, and does my fix help?"; a range pin
(``--deepspeed '>=0.16,<0.20'``) then asks "where does it fail?", and ``bisect --script`` "which release broke it?".
"""

from __future__ import annotations

import argparse
from pathlib import Path

from reprobisect.commands.matrix import add_run_options, axis_values, matrix_request, run_and_summarize
from reprobisect.commands.options import Subparsers, add_common, add_script_options, prepare, with_script
from reprobisect.config.load import load_config
from reprobisect.errors import ConfigError

__all__ = ["run_from_args", "setup_arguments"]


def setup_arguments(subparsers: Subparsers) -> None:
    """Add ``triage`` and its options."""
    parser = subparsers.add_parser(
        "triage",
        help="run a script from an issue in the default cell (or the releases pins name), every form, with fixes",
        description="Arguments after '--' go to the script: reprobisect triage issue.py --fix-env "
        "quiet=NCCL_DEBUG=WARN -- --lr 1e-4",
    )
    parser.add_argument(
        "script", type=Path, nargs="?", help="the script to run (any file; it is run as untrusted code), or --pytest"
    )
    add_script_options(parser, script=False)
    add_run_options(parser)
    add_common(parser)
    parser.set_defaults(run=run_from_args, script_args=())


def run_from_args(args: argparse.Namespace) -> int:
    """Run the script in the default cell (pins replace its values), print the table, write
    ``summary-<script>.md``; 0 whatever the outcomes."""
    prepare(args)
    config = load_config(args.config)
    if args.script is None and not args.pytest:
        msg = "triage needs a script (reprobisect triage issue.py) or --pytest PATH[::TEST]"
        raise ConfigError(msg)
    config, made = with_script(config, args, args.script, repros=(), rerun=("nox", "-s", "triage", "--"))
    base_axes = {axis: axis_values(value) for axis, value in config.default_cell.items()}
    request = matrix_request(args, made, base_axes=base_axes)
    title = config.repro(made[0]).title if len(made) == 1 else f"{len(made)} test selections"
    run_and_summarize(config, request, args, title=title, summary=f"summary-{made[0]}.md")
    return 0
