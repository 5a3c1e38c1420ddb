"""``reprobisect ops``: the cache of just-in-time built ops that every cell shares, shown, bounded or cleared."""

from __future__ import annotations

import argparse
import time

from reprobisect.cells import ops
from reprobisect.commands.options import Subparsers, add_envs

__all__ = ["run_from_args", "setup_arguments"]


def setup_arguments(subparsers: Subparsers) -> None:
    """Add ``ops`` and its options."""
    parser = subparsers.add_parser("ops", help="show, bound or clear the cache of just-in-time built ops")
    add_envs(parser, help="the cells whose cache it is (env REPROBISECT_ENVS; REPROBISECT_OP_CACHE moves the cache)")
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--clear", action="store_true", help="remove every build")
    action.add_argument("--max-gib", type=float, help="remove least recently used builds above this size")
    parser.set_defaults(run=run_from_args)


def run_from_args(args: argparse.Namespace) -> int:
    """Print the cache's builds (name, key, size, last use), after clearing or bounding it when asked."""
    root = ops.cache_root(args.envs)
    if root is None:
        print("the op cache is off (REPROBISECT_OP_CACHE=off): each cell compiles its ops into its own folder")
        return 0
    if args.clear:
        print(f"cleared {root}: {ops.clear(root) / 2**20:.1f} MiB freed")
    elif args.max_gib is not None:
        removed = ops.prune(root, int(args.max_gib * 2**30), keep_newer_than=0.0)
        print(f"removed {len(removed)} builds ({sum(e.size for e in removed) / 2**20:.1f} MiB)")
    cached = ops.entries(root)
    print(f"{root}: {len(cached)} builds, {sum(e.size for e in cached) / 2**20:.1f} MiB")
    for entry in reversed(cached):
        state = "" if entry.finished else " (unfinished)"
        used = time.strftime("%Y-%m-%d %H:%M", time.localtime(entry.last_used))
        print(f"  {entry.name:<28} {entry.key}  {entry.size / 2**20:7.1f} MiB  used {used}{state}")
    return 0
