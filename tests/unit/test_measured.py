"""What a record says about where its run ran: the harness's own measurement, a run's differing word as a claim."""

from __future__ import annotations

import platform
import sys
from pathlib import Path

import pytest

from reprobisect.run import measured
from reprobisect.run.child_process import ChildResult
from reprobisect.run.events import ExitReport
from reprobisect.run.measured import measured_environment, measured_memory

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
    # its memory figure is the run's word, kept apart by measured_memory, never part of the GPU
    assert where.gpu == {"name": "NVIDIA H200", "cuda": "13.0", "driver": "580.1"} and where.claimed == {}


def test_a_gpu_this_machine_lacks_is_a_claim(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(measured, "machine_gpus", dict)
    forged = ExitReport(python="3.99", platform="FAKE-OS", gpu=H200)
    where = measured_environment(forged, PYTHON, fallback_python="3")
    assert (where.python, where.platform, where.gpu) == (*honest_pair(), None)
    assert where.claimed == {"python": "3.99", "platform": "FAKE-OS", "gpu": "NVIDIA H200"}


def _result(**measured: object) -> ChildResult:
    return ChildResult(
        exit_code=0, timed_out=False, wall_seconds=1.0, started_at="", finished_at="", log_path=Path("x"), **measured
    )


def test_the_issues_forged_gpu_peak_without_a_gpu_is_only_a_claim() -> None:
    forged = ExitReport(gpu={"peak_memory_bytes": 80_000_000_000}, peak_rss_bytes=5 * 2**40)
    memory = measured_memory(_result(peak_rss_bytes=50 * 2**20, rss_source="wait4 by the harness: x"), forged)
    assert (memory.rss_bytes, memory.gpu_bytes, memory.gpu_source) == (50 * 2**20, None, None)
    assert memory.claims == {"gpu_peak_memory_bytes": 80_000_000_000, "peak_rss_bytes": 5 * 2**40}
    assert memory.above == "peak RSS 5242880 MiB (measured 50)"  # no GPU measured: no GPU figure, even a claim's


def test_a_claim_is_cross_checked_against_the_gpu_measurement() -> None:
    honest = ExitReport(gpu={"peak_memory_bytes": 900 * 2**20}, peak_rss_bytes=100 * 2**20)
    measured_run = _result(peak_rss_bytes=120 * 2**20, gpu_peak_bytes=1000 * 2**20, gpu_source="nvidia-smi")
    assert measured_memory(measured_run, honest).above is None
    forged = ExitReport(gpu={"peak_memory_bytes": 80_000_000_000})
    assert measured_memory(measured_run, forged).above == "peak GPU memory 76294 MiB (measured 1000)"


def test_nothing_measured_is_no_figure() -> None:
    memory = measured_memory(_result(), ExitReport(peak_rss_bytes=2**30))
    assert (memory.rss_bytes, memory.rss_source, memory.above) == (None, None, None)
