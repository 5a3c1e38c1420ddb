"""What a run was given of the machine, as its record says it: the fairness of timing comparisons rests on it.

Two runs' step times compare only when they ran alike: pinned to as many cores, with as many threads, beside as
many other runs, on the same kind of CPU and GPU. None of that is part of a run's key (it changes how a run goes,
not what it runs), so a record reused from another session may have run otherwise; the record says how, and a
timing search that compares unlike runs says so (``model/fairness.py``).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["cpu_model", "run_resources"]


@functools.cache
def cpu_model() -> str:
    """The CPU's model name as the kernel reports it (``/proc/cpuinfo``), or ``unknown``."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "unknown"
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "model name" and value.strip():
            return value.strip()[:120]
    return "unknown"


def _allowed_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _load() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):
        return None


def run_resources(cpus: tuple[int, ...], env: Mapping[str, str], jobs: int) -> dict[str, Any]:
    """The record's ``config.resources``: cores pinned to (0: unpinned, the scheduler's choice), the cores the
    harness could use, threads (``OMP_NUM_THREADS`` as the run saw it), the matrix run's jobs (runs at once, at
    most), GPUs visible to it, the CPU's model, and the machine's load average over the minute before the run
    ended (work the harness did not start shows only there)."""
    visible = env.get("CUDA_VISIBLE_DEVICES")
    return {
        "load_1m": _load(),
        "pinned_cores": len(cpus),
        "allowed_cores": _allowed_cores(),
        "omp_threads": env.get("OMP_NUM_THREADS", "unset"),
        "jobs": jobs,
        "gpus_visible": "all" if visible is None else len([d for d in visible.split(",") if d.strip()]),
        "cpu_model": cpu_model(),
    }
