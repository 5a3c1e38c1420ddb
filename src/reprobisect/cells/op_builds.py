"""The cache of just-in-time built ops that every cell, patch overlay and bisection probe shares.

Runs fill it through ``run/child/op_cache.py`` (a wrapper of torch's ``load`` keyed on what determines the
binary, never on where the sources lie); the harness only places it, shows finished entries read-only to the
runs that follow, bounds its size and clears it. It lives beside the cells (``<envs>/ops``) unless
``REPROBISECT_OP_CACHE`` names another folder (a node-local disk, a folder several checkouts share).

Layout: ``<name>-<key>/`` holds one op's build (``<name>.so`` once finished) and ``<name>-<key>.flock`` the
lock its builders take and the time it was last used.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
from collections.abc import Mapping
from pathlib import Path

from reprobisect.util.evict import to_evict
from reprobisect.util.files import empty_folder

__all__ = ["DEFAULT_MAX_BYTES", "OpEntry", "cache_root", "clear", "entries", "finished", "prune"]

DEFAULT_MAX_BYTES = 4 << 30  # a CUDA FusedAdam build is ~20 MB, the CPU comm op ~1 MB: room for hundreds


@dataclasses.dataclass(frozen=True, kw_only=True)
class OpEntry:
    """One op build in the cache."""

    path: Path
    name: str
    key: str
    size: int
    last_used: float
    finished: bool


OFF = ("off", "none", "0")


def cache_root(envs_dir: Path, environ: Mapping[str, str] = os.environ) -> Path | None:
    """Where the op cache of the cells under ``envs_dir`` lives; None when ``REPROBISECT_OP_CACHE=off`` (each
    cell then compiles its ops into its own folder, as torch does by default)."""
    chosen = environ.get("REPROBISECT_OP_CACHE", "").strip()
    if chosen.lower() in OFF:
        return None
    return Path(chosen).absolute() if chosen else envs_dir.absolute() / "ops"


def _size(folder: Path) -> int:
    total = 0
    for root, _, files in os.walk(folder):
        for name in files:
            try:
                total += (Path(root) / name).lstat().st_size
            except OSError:
                continue
    return total


def _folders(root: Path) -> list[Path]:
    """The build folders (``<name>-<key>``) under ``root``; none when it does not exist."""
    try:
        return [p for p in root.iterdir() if p.is_dir() and not p.is_symlink() and "-" in p.name]
    except OSError:
        return []


def entries(root: Path) -> list[OpEntry]:
    """Every op build under ``root``, least recently used first."""
    found = []
    for folder in _folders(root):
        name, _, key = folder.name.rpartition("-")
        used = _last_used(root, folder)
        found.append(
            OpEntry(path=folder, name=name, key=key, size=_size(folder), last_used=used, finished=_is_finished(folder))
        )
    return sorted(found, key=lambda e: e.last_used)


def _last_used(root: Path, folder: Path) -> float:
    """When a build was last loaded (its lock file's time, touched on each hit), else when it was made."""
    for path in (root / f"{folder.name}.flock", folder):
        try:
            return path.stat().st_mtime
        except OSError:
            continue
    return 0.0


def _is_finished(folder: Path) -> bool:
    name = folder.name.rpartition("-")[0]
    return (folder / f"{name}.so").is_file() and not (folder / "lock").exists()


def finished(root: Path) -> list[Path]:
    """Folders of finished builds: shown read-only to runs, so no run can change an op another run loads.
    Asked before every run: it looks at two names per folder and sizes nothing."""
    return sorted((f for f in _folders(root) if _is_finished(f)), key=lambda f: _last_used(root, f))


def prune(root: Path, max_bytes: int = DEFAULT_MAX_BYTES, *, keep_newer_than: float = 3600.0) -> list[OpEntry]:
    """Remove least recently used builds until the cache holds at most ``max_bytes``; builds used in the last
    ``keep_newer_than`` seconds stay (another harness may be loading them). Returns what was removed."""
    removed = to_evict(entries(root), max_bytes, keep_newer_than=keep_newer_than)
    for entry in removed:
        shutil.rmtree(entry.path, ignore_errors=True)
        (root / f"{entry.path.name}.flock").unlink(missing_ok=True)
    return removed


def clear(root: Path) -> int:
    """Empty the cache; returns the bytes freed."""
    freed = sum(entry.size for entry in entries(root))
    empty_folder(root)
    return freed
