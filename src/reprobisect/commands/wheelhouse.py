"""``reprobisect wheelhouse``: a folder of wheels for offline cells (GPU nodes without network), built here for
the target machine's Python; ``--wheelhouse DIR`` on the other commands installs from it."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from reprobisect.cells.base import base_interpreter
from reprobisect.cells.index import IndexCache
from reprobisect.cells.offline_wheelhouse import build_wheelhouse
from reprobisect.commands.options import CommonOptions, Subparsers, add_common, split
from reprobisect.config.expand import resolve_value

__all__ = ["WheelhouseOptions", "run_from_args", "setup_arguments"]


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


@dataclasses.dataclass(frozen=True, kw_only=True)
class WheelhouseOptions:
    """``wheelhouse``'s command line, read once; ``--deepspeed`` is the ``deepspeed`` pin of ``common``."""

    dest: Path = Path(".whl")
    target_python: str = "3.12"
    system: tuple[str, ...] = ()  # --system, split
    extra: tuple[str, ...] = ()  # --with
    common: CommonOptions

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> WheelhouseOptions:
        """The command line as parsed."""
        common = CommonOptions.from_args(args)
        return cls(
            dest=args.dest,
            target_python=args.target_python,
            system=split(args.system),
            extra=tuple(args.extra),
            common=common,
        )


def run_from_args(args: argparse.Namespace) -> int:
    """Download the wheels of the ``--deepspeed`` releases (default: the latest) and their dependencies. Installs do
    not come from ``--wheelhouse`` (no ``prepare``): it fills a wheelhouse, installing from one would be circular."""
    options = WheelhouseOptions.from_args(args)
    common = options.common
    base = base_interpreter(common.base_python)
    index = IndexCache(common.envs.resolve() / "index-cache.json", base.executable)
    deepspeed = common.pins.get("deepspeed") or "latest"
    versions = resolve_value("deepspeed", deepspeed, index.versions, prereleases=False)
    files = build_wheelhouse(
        base.executable,
        versions,
        options.dest,
        python_version=options.target_python,
        excluded=options.system,
        extra=options.extra,
    )
    total = sum(f.stat().st_size for f in files) / 2**20
    print(f"{len(files)} files, {total:.1f} MiB in {options.dest}")
    return 0
