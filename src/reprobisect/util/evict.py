"""Which entries of a size-bounded cache go: the least recently used, until the rest fits.

Shared by the op cache (cells/op_builds.py) and the kept wheels (cells/built_wheels.py), which differ only in how an
entry is removed (a kept wheel is removed under its lock).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Protocol, TypeVar

__all__ = ["Sized", "to_evict"]


class Sized(Protocol):
    """An entry of a cache: its size in bytes and when it was last used (seconds since the epoch)."""

    @property
    def size(self) -> int: ...

    @property
    def last_used(self) -> float: ...


EntryT = TypeVar("EntryT", bound=Sized)


def to_evict(entries: Sequence[EntryT], max_bytes: int, *, keep_newer_than: float) -> list[EntryT]:
    """The entries to remove, least recently used first (``entries`` are in that order), until at most
    ``max_bytes`` are left; those used in the last ``keep_newer_than`` seconds stay (another harness may be
    using them), even when the cache then stays over its bound."""
    total = sum(entry.size for entry in entries)
    now = time.time()
    chosen = []
    for entry in entries:
        if total <= max_bytes:
            break
        if now - entry.last_used < keep_newer_than:
            continue
        total -= entry.size
        chosen.append(entry)
    return chosen
