"""Where one run's wall time went (``--profile``): the harness's own instants around the child, and the run's
word about its inside (``run/child/phase_clock.py``).

A GPU run of a script that trains for a second took 18-34 s, and every sweep, culprit search and minimization is
a multiple of it. To cut that cost one must see it: the harness times what it does before the child starts
(``prepare``), from the start to the bootstrap's first line (``start``: sandbox, waiter, interpreter, ``site``),
and after the child's last line (``teardown``: interpreter finalization, CUDA context, the waiter) and before the
record is written (``record``: reading the log, classifying, versions). The run says how long it spent importing,
initialising CUDA, in its just-in-time ops (the op cache's events), in the rest of the script, in other exit
handlers and in the bootstrap's exit report. Those figures are a claim: they are kept only when they fit inside
the harness's own instants, and they never decide anything.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["PHASES", "PROFILE_ENV", "ChildClock", "HarnessClock", "describe_phases", "run_phases"]

PROFILE_ENV = "REPROBISECT_PROFILE"  # "1": the bootstrap installs the phase clock, the harness keeps the phases
PHASES = (
    "prepare",
    "start",
    "bootstrap",
    "imports",
    "cuda_init",
    "ops",
    "script",
    "atexit",
    "report",
    "teardown",
    "record",
)
_SLACK = 0.5  # seconds a child's instant may lie outside the harness's before it is not believed


@dataclasses.dataclass(frozen=True, kw_only=True)
class ChildClock:
    """The ``profile`` event of a run: instants (seconds since the epoch) and summed seconds."""

    started: float
    script_started: float
    script_ended: float
    reported: float
    imports: float
    cuda_init: float
    atexit: float
    report: float


@dataclasses.dataclass(frozen=True, kw_only=True)
class HarnessClock:
    """The harness's instants around one run: execute began, child spawned, child exited, record ready."""

    began: float
    spawned: float
    exited: float
    recorded: float


def _believable(inside: ChildClock, outside: HarnessClock) -> bool:
    """The run's instants in order and within the harness's own (a run cannot claim time it did not have)."""
    order = (
        outside.spawned - _SLACK,
        inside.started,
        inside.script_started,
        inside.script_ended,
        inside.reported,
        outside.exited + _SLACK,
    )
    if any(a > b for a, b in itertools.pairwise(order)):
        return False
    inner = inside.script_ended - inside.script_started
    return inside.imports + inside.cuda_init <= inner + _SLACK and inside.atexit + inside.report <= (
        inside.reported - inside.script_ended + _SLACK
    )


def run_phases(
    outside: HarnessClock, inside: ChildClock | None, ops: Sequence[Mapping[str, Any]] = ()
) -> dict[str, float]:
    """Seconds per phase (``PHASES`` order, 3 decimals). Without a believable ``inside``, the child's time is
    one phase, ``run``."""
    phases: dict[str, float] = {"prepare": outside.spawned - outside.began}
    if inside is None or not _believable(inside, outside):
        phases["run"] = outside.exited - outside.spawned
    else:
        op_seconds = sum(float(op.get("seconds", 0.0)) for op in ops)
        inner = inside.script_ended - inside.script_started
        phases |= {
            "start": inside.started - outside.spawned,
            "bootstrap": inside.script_started - inside.started,
            "imports": inside.imports,
            "cuda_init": inside.cuda_init,
            "ops": min(op_seconds, max(0.0, inner - inside.imports - inside.cuda_init)),
            "script": max(0.0, inner - inside.imports - inside.cuda_init - op_seconds),
            "atexit": inside.atexit,
            "report": inside.report,
            "teardown": outside.exited - inside.reported,
        }
    phases["record"] = outside.recorded - outside.exited
    return {name: round(max(0.0, seconds), 3) for name, seconds in phases.items()}


def describe_phases(phases: Mapping[str, float]) -> str:
    """One line: each phase that took a hundredth of a second or more, then the sum."""
    shown = [f"{name.replace('_', ' ')} {seconds:.2f}" for name, seconds in phases.items() if seconds >= 0.01]
    return " · ".join(shown) + f" = {sum(phases.values()):.1f} s"
