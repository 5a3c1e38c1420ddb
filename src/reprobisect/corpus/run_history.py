"""The history of the accuracy table: one line per whole corpus run, kept beside the entries and committed.

Why: "k of n exact" on its own says where the harness stands today, not whether a change made it better or worse,
nor whether the corpus got slower to run. Each whole run (every entry the machine can run, no ``--entry``) appends
one JSON line — date, commit, k, n, wall seconds, backend — to ``corpus/history.jsonl``; ``corpus.html`` draws them
as a trend. A run of chosen entries is not the corpus's number and appends nothing.

The file is input like any other (a merge gone wrong, a hand edit): it is read through ``util/safe_read.py`` (no
FIFO, no link out of its folder, bounded size) and each line is checked field by field; a line that is not one the
harness writes is skipped and counted, never a traceback and never a point on the chart.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeGuard

from reprobisect.util.safe_read import UnsafeFileError, read_bounded

__all__ = ["HISTORY", "MAX_BYTES", "History", "Point", "append_point", "read_history"]

HISTORY = "history.jsonl"
MAX_BYTES = 4 << 20  # about 20,000 lines: a weekly run for centuries
_TEXT = 200  # characters of a text field
_MAX_ENTRIES = 10_000


@dataclasses.dataclass(frozen=True, kw_only=True)
class Point:
    """One whole run: when, which code, k of n exact, its wall time, the backend."""

    date: str
    commit: str
    k: int
    n: int
    wall_seconds: float
    backend: str


@dataclasses.dataclass(frozen=True, kw_only=True)
class History:
    """The points read, oldest first, and how many lines were skipped as not the harness's (with the first why)."""

    points: list[Point]
    skipped: int = 0
    why: str = ""


def _point(data: Mapping[str, Any]) -> Point:
    """A line's point, or ValueError naming the field that is wrong."""
    texts = {name: data.get(name) for name in ("date", "commit", "backend")}
    for name, value in texts.items():
        if not isinstance(value, str) or not value or len(value) > _TEXT:
            msg = f"{name} {str(value)[:40]!r} is not a text of 1 to {_TEXT} characters"
            raise ValueError(msg)
    k, n, wall = data.get("k"), data.get("n"), data.get("wall_seconds")
    if not (_count(k) and _count(n)) or not 0 <= k <= n <= _MAX_ENTRIES:
        msg = f"k {str(k)[:20]!r} and n {str(n)[:20]!r} are not counts with 0 <= k <= n <= {_MAX_ENTRIES}"
        raise ValueError(msg)
    if isinstance(wall, bool) or not isinstance(wall, (int, float)) or not math.isfinite(wall) or wall < 0:
        msg = f"wall_seconds {str(wall)[:20]!r} is not a number of seconds"
        raise ValueError(msg)
    return Point(
        date=str(texts["date"]), commit=str(texts["commit"]), k=k, n=n, wall_seconds=float(wall),
        backend=str(texts["backend"]),
    )  # fmt: skip


def _count(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def read_history(path: Path) -> History:
    """The points of ``path`` (none when it does not exist); a line that is not a point is skipped and counted; a
    file that cannot be read safely (a FIFO, a link out of its folder, too large) gives no points and says why."""
    if not path.exists() and not path.is_symlink():
        return History(points=[])
    try:
        raw = read_bounded(path, root=path.parent, max_bytes=MAX_BYTES)
    except UnsafeFileError as exc:
        return History(points=[], why=str(exc))
    points: list[Point] = []
    skipped, why = 0, ""
    for number, line in enumerate(raw.splitlines(), 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line.decode("utf-8"), parse_constant=_no_constant)
            if not isinstance(data, dict):
                msg = "not a JSON object"
                raise ValueError(msg)
            points.append(_point(data))
        except (ValueError, RecursionError) as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
            skipped += 1
            why = why or f"{path}:{number}: {str(exc)[:200]}"
    return History(points=points, skipped=skipped, why=why)


def _no_constant(name: str) -> float:
    msg = f"{name} is not a number JSON allows"
    raise ValueError(msg)


def append_point(path: Path, point: Point) -> None:
    """Append ``point`` as one line, in one write (``O_APPEND``: two runs appending at once do not interleave), never
    through a link."""
    line = (json.dumps(dataclasses.asdict(point), sort_keys=True, allow_nan=False) + "\n").encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags, 0o666)  # the umask decides, as for every file the harness writes
    try:
        if path.stat().st_size and not _ends_with_newline(path):
            os.write(fd, b"\n")  # a line cut short before (a full disk): the new one starts a line of its own
        os.write(fd, line)
    finally:
        os.close(fd)


def _ends_with_newline(path: Path) -> bool:
    with path.open("rb") as handle:
        handle.seek(-1, os.SEEK_END)
        return handle.read(1) == b"\n"
