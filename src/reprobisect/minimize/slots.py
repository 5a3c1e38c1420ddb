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
        """How many slots are free this moment (taken and given back at once): a hint, not a hold."""
        with self.taken(self.jobs) as free:
            return free

    @contextlib.contextmanager
    def taken(self, wanted: int) -> Iterator[int]:
        """Up to ``wanted`` free slots, held for the block; yields how many were free (0 to ``wanted``)."""
        held: list[int] = []
        try:
            with contextlib.suppress(OSError):
                self.folder.mkdir(parents=True, exist_ok=True)
            for n in range(self.jobs):
                if len(held) == wanted:
                    break
                try:
                    fd = os.open(self.folder / f"{n}.lock", os.O_RDWR | os.O_CREAT, 0o644)
                except OSError:
                    continue  # an unwritable folder: the run goes on without a slot
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError:
                    os.close(fd)
                    continue
                held.append(fd)
            yield len(held)
        finally:
            for fd in held:
                os.close(fd)
