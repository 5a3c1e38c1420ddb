"""One copy on disk of the files many cells hold alike: a pinned torch above all.

A cell whose torch is pinned (not the base interpreter's) gets it from pip, which copies: 1.1 GB a cell for a CPU
build of torch 2.13, 5.1 GB for a CUDA one, byte for byte the same in every cell of that torch. A corpus run over
every entry builds dozens of such cells, and on a 100 GB disk it stopped at 15 of 21 entries, out of space. So when
a cell is built, each large file in it that no other path shares yet is hard-linked to a content store beside the
cells (``shared-files/``): the first cell's copy becomes the store's, and every later cell's identical file becomes
a link to it. uv installs the rest of a cell as links into its own cache already; those are left as they are.

Why this is safe for what the harness promises:

- A run sees its cell read-only in the sandbox, so it cannot write through a link into another cell.
- An unconfined run that writes into a shared file changes the one inode, its modification time included, so every
  cell holding it fails its ``tree_digest`` check and is built again, as a cell written into always was.
- A file is replaced by a link only after its bytes are compared with the store's whole, never on a hash alone,
  and the replacement is atomic (a link made beside it, renamed over it).
- Files differ in mode as well as bytes (an executable library, a read-only one): the store keys both.

A store entry no cell links to any more (its cells were deleted) is removed the next time a cell is built.
``REPROBISECT_SHARED_FILES=off`` turns the sharing off (each cell keeps copies of its own).
"""

from __future__ import annotations

import dataclasses
import filecmp
import hashlib
import os
import stat
from collections.abc import Iterator, Mapping
from pathlib import Path

from reprobisect.cells.shared_cache import OFF

__all__ = ["ENV_VAR", "MIN_SHARED_BYTES", "SharedFiles", "share_identical_files", "shared_store"]

ENV_VAR = "REPROBISECT_SHARED_FILES"  # ``off`` keeps every cell's files its own copies
STORE = "shared-files"  # beside the cells, under the cells' folder: one filesystem, so links can be made
MIN_SHARED_BYTES = 16 * 1024  # 92 % of a pinned torch cell's bytes lie in its 4,450 files of 16 KiB or more


@dataclasses.dataclass(frozen=True)
class SharedFiles:
    """What one pass did: files that became links to a copy already stored, the bytes that saved, files stored."""

    linked: int = 0
    bytes_saved: int = 0
    stored: int = 0

    def words(self) -> str:
        return (
            f"{self.linked} files ({self.bytes_saved / 2**20:.0f} MiB) linked to the shared copy, {self.stored} stored"
        )


def shared_store(envs_dir: Path, environ: Mapping[str, str] = os.environ) -> Path | None:
    """The store of the cells under ``envs_dir``; None where ``REPROBISECT_SHARED_FILES`` is ``off``."""
    return None if environ.get(ENV_VAR, "").strip().lower() in OFF else envs_dir / STORE


def share_identical_files(tree: Path, store: Path, *, min_bytes: int = MIN_SHARED_BYTES) -> SharedFiles:
    """Link every regular file of ``tree`` of at least ``min_bytes`` that no other path shares to the store's copy
    of the same bytes and mode, storing it where the store has none; prune store entries no cell uses."""
    store.mkdir(parents=True, exist_ok=True)
    _prune(store)
    linked = saved = stored = 0
    for path, info in _candidates(tree, min_bytes):
        try:
            entry = store / _key(path, info)
        except OSError:  # gone or unreadable since it was listed: left as it is
            continue
        if not entry.exists():
            try:
                os.link(path, entry)
                stored += 1
                continue
            except FileExistsError:  # another build stored the same bytes a moment ago: link to it below
                pass
            except OSError:  # another filesystem, or a store that refuses links: the file stays a copy
                continue
        if _link_in_place(path, entry, info):
            linked += 1
            saved += info.st_size
    return SharedFiles(linked=linked, bytes_saved=saved, stored=stored)


def _candidates(tree: Path, min_bytes: int) -> Iterator[tuple[Path, os.stat_result]]:
    """Regular files of ``tree`` (links not followed) of at least ``min_bytes`` that have no other name yet; byte
    caches aside (pip writes each with its install's time in it: no two cells' are alike)."""
    for folder, folders, names in os.walk(tree):
        folders[:] = [name for name in folders if name != "__pycache__"]  # pip's byte caches differ in every cell
        for name in names:
            path = Path(folder, name)
            try:
                info = path.lstat()
            except OSError:
                continue
            if stat.S_ISREG(info.st_mode) and info.st_size >= min_bytes and info.st_nlink == 1:
                yield path, info


def _key(path: Path, info: os.stat_result) -> str:
    """The store's name for a file: its bytes' SHA-256 and its permission bits (a link shares both)."""
    with path.open("rb") as handle:
        digest = hashlib.file_digest(handle, "sha256").hexdigest()
    return f"{digest}-{stat.S_IMODE(info.st_mode):o}"


def _link_in_place(path: Path, entry: Path, info: os.stat_result) -> bool:
    """Replace ``path`` by a link to ``entry`` when their bytes and mode are the same; False, untouched, when not."""
    try:
        kept = entry.lstat()
        if not stat.S_ISREG(kept.st_mode) or kept.st_size != info.st_size or kept.st_mode != info.st_mode:
            return False
        if not filecmp.cmp(path, entry, shallow=False):
            return False
        beside = path.with_name(f".{path.name}.shared")
        beside.unlink(missing_ok=True)
        os.link(entry, beside)
        os.replace(beside, path)
    except OSError:
        return False
    return True


def _prune(store: Path) -> None:
    """Remove the store's entries that no cell links to any more."""
    for entry in store.iterdir():
        try:
            if entry.is_file() and not entry.is_symlink() and entry.lstat().st_nlink == 1:
                entry.unlink()
        except OSError:
            continue
