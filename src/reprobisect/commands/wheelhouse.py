"""``reprobisect wheelhouse``: a folder of wheels for offline cells (GPU nodes without network), built here for
the target machine's Python; ``--wheelhouse DIR`` on the other commands installs from it."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from reprobisect.cells.base import base_interpreter
from reprobisect.cells.index import IndexCache
from reprobisect.cells.offline_wheelhouse import build_wheelhouse
from reprobisect.commands.declared import Flag, add_fields, composed, option, read_fields
from reprobisect.commands.options import CommonOptions, Subparsers, add_common, split
from reprobisect.config.expand import resolve_value

__all__ = ["WheelhouseOptions", "run_from_args", "setup_arguments"]


WHEELHOUSE_DEST = Flag.of("--dest", type=Path, default=Path(".whl"))
TARGET_PYTHON = Flag.of("--target-python", default="3.12")
SYSTEM = Flag.of("--system", action="append", default=[], read=split)
WITH = Flag.of("--with", action="append", default=[], read=tuple)


@dataclasses.dataclass(frozen=True, kw_only=True)
class WheelhouseOptions:
    """``wheelhouse``'s command line, read once; ``--deepspeed`` is the ``deepspeed`` pin of ``common``. Each option
    declared here once, as its field (commands/declared.py)."""

    dest: Path = option(WHEELHOUSE_DEST, help="folder to fill")
    target_python: str = option(TARGET_PYTHON, help="Python version of the offline machine")
    system: tuple[str, ...] = option(SYSTEM, help="package the target interpreter already has")
    extra: tuple[str, ...] = option(WITH, help="another requirement to include")  # --with
    common: CommonOptions = composed(add_common, CommonOptions.from_args)

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> WheelhouseOptions:
        """The command line as parsed."""
        return read_fields(cls, args)


def setup_arguments(subparsers: Subparsers) -> None:
    """Add ``wheelhouse`` and its options (``WheelhouseOptions``)."""
    parser = subparsers.add_parser(
        "wheelhouse", help="build a wheelhouse for offline cells (GPU nodes without network)"
    )
    add_fields(parser, WheelhouseOptions)
    parser.set_defaults(run=run_from_args)


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
