"""What a record says about where its run ran: the harness's own measurement, a run's differing word as a claim."""

from __future__ import annotations

import platform
import sys
from pathlib import Path

import pytest

from reprobisect.run import measured
from reprobisect.run.events import ExitReport
from reprobisect.run.measured import measured_environment

PYTHON = Path(sys.executable)
H200 = {"name": "NVIDIA H200", "cuda": "13.0", "peak_memory_bytes": 2**30, "driver": "1"}


def honest_pair() -> tuple[str, str]:
    return platform.python_version(), platform.platform()


def test_an_honest_report_is_no_claim() -> None:
    honest = ExitReport(python=platform.python_version(), platform=platform.platform())
    where = measured_environment(honest, PYTHON, fallback_python="3")
    assert (where.python, where.platform, where.gpu, where.claimed) == (*honest_pair(), None, {})


def test_a_gpu_this_machine_has_stays_with_the_measured_driver(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(measured, "machine_gpus", lambda: {"NVIDIA H200": "580.1"})
    where = measured_environment(ExitReport(gpu=H200), PYTHON, fallback_python="3")
    assert where.gpu == {**H200, "driver": "580.1"} and where.claimed == {}


def test_a_gpu_this_machine_lacks_is_a_claim(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(measured, "machine_gpus", dict)
    forged = ExitReport(python="3.99", platform="FAKE-OS", gpu=H200)
    where = measured_environment(forged, PYTHON, fallback_python="3")
    assert (where.python, where.platform, where.gpu) == (*honest_pair(), None)
    assert where.claimed == {"python": "3.99", "platform": "FAKE-OS", "gpu": "NVIDIA H200"}
