"""Issue #51, item 5, on real releases: a night whose new DeepSpeed release fails with the pinned Lightning runs the
regression with newer Lightning releases and says whose side the fix is on.

``frozen_copies.py`` fails where deepspeed >= 0.16.4 and lightning < 2.5.5 (each checked by hand in the releases'
sources; tests/integration/test_grid_real.py). Night 1 seeds DeepSpeed 0.16.0 with Lightning pinned at 2.5.2 (it
passes); night 2 takes 0.16.4 (``--up-to``): it fails with 2.5.2, a regression, and passes with the newest Lightning
tried. ``--lightning-up-to 2.6.0`` holds the releases tried to those out by 2.6.0 (2.5.2 … 2.6.0 on the index), so
a Lightning published later does not change the answer: the first Lightning that passes is 2.5.5.
"""

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

SCRIPT = ROOT / "tests" / "resources" / "scripts" / "grid" / "frozen_copies.py"
VERDICT = (
    "fails with lightning ≤ 2.5.4, passes with 2.5.5: the fix is Lightning's (or a Lightning release already has it)"
)


def _night(tmp_path: Path, envs: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], dict]:
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "reprobisect", "nightly", "--script", str(SCRIPT), "--backend", "cpu",
           "--form", "cpu-deepspeed", "--lightning", "2.5.2", "--jobs", "2", "--state", str(tmp_path / "state"),
           "--out", str(out), "--envs", str(envs), "--base-python", base_python(), "--config", str(ROOT / "matrix.yaml"),
           *args]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, check=False, cwd=ROOT)
    summary = out / "nightly.json"
    return done, (json.loads(summary.read_text()) if summary.exists() else {})


def test_a_regression_that_a_newer_lightning_mends_is_said_to_be_lightnings(tmp_path: Path, envs_dir: Path) -> None:  # noqa: F811
    seeded, _ = _night(tmp_path, envs_dir, "--baseline-release", "0.16.0")
    assert seeded.returncode == 0, seeded.stdout[-4000:] + seeded.stderr[-2000:]

    night, summary = _night(
        tmp_path, envs_dir, "--up-to", "0.16.4", "--max-releases", "1", "--lightning-up-to", "2.6.0"
    )
    text = night.stdout[-8000:] + night.stderr[-3000:]
    assert night.returncode == 1, text  # still a regression: it fails with the pinned Lightning
    assert summary["ran"] == ["0.16.4"] and summary["regressed"], text
    [side] = summary["other_side"]
    assert (side["deepspeed"], side["pinned_lightning"], side["newest_lightning"]) == ("0.16.4", "2.5.2", "2.6.0")
    assert (side["side"], side["last_failing"], side["first_passing"]) == ("lightning", "2.5.4", "2.5.5"), side
    assert side["verdict"] == VERDICT
    outcomes = {p["lightning"]: p["outcome"] for p in side["probes"]}
    assert (
        outcomes["2.5.2"] == outcomes["2.5.4"] == "OTHER_FAILURE" and outcomes["2.5.5"] == outcomes["2.6.0"] == "PASS"
    )
    assert len(outcomes) < 6  # a search over 2.5.2 … 2.6.0, not every release
    assert f"which side: script-frozen_copies cpu-deepspeed none on deepspeed 0.16.4: {VERDICT}" in night.stdout
    body = (tmp_path / "out" / "nightly.md").read_text()
    assert "### Lightning or DeepSpeed" in body and VERDICT in body
