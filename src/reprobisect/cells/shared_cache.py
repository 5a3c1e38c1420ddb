"""A folder of entries that every cell shares, bounded in size: the least recently used go first.

The op cache (``op_builds.py``: just-in-time built ops) and the kept wheels (``built_wheels.py``: wheels the harness
built from sdists) are two instances of ``SharedCache``; they differ only in the environment variable that moves
them, the folder beside the cells they default to, which folders are entries, when an entry is finished and
whether an entry is removed under its lock. One implementation keeps their eviction, locking and listing alike.

Layout: ``<entry>/`` holds one entry and ``<entry>.flock`` is the lock its builder takes and, by its modification
time, when the entry was last used (the size bound drops the oldest first).
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import os
import shutil
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

from reprobisect.util.files import empty_folder

__all__ = ["OFF", "CacheEntry", "SharedCache", "last_used", "to_evict"]

OFF = ("off", "none", "0")  # what turns a cache off in its environment variable


@dataclasses.dataclass(frozen=True, kw_only=True)
class CacheEntry:
    """One entry of a shared cache: its folder, size in bytes, last use (seconds since the epoch) and whether it is
    finished (an unfinished one is being built, or its builder died)."""

    path: Path
    size: int
    last_used: float
    finished: bool

    @property
    def name(self) -> str:
        """The entry's folder name: what it is known by in the cache."""
        return self.path.name


def _always(_folder: Path) -> bool:
    return True


def _any_name(_name: str) -> bool:
    return True


@dataclasses.dataclass(frozen=True, kw_only=True)
class SharedCache:
    """How one shared cache is placed, listed and bounded.

    ``env_var`` moves it (``off``, ``none`` or ``0`` turns it off); ``folder`` is its default place beside the
    cells; ``is_entry_name`` says which folder names are entries; ``is_finished`` whether an entry is complete;
    ``remove_under_lock`` whether pruning waits for an entry's lock (a kept wheel may be in the middle of being
    replaced; an op's builder holds its lock for minutes, and a build used within the hour is never pruned).
    """

    env_var: str
    folder: str
    default_max_bytes: int
    is_entry_name: Callable[[str], bool] = _any_name
    is_finished: Callable[[Path], bool] = _always
    remove_under_lock: bool = False

    def root(self, envs_dir: Path, environ: Mapping[str, str] = os.environ) -> Path | None:
        """Where the cache of the cells under ``envs_dir`` lives; None when its variable turns it off."""
        chosen = environ.get(self.env_var, "").strip()
        if chosen.lower() in OFF:
            return None
        return Path(chosen).absolute() if chosen else envs_dir.absolute() / self.folder

    def folders(self, root: Path) -> list[Path]:
        """The entries' folders under ``root`` (no links, no hidden build folders); none when it does not exist."""
        try:
            return [
                p
                for p in root.iterdir()
                if p.is_dir() and not p.is_symlink() and not p.name.startswith(".") and self.is_entry_name(p.name)
            ]
        except OSError:
            return []

    def entries(self, root: Path) -> list[CacheEntry]:
        """Every entry under ``root``, least recently used first."""
        found = [
            CacheEntry(path=f, size=_size(f), last_used=last_used(root, f), finished=self.is_finished(f))
            for f in self.folders(root)
        ]
        return sorted(found, key=lambda e: e.last_used)

    def finished(self, root: Path) -> list[Path]:
        """Folders of finished entries, least recently used first; sizes nothing (asked before every run)."""
        done = (f for f in self.folders(root) if self.is_finished(f))
        return sorted(done, key=lambda f: last_used(root, f))

    @contextlib.contextmanager
    def locked(self, root: Path, name: str) -> Iterator[None]:
        """The entry's lock: one builder at a time; the kernel frees it when its holder dies."""
        root.mkdir(parents=True, exist_ok=True)
        with (root / f"{name}.flock").open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            yield

    def touch(self, root: Path, name: str) -> None:
        """Note that the entry was used now, for the size bound."""
        with contextlib.suppress(OSError):
            (root / f"{name}.flock").touch()

    def prune(self, root: Path, max_bytes: int | None = None, *, keep_newer_than: float = 3600.0) -> list[CacheEntry]:
        """Remove least recently used entries until the cache holds at most ``max_bytes`` (its default bound when
        None); entries used in the last ``keep_newer_than`` seconds stay (another harness may be using them).
        Returns what was removed."""
        bound = self.default_max_bytes if max_bytes is None else max_bytes
        removed = to_evict(self.entries(root), bound, keep_newer_than=keep_newer_than)
        for entry in removed:
            if self.remove_under_lock:
                with self.locked(root, entry.name):
                    shutil.rmtree(entry.path, ignore_errors=True)
            else:
                shutil.rmtree(entry.path, ignore_errors=True)
            (root / f"{entry.name}.flock").unlink(missing_ok=True)
        return removed

    def clear(self, root: Path) -> int:
        """Empty the cache; returns the bytes freed."""
        freed = sum(entry.size for entry in self.entries(root))
        empty_folder(root)
        return freed


def to_evict(entries: Sequence[CacheEntry], max_bytes: int, *, keep_newer_than: float) -> list[CacheEntry]:
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


def last_used(root: Path, folder: Path) -> float:
    """When an entry was last used (its lock file's time, touched on each use), else when it was made."""
    for path in (root / f"{folder.name}.flock", folder):
        try:
            return path.stat().st_mtime
        except OSError:
            continue
    return 0.0


def _size(folder: Path) -> int:
    """The bytes of every file under ``folder`` (links counted as links, never followed)."""
    total = 0
    for root, _, files in os.walk(folder):
        for name in files:
            try:
                total += (Path(root) / name).lstat().st_size
            except OSError:
                continue
    return total
