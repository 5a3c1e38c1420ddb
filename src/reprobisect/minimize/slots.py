"""The run slots of one minimization, shared by every process that judges its candidates.

A candidate is judged in the bad cell first and, only when that run hits the target, in the good cell: two run
times for every interesting candidate, and interesting candidates are the chain each step of the search waits for.
The reducer seldom has ``jobs`` candidates to run at once (on the H100, ``--jobs 8`` averaged under two runs in
flight: most of ddmin's candidates are refused unrun, and the rewrites, the slice and each level wait for the
previous verdict). So a candidate takes a second slot when one is free and runs in both cells at once: its verdict
comes in one run's time. The good run is wasted when the bad one misses the target; it only ever uses a slot that
would have stood idle.

A slot is an exclusive ``flock`` on ``<folder>/<n>.lock``, ``n < jobs``, taken without waiting: processes forked by
picire and threads of the parent count alike, and a process that dies (picire stops the losers with SIGTERM) gives
its slots back with its descriptors. A candidate that finds no slot free (only a race between two) runs anyway.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

__all__ = ["RunSlots"]


class RunSlots:
    """``jobs`` slots as lock files under ``folder``."""

    def __init__(self, folder: Path, jobs: int) -> None:
        self.folder, self.jobs = folder, max(1, jobs)

    def free(self) -> int:
        """How many slots are free this moment: a hint, not a hold. Each is tried and given back on its own, so a
        process taking slots meanwhile finds at most one of them briefly held."""
        self._make_folder()
        count = 0
        for n in range(self.jobs):
            fd = self._try(n)
            if fd is not None:
                os.close(fd)
                count += 1
        return count

    def _make_folder(self) -> None:
        with contextlib.suppress(OSError):  # unwritable: no slot is ever free, and the runs go on without
            self.folder.mkdir(parents=True, exist_ok=True)

    def _try(self, n: int) -> int | None:
        """Slot ``n``'s lock file, locked, or None when another holds it (or the folder cannot be written)."""
        try:
            fd = os.open(self.folder / f"{n}.lock", os.O_RDWR | os.O_CREAT, 0o644)
        except OSError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return None
        return fd

    @contextlib.contextmanager
    def taken(self, wanted: int) -> Iterator[int]:
        """Up to ``wanted`` free slots, held for the block; yields how many were free (0 to ``wanted``)."""
        held: list[int] = []
        try:
            self._make_folder()
            for n in range(self.jobs):
                if len(held) == wanted:
                    break
                fd = self._try(n)  # None: held by another, or an unwritable folder (the run goes on without)
                if fd is not None:
                    held.append(fd)
            yield len(held)
        finally:
            for fd in held:
                os.close(fd)
