"""Were the runs a timing verdict compares run alike? What a record says of how it ran, and where runs differ.

Issue #38's third point: runs compared get the same resources (cores pinned the same way, as many threads, as many
runs beside them, the same CPU and GPU, as many ranks, the same confinement). The harness gives the runs of one
search the same, but records are reused across sessions, so the check is on what the records say
(``config.resources``, written by ``run/resources.py``), never on what the harness meant to do.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from reprobisect.model.record import Record

__all__ = ["UNSAID", "busy", "how_it_ran", "unlike"]

UNSAID = "not recorded"
_RESOURCES = ("pinned_cores", "allowed_cores", "omp_threads", "jobs", "gpus_visible", "cpu_model")


def how_it_ran(record: Record) -> dict[str, Any]:
    """The facts of one run that bear on its timings; ``UNSAID`` where its record does not say (written before
    the harness recorded them)."""
    raw = record.config.get("resources")
    resources = raw if isinstance(raw, dict) else {}
    facts: dict[str, Any] = {name: resources.get(name, UNSAID) for name in _RESOURCES}
    gpu = record.gpu.get("name") if isinstance(record.gpu, dict) else None
    facts.update(gpu=gpu or "none", nproc=record.nproc, sandbox=record.sandbox.split(" ")[0] or "none")
    return facts


def unlike(records: Sequence[Record]) -> list[str]:
    """One line per fact in which the runs differ (``jobs: 1 (4 runs), 2 (3 runs)``); none when they ran alike.
    A fact no record says is not a difference, but a fact some records say and others do not is."""
    lines = []
    facts = [how_it_ran(r) for r in records]
    for name in (*_RESOURCES, "gpu", "nproc", "sandbox"):
        counts: dict[str, int] = {}
        for fact in facts:
            counts[str(fact[name])] = counts.get(str(fact[name]), 0) + 1
        if len(counts) > 1:
            shown = ", ".join(f"{value} ({count} run{'s' if count != 1 else ''})" for value, count in counts.items())
            lines.append(f"{name}: {shown}")
    return lines


def busy(records: Sequence[Record]) -> str | None:
    """Whether runs ended on a machine busier than its cores (load average above the cores the harness could
    use): work nobody in the search started, which makes timings noisier however alike the runs were given the
    machine. Said, never a verdict: the noise model's intervals already widen with it."""
    loads = []
    for record in records:
        raw = record.config.get("resources")
        resources = raw if isinstance(raw, dict) else {}
        load, cores = resources.get("load_1m"), resources.get("allowed_cores")
        if isinstance(load, (int, float)) and isinstance(cores, int) and cores > 0:
            loads.append((float(load), cores))
    over = [(load, cores) for load, cores in loads if load > cores]
    if not over:
        return None
    top, cores = max(over)
    return (
        f"{len(over)} of {len(records)} runs ended with the machine's load above its cores (up to {top:g} on {cores})"
    )
