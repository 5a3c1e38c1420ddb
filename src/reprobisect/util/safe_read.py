"""One way to read a file that came from elsewhere: a record, a bisect result, a nightly state, a corpus truth.

A folder handed over by ``report --merge``, a nightly artifact or a corpus checkout may hold anything where a file
should be: a FIFO (``open()`` on it waits for a writer forever), a UNIX socket, a device (``/dev/zero`` linked in
never ends), a link to a file outside the folder (``~/.ssh/id_ed25519``), a file of gigabytes, JSON or TOML nested
100,000 deep (the parsers recurse until ``RecursionError``, and TOML's dotted keys parse into a dict that deep,
which the next ``repr`` overflows on), or a 5,000-digit number (``int()`` refuses more than 4,300 digits with a
``ValueError``). Every reader goes through here, so each of those is one :class:`UnsafeFileError` naming the file
and what is wrong, which the reader turns into a skip or a refusal of its own kind, never a hang or a traceback.

How a file is opened, race-free: its path resolved (links followed) must stay under the folder the reader trusts
(``root``); it is opened by that resolved path with ``O_NOFOLLOW`` (a link swapped in meanwhile is not followed) and
``O_NONBLOCK`` (a FIFO swapped in does not block the open), and ``fstat`` on the open descriptor must say a
regular file before a byte is read; at most ``max_bytes`` are read.
"""

from __future__ import annotations

import json
import os
import stat
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = [
    "MAX_DEPTH",
    "MAX_TOML_DOTS",
    "UnsafeFileError",
    "load_json_file",
    "load_toml_file",
    "open_regular",
    "parse_json",
    "read_bounded",
]

MAX_DEPTH = 64  # nesting levels; nothing the harness writes goes past ten
MAX_TOML_DOTS = 1000  # per line: a dotted key of 1,000 parts parses in 3 ms, one of 100,000 in minutes
_KINDS = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISLNK, "a link"),
)


class UnsafeFileError(ValueError):
    """A file cannot be read safely or parsed: ``path`` and ``why`` (the message is ``"{path}: {why}"``), so that a
    reader can say it in its own words."""

    def __init__(self, path: Path, why: str) -> None:
        super().__init__(f"{path}: {why}")
        self.path, self.why = path, why


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def _resolved_inside(path: Path, root: Path) -> Path:
    """``path`` with its links resolved, refused where that leaves ``root`` (a link out of the folder)."""
    try:
        resolved = path.resolve()
        top = root.resolve()
    except (OSError, RuntimeError) as exc:  # a link loop
        raise UnsafeFileError(path, f"cannot be resolved ({exc})") from exc
    if not resolved.is_relative_to(top):
        raise UnsafeFileError(path, f"a link to {str(resolved)[:120]!r}, outside {top}")
    return resolved


def open_regular(path: Path, *, root: Path) -> int:
    """A read-only descriptor of the regular file ``path``, which must lie under ``root`` once links are resolved;
    UnsafeFileError for anything else (a FIFO, a socket, a device, a folder, a link out of ``root``)."""
    resolved = _resolved_inside(path, root)
    try:
        mode = resolved.stat().st_mode  # named before opening: open() on a socket only says ENXIO
    except OSError as exc:
        raise UnsafeFileError(path, f"not readable ({exc.strerror or exc})") from exc
    if not stat.S_ISREG(mode):
        raise UnsafeFileError(path, f"{_kind(mode)}, not a regular file")
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(resolved, flags)
    except OSError as exc:  # ELOOP: a link swapped in after the check
        raise UnsafeFileError(path, f"not readable ({exc.strerror or exc})") from exc
    mode = os.fstat(fd).st_mode  # what was opened, whatever the path names by now
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise UnsafeFileError(path, f"{_kind(mode)}, not a regular file")
    return fd


def read_bounded(path: Path, *, root: Path, max_bytes: int) -> bytes:
    """The bytes of the regular file ``path`` under ``root`` (see :func:`open_regular`), refused past ``max_bytes``."""
    fd = open_regular(path, root=root)
    try:
        with os.fdopen(fd, "rb") as handle:
            data = handle.read(max_bytes + 1)
    except OSError as exc:
        raise UnsafeFileError(path, f"not readable ({exc.strerror or exc})") from exc
    if len(data) > max_bytes:
        raise UnsafeFileError(path, f"larger than {max_bytes} bytes")
    return data


def _too_deep(value: object) -> bool:
    """Is ``value`` nested deeper than ``MAX_DEPTH``? Without recursion: the value may be 100,000 levels deep."""
    stack: list[tuple[object, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_DEPTH:
            return True
        if isinstance(item, dict):
            stack.extend((child, depth + 1) for child in item.values())
        elif isinstance(item, list):
            stack.extend((child, depth + 1) for child in item)
    return False


def _parsed(path: Path, what: str, parse: Callable[[str], Any], raw: bytes) -> Any:
    try:
        value = parse(raw.decode("utf-8"))
    except RecursionError as exc:
        raise UnsafeFileError(path, f"{what} nested too deep to parse") from exc
    except (UnicodeDecodeError, ValueError) as exc:  # a syntax error, a 5,000-digit number, NaN where refused
        raise UnsafeFileError(path, f"not valid {what}: {str(exc)[:200]}") from exc
    if _too_deep(value):
        raise UnsafeFileError(path, f"{what} nested deeper than {MAX_DEPTH} levels")
    return value


def parse_json(raw: bytes, *, source: Path, parse_constant: Callable[[str], Any] | None = None) -> Any:
    """The JSON value of ``raw`` (a file's bytes, or an archive member's, named ``source`` in errors); UnsafeFileError
    for bytes that are not UTF-8 JSON, nest past ``MAX_DEPTH`` or hold a number ``int()`` refuses. ``parse_constant``
    as for ``json.loads`` (raise ValueError there to refuse NaN and Infinity)."""
    return _parsed(source, "JSON", lambda text: json.loads(text, parse_constant=parse_constant), raw)


def load_json_file(
    path: Path, *, root: Path, max_bytes: int, parse_constant: Callable[[str], Any] | None = None
) -> Any:
    """The JSON value of the file ``path`` under ``root``, read with :func:`read_bounded` and parsed with
    :func:`parse_json`: UnsafeFileError naming the file for anything either refuses."""
    return parse_json(read_bounded(path, root=root, max_bytes=max_bytes), source=path, parse_constant=parse_constant)


def load_toml_file(path: Path, *, root: Path, max_bytes: int) -> dict[str, Any]:
    """The TOML table of the file ``path`` under ``root``, with the same refusals as :func:`load_json_file`, and a
    line of more than ``MAX_TOML_DOTS`` dots refused before parsing: ``tomllib`` takes time quadratic in a dotted
    key's length (a ``[a.a.a…]`` header of 100,000 parts: minutes), and a dotted key never spans two lines."""
    raw = read_bounded(path, root=root, max_bytes=max_bytes)
    if any(line.count(b".") > MAX_TOML_DOTS for line in raw.splitlines()):
        raise UnsafeFileError(path, f"a line of more than {MAX_TOML_DOTS} dots (a dotted key nested too deep)")
    table: dict[str, Any] = _parsed(path, "TOML", tomllib.loads, raw)
    return table
