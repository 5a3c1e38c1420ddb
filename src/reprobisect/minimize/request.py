"""What a minimization is asked to do (``MinimizeRequest``, from the command line, with its ``Budget``) and what it
answers (``MinimizeResult``, which ``outputs`` writes).

Imports nothing that runs a minimization (pyflakes, picire): the command builds its request before it imports the
pipeline, so a machine without them gets an error that names them, not an ImportError.
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from reprobisect.errors import ConfigError
from reprobisect.run.sandbox import Confinement
from reprobisect.util.bounds import BUDGET_RUNS, BUDGET_SECONDS, cut

if TYPE_CHECKING:  # the result's types; importing them at run time would import pyflakes
    from reprobisect.minimize.candidates import CandidateVerdict, Cells, FailureTarget
    from reprobisect.minimize.statements import Size

__all__ = ["Budget", "MinimizeRequest", "MinimizeResult", "parse_budget"]


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


_BUDGET = re.compile(r"(\d+(?:\.\d+)?)\s*(s|sec|m|min|h|runs?)?", re.IGNORECASE)


def parse_budget(values: Sequence[str]) -> Budget:
    """``--budget 10m --budget 200runs`` as a Budget (seconds and runs; the first reached stops)."""
    seconds: float | None = None
    runs: int | None = None
    for value in values:
        match = _BUDGET.fullmatch(value.strip())
        if not match or float(match.group(1)) <= 0:
            msg = f"--budget {value!r}: expected seconds (600, 600s), minutes (10m), hours (1h) or runs (200runs)"
            raise ConfigError(msg)
        number, unit = float(match.group(1)), (match.group(2) or "s").lower()
        if unit.startswith("run"):
            runs = int(number)
            if not BUDGET_RUNS.holds(runs):
                raise ConfigError(BUDGET_RUNS.refusal(f"--budget {cut(value)}:", runs))
        else:
            seconds = number * {"s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600}[unit]
            if not BUDGET_SECONDS.holds(seconds):
                raise ConfigError(BUDGET_SECONDS.refusal(f"--budget {cut(value)}:", seconds))
    return Budget(seconds=seconds, runs=runs)
