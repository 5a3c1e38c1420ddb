"""Pinning a running child, and everything it started, to its cores once it starts training.

Pinning each GPU run to a core of its own is what keeps its step times steady (a CV of 5 % at most over repeats
on the H200, against 20-40 % unpinned). Pinning it from its start made it pay for that where nothing is timed:
Python's imports, CUDA's initialisation and DeepSpeed's set-up ran on one core, and eight runs at once took
28-34 s each for a second of training. So a run starts with every core the harness may use and is pinned when
its first step is reported: from then on each of its processes and threads runs on the run's own cores, and
what it starts later inherits them. A run that reports no steps has no step times to keep steady and is never
pinned.

``sched_setaffinity`` pins one thread, so a running tree is pinned thread by thread, found through ``/proc``
(processes whose parent chain leads to the child; a sandbox's own PID namespace does not hide them from here).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable
from pathlib import Path

__all__ = ["STEP_MARK", "PinAtFirstStep", "descendants", "pin_tree"]

STEP_MARK = b'"event": "step"'  # how a step event line looks (json.dumps of the repros' instruments)
_PROC = Path("/proc")


def _parent(stat: str) -> int | None:
    """The parent pid in a ``/proc/PID/stat`` line (the command name, in parentheses, may hold anything)."""
    _, close, rest = stat.rpartition(")")
    fields = rest.split()
    if not close or len(fields) < 2 or not fields[1].isdigit():
        return None
    return int(fields[1])


def _parents(proc: Path = _PROC) -> dict[int, int]:
    """Every visible process's parent, read once."""
    parents = {}
    for entry in proc.iterdir() if proc.is_dir() else ():
        if not entry.name.isdigit():
            continue
        try:
            parent = _parent((entry / "stat").read_text(encoding="utf-8", errors="replace"))
        except OSError:  # gone meanwhile
            continue
        if parent is not None:
            parents[int(entry.name)] = parent
    return parents


def descendants(root: int, parents: dict[int, int] | None = None) -> list[int]:
    """``root`` and every process below it, parents before children."""
    parents = _parents() if parents is None else parents
    children: dict[int, list[int]] = {}
    for pid, parent in parents.items():
        children.setdefault(parent, []).append(pid)
    found, queue = [], [root]
    while queue:
        pid = queue.pop(0)
        if pid in found:
            continue
        found.append(pid)
        queue += sorted(children.get(pid, ()))
    return found


def _threads(pid: int) -> Iterable[int]:
    try:
        return [int(entry.name) for entry in (_PROC / str(pid) / "task").iterdir() if entry.name.isdigit()]
    except OSError:
        return []


def pin_tree(root: int, cpus: tuple[int, ...]) -> int:
    """Pin every thread of ``root`` and its descendants to ``cpus``; the number of threads pinned. A thread that
    ends meanwhile, or a platform without affinity, is passed over: pinning is about steady timings, never
    about whether the run goes on."""
    pinned = 0
    for pid in descendants(root):
        for tid in _threads(pid):
            with contextlib.suppress(OSError, AttributeError):
                os.sched_setaffinity(tid, cpus)
                pinned += 1
    return pinned


class PinAtFirstStep:
    """Watches a child's output and pins its process tree to ``cpus`` once the first step event appears (a mark
    split between two reads is found too: the end of the last read is kept)."""

    def __init__(self, pid: int, cpus: tuple[int, ...]) -> None:
        self.pid, self.cpus = pid, cpus
        self.done = not cpus
        self.carry = b""

    def __call__(self, chunk: bytes) -> None:
        if self.done:
            return
        seen = self.carry + chunk
        if STEP_MARK in seen:
            self.done = True
            pin_tree(self.pid, self.cpus)
        self.carry = seen[-len(STEP_MARK) :]
