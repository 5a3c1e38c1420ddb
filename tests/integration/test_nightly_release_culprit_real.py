"""Issue #37, item 2, for a new release: with a clone (``--track releases --git CLONE``) the night that finds a
regression in a new DeepSpeed release names the commit and pull request between the two releases' tags, attaches a
minimized script and lists the fixes that pass, with no human step.

The clone is replayed from the 0.16.4 and 0.16.5 sdists (tests/integration/release_history.py: one commit per changed
file, tags at both releases). Night 1 seeds 0.16.4 (the pasted stray-gradient script passes); night 2 takes 0.16.5
(``--up-to``): the script fails, so the night bisects the releases (0.16.4 .. 0.16.5), then the commits between
their tags, and must name the commit of deepspeed/runtime/constants.py (DeepSpeed PR #7018's file) with its pull
request, a minimized script that fails on 0.16.5 and passes on 0.16.4, and ``back-to-0.16.4`` passing.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, base_python
from tests.integration.release_history import build_history
from tests.integration.test_real_cells import envs_dir  # noqa: F401 - shared fixture
from tests.system_tools import DEEPSPEED_OPS

pytestmark = [pytest.mark.slow, pytest.mark.requires_tool(*DEEPSPEED_OPS)]

SCRIPT = ROOT / "tests" / "resources" / "scripts" / "bisect" / "stray_grad_bf16.py"
CULPRIT = "deepspeed/runtime/constants.py"


def _night(tmp_path: Path, envs: Path, repo: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], dict]:
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "reprobisect", "nightly", "--track", "releases", "--git", str(repo), "--no-fetch",
           "--script", str(SCRIPT), "--backend", "cpu", "--form", "cpu-deepspeed", "--jobs", "2",
           "--minimize-budget", "60", "--state", str(tmp_path / "state"), "--out", str(out), "--envs", str(envs),
           "--base-python", base_python(), "--config", str(ROOT / "matrix.yaml"), *args]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=2400, check=False, cwd=ROOT)
    summary = out / "nightly.json"
    return done, (json.loads(summary.read_text()) if summary.exists() else {})


@pytest.mark.scheduled  # 5.5 minutes on two loaded cores: the main night's CI test covers the same follow-up
def test_a_new_release_regression_gets_its_commit_script_and_fix(tmp_path: Path, envs_dir: Path) -> None:  # noqa: F811
    history = build_history(tmp_path / "history", "deepspeed", "0.16.4", "0.16.5", base_python())
    culprit = history.sha_of(CULPRIT)
    seeded, summary = _night(tmp_path, envs_dir, history.repo, "--baseline-release", "0.16.4")
    assert seeded.returncode == 0, seeded.stdout[-4000:] + seeded.stderr[-2000:]

    night, summary = _night(tmp_path, envs_dir, history.repo, "--up-to", "0.16.5")
    text = night.stdout[-8000:] + night.stderr[-3000:]
    assert night.returncode == 1, text
    [found] = summary["regressions"]
    assert found["commit"]["sha"] == culprit, (found, text)
    number = re.search(r"\(#(\d+)\)$", found["commit"]["subject"]).group(1)
    assert found["commit"]["pull_request"] == f"deepspeedai/DeepSpeed#{number}"
    assert summary["title"].endswith(f"introduced by {culprit[:12]} (#{number})"), summary["title"]
    assert found["minimized"] is not None and found["minimized"]["tells_apart"], found
    assert "back-to-0.16.4" in found["fixes_passing"]
    body = (tmp_path / "out" / "nightly.md").read_text()
    assert "**Introduced by**" in body and "```python" in body and "`back-to-0.16.4`" in body
