"""One real bisection on the CPU over real DeepSpeed releases (the GAN's symptom changes at 0.16.5)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, base_python
from tests.integration.test_real_cells import envs_dir  # noqa: F401 - shared fixture
from tests.system_tools import DEEPSPEED_OPS

pytestmark = [pytest.mark.slow, pytest.mark.requires_tool(*DEEPSPEED_OPS)]


def _bisect(out: Path, envs: Path) -> dict:
    cmd = [
        sys.executable,
        "-m",
        "reprobisect",
        "bisect",
        "--repro",
        "gan",
        "--backend",
        "cpu",
        "--axis",
        "deepspeed",
        "--good",
        "0.16.3",
        "--bad",
        "0.16.6",
        "--all-transitions",
        "--jobs",
        "2",  # two probes at a time: CI's two cores
        "--lightning",
        "2.6.6",
        "--config",
        str(ROOT / "matrix.yaml"),
        "--out",
        str(out),
        "--envs",
        str(envs),
        "--base-python",
        base_python(),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=2400, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    [report] = out.glob("bisect-*.json")
    return json.loads(report.read_text())


def test_all_transitions_over_real_releases_then_nothing_reruns(tmp_path: Path, envs_dir: Path) -> None:  # noqa: F811
    report = _bisect(tmp_path / "reports", envs_dir)
    assert report["range"]["versions"] == ["0.16.3", "0.16.4", "0.16.5", "0.16.6"]
    [transition] = report["transitions"]
    assert (transition["last"], transition["first"]) == ("0.16.4", "0.16.5")
    assert transition["from"]["outcome"] == "REPRODUCED"
    assert transition["to"]["outcome"] == "OTHER_FAILURE"
    assert "already been reduced" in transition["to"]["signature"]
    assert report["runs"] == report["probes_made"] == 4
    again = _bisect(tmp_path / "reports", envs_dir)
    assert again["runs"] == 0
    assert again["transitions"] == report["transitions"]
