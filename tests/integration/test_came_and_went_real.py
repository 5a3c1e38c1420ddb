"""Issue #28 on real packages: a pasted DeepSpeed script whose bug came with 0.16.5 and went with 0.17.1 (both ends
of the range pass), and a real git history built from the 0.16.4 and 0.16.5 sdists (one commit per changed file).

One triage command over the eight releases 0.16.4 … 0.17.1 must name the affected range, the release transitions at
both of its ends, and the commit (the file) that introduced it; the fixing side has no tag in this history and must
say so instead of guessing. Then ``bisect --all-transitions`` over the same releases must probe every one (reusing
the sweep's records) and give both transitions, where the search before it probed the two passing ends and said
"no transition".
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

SCRIPT = ROOT / "tests" / "resources" / "scripts" / "bisect" / "stray_grad_bf16.py"
RELEASES = ["0.16.4", "0.16.5", "0.16.6", "0.16.7", "0.16.8", "0.16.9", "0.17.0", "0.17.1"]
# the file of 0.16.5 that turned bf16's immediate_grad_update on by default (DeepSpeed PR #7018)
CULPRIT = "deepspeed/runtime/constants.py"


def _harness(*args: str, out: Path, envs: Path) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "reprobisect", *args, "--backend", "cpu", "--lightning", "2.6.6"]
    cmd += [
        "--out",
        str(out),
        "--envs",
        str(envs),
        "--base-python",
        base_python(),
        "--config",
        str(ROOT / "matrix.yaml"),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=2400, check=False)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-3000:]
    return done


def test_triage_names_the_range_its_ends_and_the_commit_then_bisect_finds_both_ends(
    tmp_path: Path,
    envs_dir: Path,  # noqa: F811
) -> None:
    history = build_history(tmp_path / "history", "deepspeed", "0.16.4", "0.16.5", base_python())
    out = tmp_path / "reports"
    range_pin = f">={RELEASES[0]},<={RELEASES[-1]}"
    done = _harness(
        "triage",
        str(SCRIPT),
        "--deepspeed",
        range_pin,
        "--git",
        str(history.repo),
        "--jobs",
        "2",
        out=out,
        envs=envs_dir,
    )
    summary = (out / "summary-script-stray_grad_bf16.md").read_text()
    answer = summary[summary.index("### The answer") :]
    assert f"**affected: deepspeed 0.16.5 … 0.17.0** (6 of {len(RELEASES)} releases)" in answer, done.stdout[-4000:]
    culprit = history.sha_of(CULPRIT)
    [introduced] = [line for line in answer.splitlines() if "introduced between 0.16.4 and 0.16.5" in line]
    assert f"**introduced by `{culprit[:12]}`**" in introduced and CULPRIT in introduced
    [fixed] = [line for line in answer.splitlines() if "fixed between 0.17.0 and 0.17.1" in line]
    assert "commit unknown" in fixed and "no tag of deepspeed 0.17.0" in fixed
    assert "nox -s triage --" in answer and f"--git {history.repo}" in answer  # the commands that re-run it
    [report] = out.glob("bisect-*-v0.16.4-v0.16.5-first-bad.json")
    search = json.loads(report.read_text())
    assert search["probes_made"] <= 9 and len(search["range"]["versions"]) == len(history.commits) + 1

    done = _harness(
        "bisect", "--script", str(SCRIPT), "--axis", "deepspeed", "--good", RELEASES[0], "--bad", RELEASES[-1],
        "--all-transitions", out=out, envs=envs_dir,
    )  # fmt: skip
    [report] = out.glob("bisect-*-0.16.4-0.17.1-all-transitions.json")
    found = json.loads(report.read_text())
    assert [(t["last"], t["first"]) for t in found["transitions"]] == [("0.16.4", "0.16.5"), ("0.17.0", "0.17.1")]
    assert found["probed"] == RELEASES and found["not_probed"] == [] and found["assumed_constant"] == []
    assert found["runs"] == 0 and found["reused"] == len(RELEASES)  # the sweep's records answered every probe
    assert "No transition" not in done.stdout
