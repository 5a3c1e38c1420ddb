"""The end of each run's log and its last Python traceback, read once before a report is rendered.

The renderers take what a report shows from ``ReportData`` alone; this is the one place where the report
opens a run's log. A log is written by the code under test, so it is read with limits (only its end, only
``LOG_TAIL_LINES`` lines kept) and never outside the records root it came from.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pandas as pd

from reprobisect.report.archive import LOG_TAIL_BYTES, archived_log
from reprobisect.util.files import inside
from reprobisect.util.safe_read import UnsafeFileError, open_regular

__all__ = ["LOG_TAIL_LINES", "LogExcerpt", "log_excerpts", "log_tail", "traceback_text"]

LOG_TAIL_LINES = 200
_MAX_LOG_BYTES = LOG_TAIL_BYTES  # read only the end of a runaway log (2 MB; an archived log's end is as long)
_TRACEBACK_HEAD = "Traceback (most recent call last):"


@dataclasses.dataclass(frozen=True, kw_only=True)
class LogExcerpt:
    """What a report shows of one run's log: its last lines, how many it has, and its last traceback."""

    tail: str
    lines: int
    traceback: str


def log_tail(path: Path, lines: int = LOG_TAIL_LINES, *, root: Path | None = None) -> tuple[str, int]:
    """The last ``lines`` lines of a log and how many it has; a readable note when it is missing or no regular file
    under ``root`` (its own folder when None): a FIFO planted as a log must not hang the report (``util.safe_read``)."""
    try:
        with os.fdopen(open_regular(path, root=path.parent if root is None else root), "rb") as handle:
            size = handle.seek(0, 2)
            handle.seek(max(0, size - _MAX_LOG_BYTES))
            end = handle.read(_MAX_LOG_BYTES)
    except UnsafeFileError as exc:
        return f"(log not readable: {exc.why})", 0
    except OSError as exc:
        return f"(log not readable: {exc})", 0
    return _lines_of(end, lines)


def _lines_of(end: bytes, lines: int) -> tuple[str, int]:
    """The last ``lines`` lines of a log's end (its last ``_MAX_LOG_BYTES``) and how many lines that end has."""
    all_lines = end.decode("utf-8", errors="replace").splitlines()
    return "\n".join(all_lines[-lines:]), len(all_lines)


def traceback_text(log: str, max_lines: int = 80) -> str:
    """The last Python traceback in a log, from its header through the exception line(s)."""
    lines = log.splitlines()
    heads = [i for i, line in enumerate(lines) if line.strip().endswith(_TRACEBACK_HEAD)]
    if not heads:
        return ""
    block: list[str] = []
    for line in lines[heads[-1] :]:
        block.append(line)
        body = line.split("]: ", 1)[-1] if line.startswith("[rank") else line
        if len(block) > 1 and body and not body.startswith((" ", "\t", "^", "~")):
            break  # the unindented exception line ends the traceback
    return "\n".join(block[:max_lines])


def log_excerpt(root: Path, log_path: str) -> LogExcerpt:
    """One run's excerpt; ``log_path`` is relative to the records ``root`` and must stay under it. A log that is not
    a file there is read from the root's archive (``report.archive``), where one holds it.

    ``load_records`` already leaves out records whose log is elsewhere; checking again here, where the file
    is opened, keeps a frame from another source (or a link changed since) from reading outside the root.
    """
    if not inside(root, log_path):
        return LogExcerpt(tail=f"(log not read: {log_path!r:.120} is outside {root})", lines=0, traceback="")
    packed = None if os.path.lexists(root / log_path) else archived_log(root, log_path)
    tail, total = log_tail(root / log_path, root=root) if packed is None else _lines_of(packed[0], LOG_TAIL_LINES)
    return LogExcerpt(tail=tail, lines=total, traceback=traceback_text(tail))


def log_excerpts(frame: pd.DataFrame) -> dict[str, LogExcerpt]:
    """``{run_id: excerpt}`` for every run of the long frame, each log read under its own records root.

    The frame's ``source`` column is the root a run's record was loaded from and ``log`` its ``log_path``
    (``report.frame.records_frame``): runs merged from several machines each keep their own root.
    """
    return {
        str(run_id): log_excerpt(Path(str(source)), str(log))
        for run_id, source, log in zip(frame["run_id"], frame["source"], frame["log"], strict=True)
    }
