"""The logs of a run's further ranks, and which rank failed first: read from the run's work folder as untrusted."""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path

from reprobisect.run.events import RankReport
from reprobisect.util.redact import redact_bytes

__all__ = ["failed_rank", "keep_rank_logs"]

_RANK_LOG_HEAD = 4 * 2**20  # what is kept of each further rank's log: its start and its end
_RANK_LOG_TAIL = 2 * 2**20


def keep_rank_logs(workdir: Path, log_path: Path, nproc: int) -> dict[int, Path]:
    """The logs of ranks 1..N-1, copied beside the run's log (``<log>.rank-N.log``) before the work folder goes.

    The run wrote them, so they are read as untrusted: never through a link (a rank could point its log at a
    secret of the host's), only regular files, and at most the first and last few MiB of each.
    """
    kept: dict[int, Path] = {}
    for rank in range(1, nproc):
        try:
            fd = os.open(workdir / "ranks" / f"rank-{rank}.log", os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            continue
        with os.fdopen(fd, "rb") as source:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                continue
            size = os.fstat(fd).st_size
            head = source.read(_RANK_LOG_HEAD)
            note, tail = b"", b""
            if size > _RANK_LOG_HEAD + _RANK_LOG_TAIL:
                source.seek(size - _RANK_LOG_TAIL)
                note = f"\n[reprobisect: {size - _RANK_LOG_HEAD - _RANK_LOG_TAIL} bytes dropped here]\n".encode()
            tail = source.read(_RANK_LOG_TAIL)
        target = log_path.with_name(f"{log_path.stem}.rank-{rank}.log")
        target.write_bytes(redact_bytes(head) + note + redact_bytes(tail))  # the user's secrets never kept
        kept[rank] = target
    return kept


def failed_rank(report: RankReport | None, nproc: int, rank_logs: Mapping[int, Path]) -> int | None:
    """The first rank to fail, as the launcher told it, when that tale fits the run (its number of ranks, a log
    for that rank); rank 0's failure is the run's own log. None with one rank, or when nothing failed."""
    if nproc == 1 or report is None or report.nproc != nproc or report.first_failed is None:
        return None
    first = report.first_failed
    return first if first == 0 or first in rank_logs else None
