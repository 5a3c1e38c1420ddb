"""Issue #31 on real packages: a long pasted GAN script (argument parsing, logging, a dataset, a sample grid,
checkpoints, a JSON summary) whose sanity check fails on DeepSpeed 0.16.5 and passes on 0.16.4. A script that does
not fail on the bad release is refused with its own exit code; Ctrl-C keeps a smaller script that still tells the
releases apart and leaves no run behind. The whole minimization (>= 5x) is not in CI yet: on 2 cores it takes longer
than CI allows (1.9x in 20 minutes, issue #31's notes).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT, base_python
from tests.integration.test_real_cells import envs_dir  # noqa: F401 - shared fixture
from tests.system_tools import DEEPSPEED_OPS

pytestmark = [pytest.mark.slow, pytest.mark.requires_tool(*DEEPSPEED_OPS)]

LONG = ROOT / "tests" / "resources" / "scripts" / "minimize" / "gan_bf16_long.py"
BAD, GOOD = "deepspeed==0.16.5", "deepspeed==0.16.4"


def _command(*args: str, out: Path, envs: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "reprobisect",
        *args,
        "--backend",
        "cpu",
        "--lightning",
        "2.6.6",
        "--out",
        str(out),
        "--envs",
        str(envs),
        "--base-python",
        base_python(),
        "--config",
        str(ROOT / "matrix.yaml"),
    ]


def test_a_script_that_passes_on_the_bad_release_is_refused(tmp_path: Path, envs_dir: Path) -> None:  # noqa: F811
    out = tmp_path / "out"
    cmd = _command("minimize", str(LONG), "--bad", GOOD, "--good", BAD, out=out, envs=envs_dir)
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 10, done.stdout[-3000:] + done.stderr[-3000:]
    assert "gives PASS" in done.stderr and "nothing to minimize" in done.stderr


def test_ctrl_c_keeps_the_best_so_far_and_leaves_no_run(tmp_path: Path, envs_dir: Path) -> None:  # noqa: F811
    out = tmp_path / "out"
    cmd = _command("minimize", str(LONG), "--bad", BAD, "--good", GOOD, "--jobs", "2", out=out, envs=envs_dir)
    process = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    log = out / "minimize" / "script-gan_bf16_long" / "progress.jsonl"
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and process.poll() is None:
        lines = log.read_text().splitlines() if log.is_file() else []
        if sum(1 for line in lines if json.loads(line)["interesting"]) >= 2:  # the original and one smaller
            break
        time.sleep(1)
    assert process.poll() is None, "the minimization ended before it could be interrupted"
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == 130, stdout[-3000:] + stderr[-3000:]
    folder = log.parent
    summary = json.loads((folder / "minimize.json").read_text())
    assert summary["stopped"].startswith("interrupted")
    assert summary["minimized"]["tokens"] < summary["original"]["tokens"]
    left = subprocess.run(["pgrep", "-f", str(folder)], capture_output=True, text=True, check=False)
    assert left.stdout.strip() == "", f"runs left behind: {left.stdout}"
    assert os.listdir(folder / "candidates")
