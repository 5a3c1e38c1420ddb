"""Issue #37 end to end on the CPU, offline: DeepSpeed's main moves, across a real regression's commit, from one
night to the next, in a clone replayed from the 0.16.4 and 0.16.5 sdists (tests/integration/release_history.py: one
commit per changed file, each subject naming a pull request).

Night 1: main is the commit just before the one that turned bf16's immediate_grad_update on by default (DeepSpeed PR
#7018, here the commit of deepspeed/runtime/constants.py): the script passes, that commit becomes main's baseline.
Night 2: main is the tip (0.16.5): the script fails, so the night names that commit and its pull request in the
title, attaches a minimized script that fails on the new main and passes on the old one, lists a fix that passes
(DeepSpeed back at last night's commit) and exits 1. Night 3: main has not moved: nothing runs, exit 0.

Measured on the 2-core CI machine, shared with a full test run, with a fresh cell folder (every commit's cell and op
built): 606 s in all, the nights 221 s (seed: builds the first commit's cell and ops), 345 s (tonight's cell, a
commit search, 75 s of minimizing, the override run) and 4 s; with the cells and ops built (the suite's shared
cell folder), 155 s: 9 s, 135 s and 1 s.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT, base_python
from tests.integration.release_history import build_history
from tests.integration.test_real_cells import envs_dir  # noqa: F401 - shared fixture
from tests.system_tools import DEEPSPEED_OPS

pytestmark = [pytest.mark.slow, pytest.mark.requires_tool(*DEEPSPEED_OPS)]

SCRIPT = ROOT / "tests" / "resources" / "scripts" / "bisect" / "stray_grad_bf16.py"
CULPRIT = "deepspeed/runtime/constants.py"  # the file of 0.16.5 that came with DeepSpeed PR #7018
BUDGET = "75"  # seconds of minimizing: enough to show the step, cheap for CI's two cores


def _night(tmp_path: Path, envs: Path, repo: Path) -> tuple[subprocess.CompletedProcess[str], dict]:
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "reprobisect", "nightly", "--git", str(repo), "--no-fetch", "--script", str(SCRIPT),
           "--backend", "cpu", "--form", "cpu-deepspeed", "--jobs", "2", "--minimize-budget", BUDGET,
           "--state", str(tmp_path / "state"), "--out", str(out), "--envs", str(envs),
           "--base-python", base_python(), "--config", str(ROOT / "matrix.yaml")]  # fmt: skip
    started = time.monotonic()
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=2400, check=False, cwd=ROOT)
    print(f"night: exit {done.returncode} in {time.monotonic() - started:.0f} s")
    summary = out / "nightly.json"
    return done, (json.loads(summary.read_text()) if summary.exists() else {})


def _move_main(repo: Path, sha: str) -> None:
    subprocess.run(["git", "-C", str(repo), "checkout", "-q", "--detach"], check=True)
    subprocess.run(["git", "-C", str(repo), "branch", "-f", "main", sha], check=True)


def test_main_moves_across_a_real_regression_then_stays(tmp_path: Path, envs_dir: Path) -> None:  # noqa: F811
    history = build_history(tmp_path / "history", "deepspeed", "0.16.4", "0.16.5", base_python())
    culprit = history.sha_of(CULPRIT)
    before = history.shas[history.shas.index(culprit) - 1]
    _move_main(history.repo, before)

    seeded, summary = _night(tmp_path, envs_dir, history.repo)
    assert seeded.returncode == 0, seeded.stdout[-6000:] + seeded.stderr[-3000:]
    assert summary["seeded"] and summary["commit"] == before and not summary["regressed"]

    _move_main(history.repo, history.shas[-1])
    night, summary = _night(tmp_path, envs_dir, history.repo)
    text = night.stdout[-8000:] + night.stderr[-3000:]
    assert night.returncode == 1, text
    assert len(summary.get("regressions", [])) == 1, text  # a night that died on an error writes no new summary
    [found] = summary["regressions"]
    assert found["commit"]["sha"] == culprit, (found, text)
    number = re.search(r"\(#(\d+)\)$", found["commit"]["subject"]).group(1)
    assert found["commit"]["pull_request"] == f"deepspeedai/DeepSpeed#{number}"
    assert found["last_good"]["sha"] == before
    assert summary["title"] == f"DeepSpeed main: {found['repro']} fails since {culprit[:12]} (#{number})"
    minimized = found["minimized"]
    assert minimized is not None and minimized["tells_apart"], found
    assert Path(minimized["path"]).read_text() == minimized["text"]
    assert "back-to-last-night" in found["fixes_passing"]
    body = (tmp_path / "out" / "nightly.md").read_text()
    assert f"## {summary['title']}" in body and "**Introduced by**" in body and "```python" in body
    assert f"bisect --script {SCRIPT} --axis deepspeed --git {history.repo}" in body  # the search's re-run
    assert f"minimize {SCRIPT} --bad deepspeed==git+file://" in body
    state = json.loads((tmp_path / "state" / "state.json").read_text())
    assert state["main"]["commit"] == history.shas[-1]

    quiet, summary = _night(tmp_path, envs_dir, history.repo)
    assert quiet.returncode == 0, quiet.stdout[-4000:] + quiet.stderr[-2000:]
    assert not summary["moved"] and not summary["regressed"] and summary["runs_executed"] == 0
    assert summary["title"].startswith("DeepSpeed main: still ")
