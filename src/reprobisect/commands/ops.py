"""``reprobisect ops``: the caches every cell shares — just-in-time built ops, the wheels the harness built from
sdists and the byte code it compiled for packages that ship none — shown, bounded or cleared."""

from __future__ import annotations

import argparse
import dataclasses
import time
from collections.abc import Callable
from pathlib import Path

from reprobisect.cells.built_wheels import WHEELS
from reprobisect.cells.op_builds import OPS
from reprobisect.cells.shared_cache import CacheEntry, SharedCache
from reprobisect.commands.declared import Flag, add_fields, composed, option, read_fields
from reprobisect.commands.options import Subparsers, add_envs, number_option
from reprobisect.run.bytecode import BYTECODE
from reprobisect.util.bounds import Bound

__all__ = ["OpsOptions", "run_from_args", "setup_arguments"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Shown:
    """How one cache's listing reads: what an entry is called and how its line starts."""

    cache: SharedCache
    off: str
    removed: str
    listed: str
    label: Callable[[CacheEntry], str]


def _op_label(entry: CacheEntry) -> str:
    name, _, key = entry.name.rpartition("-")
    return f"{name:<28} {key} "


_SHOWN = (
    _Shown(
        cache=OPS,
        off="the op cache is off (REPROBISECT_OP_CACHE=off): each cell compiles its ops into its own folder",
        removed="builds",
        listed="builds",
        label=_op_label,
    ),
    _Shown(
        cache=WHEELS,
        off="kept wheels are off (REPROBISECT_WHEEL_CACHE=off): sdist-only packages build in each cell",
        removed="wheels",
        listed="kept wheels",
        label=lambda entry: f"{entry.name!r:<40}",
    ),
    _Shown(
        cache=BYTECODE,
        off="the byte-code cache is off (REPROBISECT_BYTECODE_CACHE=off): runs compile what ships none",
        removed="byte-code folders",
        listed="byte-code folders (one a base interpreter)",
        label=lambda entry: f"{entry.name:<40}",
    ),
)


CLEAR = Flag.of("--clear", action="store_true")
MAX_GIB = Flag.of("--max-gib", type=number_option("--max-gib", Bound(0, 1e6, whole=False, above=True)))


def _add_envs(parser: argparse.ArgumentParser) -> None:
    add_envs(
        parser,
        help="the cells whose caches they are (REPROBISECT_OP_CACHE, "
        "REPROBISECT_WHEEL_CACHE and REPROBISECT_BYTECODE_CACHE move them)",
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class OpsOptions:
    """``ops``' command line, read once: the cells whose caches they are, and what to do to them (one of clearing
    and bounding). Each option declared here once, as its field (commands/declared.py)."""

    envs: Path = composed(_add_envs, lambda args: args.envs)
    clear: bool = option(CLEAR, help="remove every op build, kept wheel and byte code", exclusive="action")
    max_gib: float | None = option(
        MAX_GIB, help="remove least recently used entries above this size, each cache", exclusive="action"
    )

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> OpsOptions:
        """The command line as parsed."""
        return read_fields(cls, args)


def setup_arguments(subparsers: Subparsers) -> None:
    """Add ``ops`` and its options (``OpsOptions``)."""
    parser = subparsers.add_parser(
        "ops", help="show, bound or clear the shared caches of just-in-time built ops, kept wheels and byte code"
    )
    add_fields(parser, OpsOptions)
    parser.set_defaults(run=run_from_args)


def run_from_args(args: argparse.Namespace) -> int:
    """Print each cache's entries (name, size, last use), after clearing or bounding it when asked."""
    options = OpsOptions.from_args(args)
    for shown in _SHOWN:
        _show(shown, shown.cache.root(options.envs), clear=options.clear, max_gib=options.max_gib)
    return 0


def _show(shown: _Shown, root: Path | None, *, clear: bool, max_gib: float | None) -> None:
    """One cache's listing, the one printer every cache shares."""
    if root is None:
        print(shown.off)
        return
    if clear:
        print(f"cleared {root}: {shown.cache.clear(root) / 2**20:.1f} MiB freed")
    elif max_gib is not None:
        removed = shown.cache.prune(root, int(max_gib * 2**30), keep_newer_than=0.0)
        print(f"removed {len(removed)} {shown.removed} ({sum(e.size for e in removed) / 2**20:.1f} MiB)")
    kept = shown.cache.entries(root)
    print(f"{root}: {len(kept)} {shown.listed}, {sum(e.size for e in kept) / 2**20:.1f} MiB")
    for entry in reversed(kept):
        state = "" if entry.finished else " (unfinished)"
        print(f"  {shown.label(entry)} {entry.size / 2**20:7.1f} MiB  used {_when(entry.last_used)}{state}")


def _when(seconds: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(seconds))
