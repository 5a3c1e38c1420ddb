"""``reprobisect ops``: the caches every cell shares — just-in-time built ops and the wheels the harness built from
sdists — shown, bounded or cleared."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from reprobisect.cells import built_wheels, op_builds
from reprobisect.commands.options import Subparsers, add_envs

__all__ = ["run_from_args", "setup_arguments"]


def setup_arguments(subparsers: Subparsers) -> None:
    """Add ``ops`` and its options."""
    parser = subparsers.add_parser(
        "ops", help="show, bound or clear the shared caches of just-in-time built ops and kept wheels"
    )
    add_envs(
        parser,
        help="the cells whose caches they are (env REPROBISECT_ENVS; REPROBISECT_OP_CACHE and "
        "REPROBISECT_WHEEL_CACHE move them)",
    )
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--clear", action="store_true", help="remove every op build and kept wheel")
    action.add_argument("--max-gib", type=float, help="remove least recently used entries above this size, each cache")
    parser.set_defaults(run=run_from_args)


def run_from_args(args: argparse.Namespace) -> int:
    """Print each cache's entries (name, size, last use), after clearing or bounding it when asked."""
    _ops(args, op_builds.cache_root(args.envs))
    _wheels(args, built_wheels.cache_root(args.envs))
    return 0


def _ops(args: argparse.Namespace, root: Path | None) -> None:
    if root is None:
        print("the op cache is off (REPROBISECT_OP_CACHE=off): each cell compiles its ops into its own folder")
        return
    if args.clear:
        print(f"cleared {root}: {op_builds.clear(root) / 2**20:.1f} MiB freed")
    elif args.max_gib is not None:
        removed = op_builds.prune(root, int(args.max_gib * 2**30), keep_newer_than=0.0)
        print(f"removed {len(removed)} builds ({sum(e.size for e in removed) / 2**20:.1f} MiB)")
    cached = op_builds.entries(root)
    print(f"{root}: {len(cached)} builds, {sum(e.size for e in cached) / 2**20:.1f} MiB")
    for entry in reversed(cached):
        state = "" if entry.finished else " (unfinished)"
        print(f"  {entry.name:<28} {entry.key}  {entry.size / 2**20:7.1f} MiB  used {_when(entry.last_used)}{state}")


def _wheels(args: argparse.Namespace, root: Path | None) -> None:
    if root is None:
        print("kept wheels are off (REPROBISECT_WHEEL_CACHE=off): sdist-only packages build in each cell")
        return
    if args.clear:
        print(f"cleared {root}: {built_wheels.clear(root) / 2**20:.1f} MiB freed")
    elif args.max_gib is not None:
        removed = built_wheels.prune(root, int(args.max_gib * 2**30), keep_newer_than=0.0)
        print(f"removed {len(removed)} wheels ({sum(e.size for e in removed) / 2**20:.1f} MiB)")
    kept = built_wheels.entries(root)
    print(f"{root}: {len(kept)} kept wheels, {sum(e.size for e in kept) / 2**20:.1f} MiB")
    for entry in reversed(kept):
        print(f"  {entry.name!r:<40} {entry.size / 2**20:7.1f} MiB  used {_when(entry.last_used)}")


def _when(seconds: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(seconds))
