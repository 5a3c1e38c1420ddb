"""Where a run ran and what it used, as the harness measures it: the cell interpreter's version and platform, the
machine's GPUs, the run's peak memory, the versions installed in the cell.

A run reports its python, platform and GPU in its exit event (``run/child/bootstrap.py``), but that line is
printed by the run's own process, so it is a claim: a repro could make a CPU run read "python 3.99 · FAKE-OS ·
GPU FAKE H100" in report.md. The record keeps what the harness measured by a process of its own (the cell's
interpreter run outside the sandbox, ``nvidia-smi``); a claim that differs is kept beside it, labelled, in
``config.claimed``, and reports show it as a claim, never as the environment. The same holds for memory: the
record's peak RSS and GPU memory are the harness's own measurements (``run/child_process.py``, ``run/watch.py``); the
run's figures stay in ``claimed_memory``, and one above the measurement is named in ``config.claimed``. The
versions a run says it imported are checked against the cell's own metadata (``checked_versions``).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from reprobisect.cells.envs import CellEnv
from reprobisect.errors import ToolError
from reprobisect.model.record import StepTime
from reprobisect.run.child_process import ChildResult
from reprobisect.run.events import ExitReport
from reprobisect.run.watch import machine_gpus
from reprobisect.util.bwrap import TMP_SIZE_ENV, size_text
from reprobisect.util.cmd import run_tool

__all__ = [
    "Measured",
    "MeasuredMemory",
    "checked_steps",
    "checked_versions",
    "installed_versions",
    "interpreter",
    "machine_gpus",
    "measured_environment",
    "measured_memory",
    "tmp_full",
]

_INTERPRETER = "import json, platform; print(json.dumps([platform.python_version(), platform.platform()]))"


@dataclasses.dataclass(frozen=True, kw_only=True)
class Measured:
    """What a record says about where its run ran, and what the run claimed otherwise (``{"python": "3.99"}``)."""

    python: str | None
    platform: str | None
    gpu: dict[str, Any] | None
    claimed: dict[str, str]


@functools.cache
def interpreter(python: Path) -> tuple[str | None, str | None]:
    """The version and platform of a cell's interpreter, read by a process of the harness's own (None, None when
    it cannot say)."""
    try:
        out = run_tool([python, "-I", "-S", "-c", _INTERPRETER], what="reading the interpreter", timeout=120).stdout
        version, platform = json.loads(out)
    except (ToolError, ValueError, TypeError):
        return None, None
    return (str(version), str(platform)) if isinstance(version, str) and isinstance(platform, str) else (None, None)


def measured_environment(claimed: ExitReport, python: Path, *, fallback_python: str) -> Measured:
    """The run's python, platform and GPU as measured here, and each of the run's claims that differs.

    A GPU the run names stays (without its memory figures, claims kept apart by ``measured_memory``) where this
    machine has a GPU of that name, with the driver ``nvidia-smi`` reports; otherwise the record has no GPU and
    the name is a claim. Without a claim of a GPU the run used none (torch never initialised CUDA).
    """
    version, platform = interpreter(Path(python))
    gpu = claimed.gpu
    gpus = machine_gpus() if gpu is not None else {}
    name = str(gpu.get("name") or "") if gpu is not None else ""
    found = gpu is not None and name in gpus
    kept = {**_without_memory(gpu), "driver": gpus[name]} if gpu is not None and found else None
    claims = {
        "python": claimed.python if version and claimed.python != version else None,
        "platform": claimed.platform if platform and claimed.platform != platform else None,
        "gpu": (name or "unnamed") if gpu is not None and not found else None,
    }
    return Measured(
        python=version or fallback_python,
        platform=platform,
        gpu=kept,
        claimed={key: value for key, value in claims.items() if value},
    )


_MEMORY_KEYS = ("peak_memory_bytes", "total_memory_bytes")
_MIB = 2**20
_SLACK = 1.05  # a claim this much above the measurement (a sample may fall just after a peak) is not named


def _without_memory(gpu: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in gpu.items() if key not in _MEMORY_KEYS}


@dataclasses.dataclass(frozen=True, kw_only=True)
class MeasuredMemory:
    """A run's peak memory as the harness measured it (None: not measured, with no source), the run's own
    figures as claims, and the words for a claim above its measurement (``peak GPU memory 76294 MiB``)."""

    rss_bytes: int | None
    rss_source: str | None
    gpu_bytes: int | None
    gpu_source: str | None
    claims: dict[str, int]
    above: str | None


def measured_memory(result: ChildResult, claimed: ExitReport) -> MeasuredMemory:
    """The harness's figures from ``result``; the run's from its exit event, cross-checked where both exist.

    torch's peak allocation (what the bootstrap prints) is at most what ``nvidia-smi`` sees the process hold, and
    the bootstrap's own peak RSS at most the largest process's; a claim above the measurement is named.
    """
    claims = {
        "peak_rss_bytes": claimed.peak_rss_bytes,
        "gpu_peak_memory_bytes": (claimed.gpu or {}).get("peak_memory_bytes"),
    }
    kept = {key: value for key, value in claims.items() if isinstance(value, int)}
    above = [
        f"{what} {kept[key] / _MIB:.0f} MiB (measured {measured / _MIB:.0f})"
        for key, what, measured in (
            ("gpu_peak_memory_bytes", "peak GPU memory", result.gpu_peak_bytes),
            ("peak_rss_bytes", "peak RSS", result.peak_rss_bytes),
        )
        if measured is not None and key in kept and kept[key] > measured * _SLACK
    ]
    return MeasuredMemory(
        rss_bytes=result.peak_rss_bytes,
        rss_source=result.rss_source,
        gpu_bytes=result.gpu_peak_bytes,
        gpu_source=result.gpu_source,
        claims=kept,
        above=", ".join(above) or None,
    )


# Clock granularity between the run's timer and the harness's: a step timed by the run's clock can end a little
# after the harness's last reading, never by more than this share of the wall time plus this many seconds.
_STEP_SLACK_SHARE, _STEP_SLACK_SECONDS = 0.01, 0.05


def checked_steps(steps: list[StepTime], wall_seconds: float) -> tuple[list[StepTime], str | None]:
    """The run's step times when they fit inside the wall time the harness measured for it; else none, and why.

    Step times are the run's own word (``@@repro`` step events): a run cannot spend more time in its steps than it
    ran, so steps whose sum exceeds the harness's wall time are forged or from another clock, and a timing search
    must never compare them. The refusal is named in ``config.claimed`` (``steps``) and the run's figures stay in
    the record as a claim (``config.claimed_steps``), never as its steps.
    """
    total = math.fsum(step.seconds for step in steps)
    if total <= wall_seconds * (1 + _STEP_SLACK_SHARE) + _STEP_SLACK_SECONDS:
        return steps, None
    return (
        [],
        f"{len(steps)} step times summing to {total:.3f} s, above the run's measured wall time {wall_seconds:.3f} s",
    )


_WATCHED = ("torch", "deepspeed", "lightning", "pytorch-lightning", "lightning-fabric", "torchvision")


@functools.cache
def installed_versions(python: Path, extra: tuple[str, ...] = ()) -> dict[str, str]:
    """Versions installed in a cell, read by a process of the harness's own (the watched packages and ``extra``)."""
    names = sorted({*_WATCHED, *extra})
    code = (
        "import json, sys, importlib.metadata as m\n"
        "out = {}\n"
        "for n in json.loads(sys.argv[1]):\n"
        "    try: out[n] = m.version(n)\n"
        "    except m.PackageNotFoundError: pass\n"
        "print(json.dumps(out))\n"
    )
    try:
        found = json.loads(
            run_tool([python, "-c", code, json.dumps(names)], what="reading versions", timeout=120).stdout
        )
    except (ToolError, ValueError):
        return {}
    return {str(k): str(v) for k, v in found.items()} if isinstance(found, dict) else {}


