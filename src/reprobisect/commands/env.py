"""``reprobisect env``: build (or reuse) the cell and print torch's collect_env and DeepSpeed's ds_report.

Both tools print straight to the terminal (their output is what the user asked for), each under a timeout:
a tool that hangs (a driver query, a JIT check) ends in one line naming it, not in a wait without end."""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping, Sequence

from reprobisect.cells.base import base_interpreter
from reprobisect.cells.build_jail import BuildJail
from reprobisect.cells.envs import ensure_env
from reprobisect.cells.pinning import resolve_cell
from reprobisect.commands.options import CommonOptions, Subparsers, add_common, prepare
from reprobisect.config.load import load_config
from reprobisect.errors import ToolError
from reprobisect.util.cmd import run_tool

__all__ = ["TOOL_TIMEOUT", "run_from_args", "setup_arguments"]

TOOL_TIMEOUT = (
    300.0  # seconds for each tool; collect_env imports torch and asks nvidia-smi, ds_report imports deepspeed
)


def setup_arguments(subparsers: Subparsers) -> None:
    """Add ``env`` and its options."""
    parser = subparsers.add_parser("env", help="build the cell and print its collect_env and ds_report")
    add_common(parser)
    parser.set_defaults(run=run_from_args)


def _stream(argv: Sequence[str], *, what: str, env: Mapping[str, str] | None = None) -> None:
    """Run a report tool with its output on the terminal; its exit status is not ours to judge (both tools
    print what they found even when a part is missing), but a tool that cannot start or hangs is an error."""
    run_tool(argv, what=what, timeout=TOOL_TIMEOUT, error=ToolError, env=env, check=False, capture=False)


def run_from_args(args: argparse.Namespace) -> int:
    """Build the default cell with the pins given, then print what torch and DeepSpeed say about it."""
    options = CommonOptions.from_args(args)  # env takes add_common's block and nothing else
    prepare(options)
    base = base_interpreter(options.base_python)
    config = load_config(options.config)
    cell = resolve_cell(base, {**config.default_cell, **options.pins})
    env = ensure_env(cell, base, options.envs, jail=BuildJail.within(options.confinement.open()))
    # flushed: the tools write to the same terminal (or pipe) and must come after this line
    print(
        f"Cell {cell.id}: {env.path} ({'reused' if env.reused else 'built'}; torch from {cell.torch_source})\n",
        flush=True,
    )
    _stream([str(env.python), "-m", "torch.utils.collect_env"], what="torch's collect_env in the cell")
    ds_report = env.path / "bin" / "ds_report"
    if ds_report.exists():
        path = f"{env.path / 'bin'}{os.pathsep}{os.environ.get('PATH', os.defpath)}"
        _stream([str(ds_report)], what="DeepSpeed's ds_report in the cell", env={**os.environ, "PATH": path})
    return 0
