"""An evidence folder's records and raw logs in one archive, ``records.tar.xz``, read in memory and never extracted.

A records root keeps what a reader checks as files (the rendered report, summaries, a README) and what a machine
wrote in bulk — ``records/`` and ``logs/`` exactly as the store writes them (``model.store``), and the folder's own
``*.log`` files — as members of one xz-compressed tar at the root, under the same relative paths. The report reads
the members as it reads the files: a record at ``records/…`` of the archive is a record of that root, and a
record's ``log_path`` names the member its log tail comes from.

An archive comes from elsewhere as a record does, so it is read with the same care: only regular members with a
plain relative name (no absolute name, no ``..``, no link, no device) are read, each with a size cap and the whole
stream with a cap on what it decompresses to (a tar bomb stops there); what is left out is named in a problem line
that the report shows as a warning. Nothing is written to disk while reading.

``pack`` writes the archive deterministically (members sorted by name, fixed owner, mode and mtime, one xz preset),
so packing the same files again gives the same bytes; ``tools/pack_evidence.py`` is its command line.
"""

from __future__ import annotations

import dataclasses
import functools
import io
import lzma
import os
import tarfile
from collections.abc import Callable, Mapping
from pathlib import Path, PurePosixPath
from typing import IO

from reprobisect.model.record import MAX_RECORD_BYTES  # a record is a few KiB; a larger "record" is not one
from reprobisect.util.safe_read import UnsafeFileError, open_regular

__all__ = [
    "ARCHIVE",
    "LOG_TAIL_BYTES",
    "MAX_MEMBERS",
    "MAX_RECORD_BYTES",
    "MAX_UNPACKED_BYTES",
    "ArchiveError",
    "Contents",
    "archived_log",
    "contents",
    "pack",
    "read_members",
    "safe_name",
]

ARCHIVE = "records.tar.xz"
MAX_UNPACKED_BYTES = 512 * 1024 * 1024  # the whole tar stream, headers included: a tar bomb stops here
MAX_MEMBERS = 100_000
LOG_TAIL_BYTES = 2_000_000  # what the report reads of a log's end (report.logs); the same here
_CHUNK = 1024 * 1024
_PRESET = 9  # a 64 MiB window: the logs of one folder, nearly alike, compress against each other
_MTIME = 0  # every member's: re-packing the same files gives the same bytes
_BULK = ("records", "logs")  # the store's trees, packed whole


class ArchiveError(Exception):
    """The archive cannot be read as a whole (not xz, not tar, a member too large for ``read_members``)."""


class _TooLarge(Exception):
    """The decompressed stream passed ``MAX_UNPACKED_BYTES``."""


class _Capped(io.RawIOBase):
    """A decompressed stream that refuses to give more than ``limit`` bytes: no read asks the decompressor for
    more, so a huge member or header (a tar bomb, a PAX header claiming gigabytes) costs at most ``limit``."""

    def __init__(self, raw: IO[bytes], limit: int) -> None:
        super().__init__()
        self._raw, self._left = raw, limit

    def readable(self) -> bool:
        return True

    def read(self, size: int | None = -1) -> bytes:
        if self._left <= 0:
            if self._raw.read(1):
                raise _TooLarge
            return b""
        want = self._left if size is None or size < 0 else min(size, self._left)
        data = self._raw.read(want)
        self._left -= len(data)
        return data

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


def safe_name(name: str) -> str | None:
    """The member's name as a relative POSIX path under the archive's root, or None where it could leave it (an
    absolute name, a ``..`` part, a backslash, nothing) or could not be shown as it is (a control character, bytes
    that are not UTF-8)."""
    if not name or "\\" in name or name.startswith("/") or not name.isprintable():  # NUL, newlines, escapes
        return None
    try:
        name.encode("utf-8")  # a name tarfile decoded with surrogates cannot be shown or written
    except UnicodeEncodeError:
        return None
    parts = [p for p in PurePosixPath(name).parts if p != "."]
    if not parts or ".." in parts:
        return None
    return "/".join(parts)


def _walk(path: Path, problems: list[str], visit: Callable[[str, tarfile.TarInfo, IO[bytes]], None]) -> None:
    """``visit`` each readable regular member of ``path`` with its safe name and an open reader; every member left
    out, and an archive cut short or too large, adds a line to ``problems`` (what was visited before stays)."""
    seen: set[str] = set()
    count = 0
    try:
        with (
            os.fdopen(
                open_regular(path, root=path.parent), "rb"
            ) as raw,  # a link or FIFO swapped in meanwhile: not read
            lzma.open(raw, "rb") as xz,
            tarfile.open(fileobj=_Capped(xz, MAX_UNPACKED_BYTES), mode="r|") as tar,
        ):
            for info in tar:
                count += 1
                if count > MAX_MEMBERS:
                    problems.append(f"{path}: more than {MAX_MEMBERS} members; the rest left out")
                    return
                name = safe_name(info.name)
                if info.isdir():
                    continue
                if name is None:
                    problems.append(f"{path}: member {info.name!r:.120} leaves the archive's root; left out")
                elif not info.isfile():
                    problems.append(f"{path}: member {name!r:.120} is a link or device, not a file; left out")
                elif name in seen:
                    problems.append(f"{path}: member {name!r:.120} appears twice; the first kept")
                else:
                    reader = tar.extractfile(info)
                    if reader is not None:  # always, for a regular member
                        seen.add(name)
                        visit(name, info, reader)
    except _TooLarge:
        problems.append(
            f"{path}: unpacks to more than {MAX_UNPACKED_BYTES} bytes; what follows member {count} left out"
        )
    except UnsafeFileError as exc:
        problems.append(f"{path}: not read ({exc.why})")
    except (tarfile.TarError, lzma.LZMAError, EOFError, OSError, ValueError) as exc:
        problems.append(f"{path}: not a readable archive after {count} member(s) ({exc}); the rest left out")


