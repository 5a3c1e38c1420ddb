"""``nightly --slower-than`` on real DeepSpeed releases (issue #38): 0.18.5 made a ZeRO-2 step of a model with many
parameter tensors about eight times slower than 0.18.4 (PR #7780; tests/integration/test_slowdown_real.py). Night 0
seeds 0.18.4 with the slowdown script; night 1 pretends the index ends at 0.18.5: its run is flagged by the screen,
the timing search here (every run made again, alone, three at least a release) confirms it, and the night exits 1
with a title that names the ratio. Nothing fails: the regression is the timing alone.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, base_python
from tests.integration.release_history import build_history
from tests.integration.test_real_cells import envs_dir  # noqa: F401 - shared fixture
from tests.system_tools import DEEPSPEED_OPS

pytestmark = [pytest.mark.slow, pytest.mark.requires_tool(*DEEPSPEED_OPS)]

SCRIPT = ROOT / "tests" / "resources" / "scripts" / "slowdown" / "zero2_many_params.py"


def _night(tmp_path: Path, envs: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], dict]:
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "reprobisect", "nightly", "--backend", "cpu", "--script", str(SCRIPT)]
    cmd += ["--instruments", "--env", "OMP_NUM_THREADS=1", "--lightning", "2.6.6", "--slower-than", "50"]
    cmd += ["--max-repeats", "6", *args, "--state", str(tmp_path / "state"), "--out", str(out)]
    cmd += ["--envs", str(envs), "--base-python", base_python(), "--config", str(ROOT / "matrix.yaml")]
    cmd += ["--", "--steps", "15"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, check=False, cwd=ROOT)
    summary = out / "nightly.json"
    return done, (json.loads(summary.read_text()) if summary.exists() else {})


def test_a_release_that_made_a_step_slower_is_a_regression_of_the_night(tmp_path: Path, envs_dir: Path) -> None:  # noqa: F811
    """Measured: about 2 minutes with warm cells on 2 cores (a seed run, a night's run, 3 + 3 timed runs)."""
    seeded, _ = _night(tmp_path, envs_dir, "--baseline-release", "0.18.4")
    assert seeded.returncode == 0, seeded.stdout[-3000:] + seeded.stderr[-3000:]
    night, summary = _night(tmp_path, envs_dir, "--up-to", "0.18.5")
    text = night.stdout[-4000:] + night.stderr[-3000:]
    assert night.returncode == 1, text
    assert summary["regressed"] is True and summary["regressions"] == [], text  # no outcome regressed
    [slowdown] = summary["slowdowns"]
    assert slowdown["confirmed"] is True and slowdown["slower"] == [["0.18.5"]]
    assert summary["title"].startswith(
        "Nightly (cpu): deepspeed 0.18.5 slower than 0.18.4: script-zero2_many_params cpu-deepspeed step ×"
    )
    search = json.loads((tmp_path / "out" / slowdown["file"]).read_text())
    probes = {p["version"]: p["timing"] for p in search["probes"]}
    assert probes["0.18.5"]["low"] > 1.5 and probes["0.18.5"]["runs"] >= 3 and probes["0.18.4"]["runs"] >= 3
    body = (tmp_path / "out" / "nightly.md").read_text()
    assert "### Slower: script-zero2_many_params (cpu-deepspeed) across deepspeed" in body
    assert "**slower: deepspeed 0.18.5**" in body


def _main_night(tmp_path: Path, envs: Path, repo: Path) -> tuple[subprocess.CompletedProcess[str], dict]:
    out = tmp_path / "main-out"
    cmd = [sys.executable, "-m", "reprobisect", "nightly", "--git", str(repo), "--no-fetch", "--script", str(SCRIPT)]
    cmd += ["--instruments", "--env", "OMP_NUM_THREADS=1", "--backend", "cpu", "--form", "cpu-deepspeed"]
    cmd += ["--lightning", "2.6.6", "--slower-than", "100", "--max-repeats", "6"]
    cmd += ["--state", str(tmp_path / "main-state"), "--out", str(out), "--envs", str(envs)]
    cmd += ["--base-python", base_python(), "--config", str(ROOT / "matrix.yaml"), "--", "--steps", "15"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=2400, check=False, cwd=ROOT)
    summary = out / "nightly.json"
    return done, (json.loads(summary.read_text()) if summary.exists() else {})


@pytest.mark.scheduled  # 12 min 46 s at load 8-11 on 2 cores: a history from two sdists, a timing search over it
def test_main_moving_across_the_slower_commit_names_it(tmp_path: Path, envs_dir: Path) -> None:  # noqa: F811
    """DeepSpeed's main from 0.18.4's tree to 0.18.5's, one commit per changed file (release_history.py): the night
    at the tip flags the run, searches the commits, and names the commit of stage_1_and_2.py, #7780's file."""
    history = build_history(tmp_path / "history", "deepspeed", "0.18.4", "0.18.5", base_python())
    subprocess.run(["git", "-C", str(history.repo), "checkout", "-q", "--detach"], check=True)
    subprocess.run(["git", "-C", str(history.repo), "branch", "-f", "main", history.old_tag], check=True)
    seeded, _ = _main_night(tmp_path, envs_dir, history.repo)
    assert seeded.returncode == 0, seeded.stdout[-4000:] + seeded.stderr[-2000:]
    subprocess.run(["git", "-C", str(history.repo), "branch", "-f", "main", history.shas[-1]], check=True)
    night, summary = _main_night(tmp_path, envs_dir, history.repo)
    assert night.returncode == 1, night.stdout[-6000:] + night.stderr[-3000:]
    [slowdown] = summary["slowdowns"]
    culprit = history.sha_of("deepspeed/runtime/zero/stage_1_and_2.py")
    assert slowdown["confirmed"] and slowdown["culprits"][0]["commit"]["sha"] == culprit, slowdown
    assert "slower than last night's" in summary["title"] and culprit[:12] in summary["title"]
