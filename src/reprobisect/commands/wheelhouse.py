"""``reprobisect wheelhouse``: a folder of wheels for offline cells (GPU nodes without network), built here for
the target machine's Python; ``--wheelhouse DIR`` on the other commands installs from it."""

from __future__ import annotations

import argparse
from pathlib import Path

from reprobisect.cells.base import base_interpreter
from reprobisect.cells.index import IndexCache
from reprobisect.cells.offline_wheelhouse import build_wheelhouse
from reprobisect.commands.options import Subparsers, add_common, prepare, split
from reprobisect.config.expand import resolve_value

__all__ = ["run_from_args", "setup_arguments"]


def setup_arguments(subparsers: Subparsers) -> None:
    """Add ``wheelhouse`` and its options."""
    parser = subparsers.add_parser(
        "wheelhouse", help="build a wheelhouse for offline cells (GPU nodes without network)"
    )
    parser.add_argument("--dest", type=Path, default=Path(".whl"), help="folder to fill")
    parser.add_argument("--target-python", default="3.12", help="Python version of the offline machine")
    parser.add_argument("--system", action="append", default=[], help="package the target interpreter already has")
    parser.add_argument("--with", dest="extra", action="append", default=[], help="another requirement to include")
    add_common(parser)
    parser.set_defaults(run=run_from_args)


def run_from_args(args: argparse.Namespace) -> int:
    """Download the wheels of the ``--deepspeed`` releases (default: the latest) and their dependencies."""
    prepare(args, wheelhouse=False)  # it fills a wheelhouse: installing from one would be circular
    base = base_interpreter(args.base_python)
    index = IndexCache(args.envs.resolve() / "index-cache.json", base.executable)
    versions = resolve_value("deepspeed", args.deepspeed or "latest", index.versions, prereleases=False)
    files = build_wheelhouse(
        base.executable,
        versions,
        args.dest,
        python_version=args.target_python,
        excluded=split(args.system),
        extra=args.extra,
    )
    total = sum(f.stat().st_size for f in files) / 2**20
    print(f"{len(files)} files, {total:.1f} MiB in {args.dest}")
    return 0
