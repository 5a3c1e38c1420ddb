"""Every file the harness writes is written whole or not at all, and never through a link.

A reader (a report, a second harness, a workflow) sees the old file or the new one, never half of one,
and a full disk or a stopped process leaves no temporary file. The new file is made beside the old one
and moved over it with ``os.replace``: that replaces a symbolic link itself instead of writing into
whatever it points at, so a link planted in an output folder cannot redirect a write.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
from collections.abc import Iterator
from pathlib import Path

from reprobisect.errors import StorageError
from reprobisect.util.redact import redact

__all__ = ["atomic_path", "empty_folder", "inside", "write_atomic"]


@contextlib.contextmanager
def atomic_path(path: Path, *, what: str = "this file") -> Iterator[Path]:
    """A temporary path beside ``path`` for a writer that wants a file name (pandas, matplotlib);
    moved over ``path`` when the block ends without an error, removed otherwise.

    OSError becomes StorageError naming ``path`` and ``what`` it holds.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = _new_file_beside(path)
    except OSError as exc:
        msg = f"{path}: cannot write {what} ({exc.strerror or exc}); the files written before it are intact"
        raise StorageError(msg) from exc
    try:
        yield tmp
        with tmp.open("rb") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        msg = f"{path}: cannot write {what} ({exc.strerror or exc}); the files written before it are intact"
        raise StorageError(msg) from exc
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()


def _new_file_beside(path: Path) -> Path:
    """An empty file of a fresh name in ``path``'s folder, with the mode a plain ``open()`` gives (0666 less the
    umask). Why not ``tempfile.mkstemp``: its 0600 would become the report's mode, and a report folder shared
    with a team or served by a web server could not be read by anyone else."""
    for _ in range(100):
        tmp = path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp"
        try:
            os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o666))
        except FileExistsError:
            continue
        return tmp
    raise FileExistsError(f"no free temporary name beside {path}")


def write_atomic(path: Path, data: str | bytes, *, what: str = "this file") -> Path:
    """Write ``data`` (text as UTF-8, the user's secrets and credentials in URLs redacted: ``util.redact``) to
    ``path`` atomically; returns ``path``. Bytes are written as given: their writer redacts them."""
    payload = redact(data).encode("utf-8") if isinstance(data, str) else data
    with atomic_path(path, what=what) as tmp:
        tmp.write_bytes(payload)
    return path


def empty_folder(root: Path) -> None:
    """Remove everything in ``root`` (not ``root`` itself): folders as trees, links and files as entries, so a
    link planted in a cache is removed and never followed."""
    if not root.is_dir():
        return
    for child in root.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child, ignore_errors=True)
        else:
            child.unlink(missing_ok=True)


def inside(root: Path, relative: str) -> bool:
    """Does ``relative`` (a record's ``log_path``) name a file under ``root``, links resolved?

    A record from another machine (``report --merge``, a nightly state) could name ``../../.ssh/id_ed25519``
    or an absolute path; the report must never read, embed or copy a file outside the records root.
    """
    try:
        return (root / relative).resolve().is_relative_to(root.resolve())
    except (OSError, ValueError, RuntimeError):
        return False
