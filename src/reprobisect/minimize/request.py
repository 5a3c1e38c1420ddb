"""What a minimization is asked to do (``MinimizeRequest``, from the command line, with its ``Budget``) and what it
answers (``MinimizeResult``, which ``outputs`` writes).

Imports nothing that runs a minimization (pyflakes, picire): the command builds its request before it imports the
pipeline, so a machine without them gets an error that names them, not an ImportError.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from reprobisect.run.sandbox import Confinement

if TYPE_CHECKING:  # the result's types; importing them at run time would import pyflakes
    from reprobisect.minimize.candidates import CandidateVerdict, Cells, FailureTarget
    from reprobisect.minimize.statements import Size

__all__ = ["Budget", "MinimizeRequest", "MinimizeResult"]


@dataclasses.dataclass(frozen=True)
class Budget:
    """When to stop: after ``seconds`` of reducing or ``runs`` executed runs (None: no limit)."""

    seconds: float | None = None
    runs: int | None = None

    def spent(self, started: float, runs: int) -> str | None:
        """Why the budget is spent, or None."""
        if self.seconds is not None and time.monotonic() - started >= self.seconds:
            return f"the time budget ({self.seconds:g} s)"
        if self.runs is not None and runs >= self.runs:
            return f"the run budget ({self.runs} runs)"
        return None


@dataclasses.dataclass(frozen=True, kw_only=True)
class MinimizeRequest:
    """A minimization as asked for on the command line."""

    script: Path
    bad: Mapping[str, str]
    good: Mapping[str, str] | None = None
    pins: Mapping[str, str] = dataclasses.field(default_factory=dict)  # held in both cells (--torch, ...)
    backend: Literal["auto", "cuda", "cpu"] = "auto"
    form: str | None = None
    script_args: tuple[str, ...] = ()
    expect: str | None = None
    shim: bool = False
    env: Mapping[str, str] = dataclasses.field(default_factory=dict)
    timeout: float | None = None
    cpus_per_run: int | None = None
    confinement: Confinement = dataclasses.field(default_factory=Confinement)
    jobs: int = 1
    keep_traceback: bool = True  # never try removing the statements the original's failure passed through
    budget: Budget = dataclasses.field(default_factory=Budget)
    out: Path = Path("reports")


@dataclasses.dataclass(frozen=True, kw_only=True)
class MinimizeResult:
    """What a minimization found, and where it wrote it."""

    folder: Path
    cells: Cells
    original: Size
    minimized: Size
    text: str
    verdict: CandidateVerdict  # the minimized script's own
    original_verdict: CandidateVerdict
    target: FailureTarget
    stopped: str
    passes: int
    candidates: int
    refused: int  # candidates answered without a run (they do not compile, or use a name they lost)
    runs: int  # runs executed (not taken from the store)
    seconds: float
    kept: str = ""  # the lines kept because a plain ``python`` run needs them (settings.py), said for people

    @property
    def interrupted(self) -> bool:
        """Stopped by Ctrl-C: the result is the best found so far."""
        return self.stopped.startswith("interrupted")