@dataclasses.dataclass(frozen=True, kw_only=True)
class Contents:
    """What the report needs of an archive: its records' bytes (sorted by name), each other member's end
    (``LOG_TAIL_BYTES`` at most) and its size, and the lines naming what was left out."""

    path: Path
    records: tuple[tuple[str, bytes], ...]
    tails: Mapping[str, tuple[bytes, int]]
    problems: tuple[str, ...]


def _tail(reader: IO[bytes]) -> bytes:
    kept = b""
    while chunk := reader.read(_CHUNK):
        kept = (kept + chunk)[-LOG_TAIL_BYTES:]
    return kept


def _read(path: Path) -> Contents:
    problems: list[str] = []
    records: list[tuple[str, bytes]] = []
    tails: dict[str, tuple[bytes, int]] = {}

    def visit(name: str, info: tarfile.TarInfo, reader: IO[bytes]) -> None:
        if not (name.startswith("records/") and name.endswith(".json")):
            tails[name] = (_tail(reader), info.size)
        elif info.size > MAX_RECORD_BYTES:
            problems.append(f"{path / name}: {info.size} bytes, more than a record's {MAX_RECORD_BYTES}; left out")
        else:
            records.append((name, reader.read(info.size)))

    _walk(path, problems, visit)
    records.sort(key=lambda item: PurePosixPath(item[0]))  # the order load_records gives the files
    return Contents(path=path, records=tuple(records), tails=tails, problems=tuple(problems))


@functools.lru_cache(maxsize=4)
def _cached(path: Path, _stamp: tuple[int, int, int]) -> Contents:
    return _read(path)


def contents(root: Path) -> Contents | None:
    """The archive of the records root ``root``, read once per version of the file; None where it has none. One that
    is no regular file (a link named ``records.tar.xz`` is not followed; a FIFO, socket or device is not opened) has
    no members and a problem line naming it, which the report shows as a warning."""
    path = root / ARCHIVE
    try:
        stat = path.lstat()
    except OSError:
        return None
    if path.is_symlink():
        return Contents(path=path, records=(), tails={}, problems=(f"{path}: a link, not followed; left out",))
    return _cached(path, (stat.st_ino, stat.st_size, stat.st_mtime_ns))


def archived_log(root: Path, log_path: str) -> tuple[bytes, int] | None:
    """The end of the log ``log_path`` (relative to ``root``) from the root's archive and its full size; None
    where the root has no archive or the archive has no such member."""
    found = contents(root)
    name = safe_name(log_path)
    if found is None or name is None:
        return None
    return found.tails.get(name)


def read_members(path: Path) -> dict[str, bytes]:
    """Every member of ``path`` whole, for re-packing; ArchiveError where any member is left out (a re-pack must
    not drop evidence silently)."""
    problems: list[str] = []
    members: dict[str, bytes] = {}
    _walk(path, problems, lambda name, info, reader: members.__setitem__(name, reader.read(info.size)))
    if problems:
        raise ArchiveError("; ".join(problems))
    return members


def _loose(folder: Path) -> list[Path]:
    """The files ``pack`` moves into the archive: the store's trees and the folder's own logs (not its
    subfolders': each evidence folder has its own archive)."""
    linked = [folder / tree for tree in _BULK if (folder / tree).is_symlink()]
    if linked:
        msg = f"{linked[0]}: a link; pack only a folder's own records/ and logs/ (copy what it points to)"
        raise ArchiveError(msg)
    files = [p for tree in _BULK for p in (folder / tree).rglob("*") if not p.is_dir()]
    files += [p for p in folder.glob("*.log") if not p.is_dir()]
    links = [p for p in files if p.is_symlink() or not p.is_file()]
    if links:
        msg = f"{links[0]}: a link or special file; pack only regular files (copy what it points to)"
        raise ArchiveError(msg)
    return sorted(files)


def _tar(members: Mapping[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in sorted(members):
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(members[name]), 0o644, _MTIME
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            tar.addfile(info, io.BytesIO(members[name]))
    return lzma.compress(buffer.getvalue(), format=lzma.FORMAT_XZ, preset=_PRESET)


def pack(folder: Path) -> tuple[int, int]:
    """Move ``folder``'s records/, logs/ and ``*.log`` into ``folder/records.tar.xz`` (joining what an archive there
    holds; a loose file replaces its member) and remove the loose files; returns (members, archive bytes).

    The archive is written to a temporary file, read back and compared member by member before anything is removed.
    """
    archive = folder / ARCHIVE
    members = read_members(archive) if archive.exists() else {}
    loose = _loose(folder)
    for path in loose:
        members[path.relative_to(folder).as_posix()] = path.read_bytes()
    if not members:
        msg = f"{folder}: nothing to pack (no records/, logs/ or *.log)"
        raise ArchiveError(msg)
    data = _tar(members)
    tmp = folder / f".{ARCHIVE}.tmp"
    tmp.write_bytes(data)
    try:
        if read_members(tmp) != members:
            msg = f"{tmp}: reads back different from what was packed; nothing removed"
            raise ArchiveError(msg)
    except ArchiveError:
        tmp.unlink()
        raise
    os.replace(tmp, archive)
    for path in loose:
        path.unlink()
    for tree in _BULK:  # the emptied folders, deepest first
        for sub in sorted((folder / tree).rglob("*"), key=lambda p: len(p.parts), reverse=True):
            if sub.is_dir() and not any(sub.iterdir()):
                sub.rmdir()
        if (folder / tree).is_dir() and not any((folder / tree).iterdir()):
            (folder / tree).rmdir()
    return len(members), len(data)
