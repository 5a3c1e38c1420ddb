"""Where a run ran, as the harness measures it: the cell interpreter's version and platform, the machine's GPUs.

A run reports its python, platform and GPU in its exit event (``run/child/bootstrap.py``), but that line is
printed by the run's own process, so it is a claim: a repro could make a CPU run read "python 3.99 · FAKE-OS ·
GPU FAKE H100" in report.md. The record keeps what the harness measured by a process of its own (the cell's
interpreter run outside the sandbox, ``nvidia-smi``); a claim that differs is kept beside it, labelled, in
``config.claimed``, and reports show it as a claim, never as the environment.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import shutil
from pathlib import Path
from typing import Any

from reprobisect.errors import ToolError
from reprobisect.run.events import ExitReport
from reprobisect.util.cmd import run_tool

__all__ = ["Measured", "interpreter", "machine_gpus", "measured_environment"]

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


def measured_environment(claimed: ExitReport, python: Path, *, fallback_python: str) -> Measured:
    """The run's python, platform and GPU as measured here, and each of the run's claims that differs.

    A GPU the run names stays (with its memory figures, which only the run can know) where this machine has
    a GPU of that name, with the driver ``nvidia-smi`` reports; otherwise the record has no GPU and the name
    is a claim. Without a claim of a GPU the run used none (torch never initialised CUDA).
    """
    version, platform = interpreter(Path(python))
    gpu = claimed.gpu
    gpus = machine_gpus() if gpu is not None else {}
    name = str(gpu.get("name") or "") if gpu is not None else ""
    found = gpu is not None and name in gpus
    kept = {**gpu, "driver": gpus[name]} if gpu is not None and found else None
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
