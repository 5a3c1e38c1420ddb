"""What the harness sees of a run from outside while it runs: its processes and their GPU memory.

A run's own word on its memory (the bootstrap's exit event) is a claim: a script can print any figure. The
harness measures instead. Its peak GPU memory is sampled here with ``nvidia-smi --query-compute-apps`` for the
run's processes (the child, every descendant and its process group, as ``/proc`` shows them), only where
``nvidia-smi`` lists a GPU; a machine without one never gets a GPU figure, whatever the run printed. The pids
seen also tell the kernel log's OOM kills of this run from others' (``run/oom.py``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import itertools
import os
import shutil
import threading
from pathlib import Path

from reprobisect.errors import ToolError
from reprobisect.util.cmd import run_tool

__all__ = ["GPU_SOURCE", "RunWatch", "WatchResult", "gpu_memory_by_pid", "machine_gpus", "peak_rss", "process_tree"]

GPU_SOURCE = "nvidia-smi, sampled by the harness every {every:g} s: the run's processes together"
_MAX_PIDS = 4096  # pids remembered per run
_MIB = 2**20


@functools.cache
def machine_gpus() -> dict[str, str]:
    """``{name: driver}`` of the GPUs ``nvidia-smi`` lists here; empty where it is missing or fails."""
    tool = shutil.which("nvidia-smi")
    if tool is None:
        return {}
    query = [tool, "--query-gpu=name,driver_version", "--format=csv,noheader"]
    try:
        out = run_tool(query, what="nvidia-smi", timeout=60, check=False).stdout
    except ToolError:
        return {}
    rows = [line.rsplit(",", 1) for line in out.splitlines() if line.count(",") >= 1]
    return {name.strip(): driver.strip() for name, driver in rows}


def gpu_memory_by_pid() -> dict[int, int] | None:
    """Bytes of GPU memory each process uses now (summed over GPUs), as ``nvidia-smi`` reports; None when it
    cannot say."""
    tool = shutil.which("nvidia-smi")
    if tool is None:
        return None
    query = [tool, "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"]
    try:
        done = run_tool(query, what="nvidia-smi", timeout=30, check=False)
    except ToolError:
        return None
    if done.returncode != 0:
        return None
    used: dict[int, int] = {}
    for line in done.stdout.splitlines():
        pid, _, mib = (part.strip() for part in line.partition(","))
        if pid.isdigit() and mib.isdigit():
            used[int(pid)] = used.get(int(pid), 0) + int(mib) * _MIB
    return used


def _stat(pid: str, proc: Path) -> tuple[int, int] | None:
    """(parent pid, process group) of one ``/proc`` entry; None when it is gone."""
    try:
        text = (proc / pid / "stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    fields = text.rpartition(")")[2].split()  # the name in parentheses may hold spaces and ')': state ppid pgrp ...
    try:
        return int(fields[1]), int(fields[2])
    except (IndexError, ValueError):
        return None


def process_tree(root: int, proc: Path = Path("/proc")) -> set[int]:
    """``root``, its descendants and the members of its process group, as ``/proc`` shows them now."""
    parents: dict[int, int] = {}
    found = {root}
    with contextlib.suppress(OSError):
        for entry in os.scandir(proc):
            if entry.name.isdigit() and (stat := _stat(entry.name, proc)) is not None:
                parents[int(entry.name)] = stat[0]
                if stat[1] == root:
                    found.add(int(entry.name))
    children: dict[int, list[int]] = {}
    for pid, parent in parents.items():
        children.setdefault(parent, []).append(pid)
    todo = list(found)  # the group's members' descendants too
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


@dataclasses.dataclass(frozen=True, kw_only=True)
class WatchResult:
    """What the watch saw: the run's pids, and its peak GPU memory (None without a GPU, or where no process
    of the run showed on one) with how it was measured."""

    pids: frozenset[int]
    gpu_peak_bytes: int | None
    gpu_source: str | None


class RunWatch:
    """A thread that samples a running child's processes (and, on a machine with a GPU, their GPU memory) every
    ``every`` seconds until ``stop``."""

    def __init__(self, root: int, *, every: float = 1.0, gpu: bool | None = None, pids: bool = True) -> None:
        self.root, self.every = root, every
        self.gpu = bool(machine_gpus()) if gpu is None else gpu
        self.pids_wanted = pids or self.gpu
        self.pids: set[int] = {root}
        self.peak: int | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name=f"watch-{root}")
        if self.pids_wanted:
            self._thread.start()

    def _run(self) -> None:
        # soon after the start as well: a run that dies in its first second still shows its processes
        for wait in itertools.chain((0.05, 0.25), itertools.repeat(self.every)):
            try:
                self.sample()
            except KeyboardInterrupt:  # a stop of the whole harness (Ctrl-C, timeout -s INT): the main thread says it
                return
            if self._stop.wait(min(wait, self.every)):
                return

    def sample(self) -> None:
        """One look: the run's processes now, and (with a GPU) the GPU memory they hold together."""
        tree = process_tree(self.root)
        if len(self.pids) < _MAX_PIDS:
            self.pids |= set(sorted(tree)[: _MAX_PIDS - len(self.pids)])
        if not self.gpu:
            return
        used = gpu_memory_by_pid()
        if used is None:
            return
        mine = [used[pid] for pid in tree if pid in used]
        if mine:
            self.peak = max(self.peak or 0, sum(mine))

    def stop(self) -> WatchResult:
        """End the sampling and say what it saw."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=60)
        source = GPU_SOURCE.format(every=self.every) if self.peak is not None else None
        return WatchResult(pids=frozenset(self.pids), gpu_peak_bytes=self.peak, gpu_source=source)


_MAX_RSS_KIB = 2**50


def peak_rss(harness_kib: int | None, status: dict[str, object], *, waited: bool) -> tuple[int | None, str | None]:
    """The run's peak RSS in bytes and how it was measured.

    A child's ``ru_maxrss`` counts the size of the process it was forked from, so the harness's own ``os.wait4``
    of its child says little of a small run. A waited run's figure comes from its waiter (the harness's small
    process, the run's parent: ``run/child/waiter.py``), and none where the waiter could not say (killed with the
    group at a timeout).
    """
    inside = status.get("maxrss_kib")
    if waited:
        if type(inside) is int and 0 < inside <= _MAX_RSS_KIB:
            return inside * 1024, "wait4 by the harness's waiter: the run's largest process"
        return None, None
    if harness_kib:
        return harness_kib * 1024, "wait4 by the harness: its child's largest process (the harness's size included)"
    return None, None