def checked_versions(claimed: Mapping[str, str] | None, env: CellEnv) -> tuple[dict[str, str], str]:
    """The versions a run reported importing, checked against what the cell has installed.

    The report comes from inside the run's own process, so it is a claim: where it names another version
    of a package the cell pins than the cell's metadata does, the installed one is kept and the record
    says ``claimed, corrected: ...``. Without a report, the installed versions, marked ``installed``.
    """
    pinned = ("torch", *sorted(env.cell.packages))
    installed = installed_versions(env.python, pinned)
    if claimed is None:
        return installed, "installed"
    wrong = sorted(n for n in pinned if n in claimed and n in installed and not _same(claimed[n], installed[n]))
    if not wrong:
        return dict(claimed), "imported"
    note = ", ".join(f"{n} {claimed[n]!r} is {installed[n]}" for n in wrong)
    return {**claimed, **{n: installed[n] for n in wrong}}, f"claimed, corrected: {note}"[:300]


def _same(claimed: str, installed: str) -> bool:
    """A claim agrees with the metadata, or adds only a local build label the metadata leaves out: an index's
    CUDA torch says ``2.14.1+cu130`` when imported and ``2.14.1`` in its metadata."""
    return claimed == installed or ("+" not in installed and claimed.split("+", 1)[0] == installed)


_TMP_SLACK = 1 << 20  # less than this left: a write of a usual buffer fails with ENOSPC


def tmp_full(result: ChildResult) -> str | None:
    """Why a run may have failed that is not in its log: the sandbox's private /tmp was full as it ended (every
    write there failed with ENOSPC), said with its size and how to change it; None when it was not, or unconfined."""
    if result.tmp_space is None:
        return None
    free, size = result.tmp_space
    if free > max(_TMP_SLACK, size // 100):
        return None
    return (
        f"the sandbox's private /tmp (a tmpfs of {size_text(size)}) was full when the run ended: its writes there "
        f"failed with ENOSPC (No space left on device); {TMP_SIZE_ENV} sets the size"
    )
