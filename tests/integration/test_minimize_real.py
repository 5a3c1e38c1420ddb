"""Issue #31 on real packages: a long pasted GAN script (argument parsing, logging, a dataset, a sample grid,
checkpoints, a JSON summary) whose sanity check fails on DeepSpeed 0.16.5 and passes on 0.16.4. A script that does
not fail on the bad release is refused with its own exit code. The minimization runs until the script is 1.8 times
smaller in tokens, then Ctrl-C: the best so far still tells the releases apart (its own runs) and no run is left.
The issue's 5x is not reached: deletions and unwrapping plateau near 2.5-3x on this script (its settings are
threaded through a dataclass and argparse; see issue #31's notes).
"""

from __future__ import annotations

import json
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
# tokens, original / best. Measured on 2 cores, --jobs 2: 1.8x after about 2 minutes, 2x after 3.5 (this test took
# 219 s at 2x), 2.3x after 10, 2.6x after 15 (issue #31's notes). 1.8x keeps the test near two minutes of CI.
SHRUNK = 1.8
DEADLINE = 600.0  # seconds of minimizing before the test gives up waiting for SHRUNK


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


def _progress(log: Path) -> tuple[int | None, int | None]:
    """(the original's tokens, the smallest interesting candidate's) from the progress log so far."""
    entries = [json.loads(line) for line in log.read_text().splitlines()] if log.is_file() else []
    interesting = [e["tokens"] for e in entries if e["interesting"]]
    return (interesting[0], min(interesting)) if interesting else (None, None)


def test_the_long_script_shrinks_then_ctrl_c_keeps_the_best_and_leaves_no_run(
    tmp_path: Path,
    envs_dir: Path,  # noqa: F811
) -> None:
    """Minimize with two candidates at a time until the best is SHRUNK times smaller (or DEADLINE passes), then
    Ctrl-C: the best so far is on disk, still fails on 0.16.5 and passes on 0.16.4 (its own runs), and no run is
    left behind."""
    out = tmp_path / "out"
    cmd = _command("minimize", str(LONG), "--bad", BAD, "--good", GOOD, "--jobs", "2", out=out, envs=envs_dir)
    log = out / "minimize" / "script-gan_bf16_long" / "progress.jsonl"
    transcript = tmp_path / "minimize.txt"
    started = time.monotonic()
    with transcript.open("w") as sink:  # a file, not a pipe: minutes of progress lines never block the command
        process = subprocess.Popen(cmd, stdout=sink, stderr=subprocess.STDOUT, text=True)
        original, best = None, None
        while time.monotonic() - started < DEADLINE and process.poll() is None:
            original, best = _progress(log)
            if original is not None and best is not None and best * SHRUNK <= original:
                break
            time.sleep(2)
        reached = time.monotonic() - started
        assert process.poll() is None, "the minimization ended before it could be interrupted"
        process.send_signal(signal.SIGINT)
        process.wait(timeout=120)
    text = transcript.read_text()
    print(f"\nbest {best} tokens of {original} after {reached:.0f} s, then Ctrl-C")
    assert process.returncode == 130, text[-4000:]
    assert "still interesting" in text  # what never ran went in one candidate
    folder = log.parent
    summary = json.loads((folder / "minimize.json").read_text())
    assert summary["stopped"].startswith("interrupted")
    assert summary["minimized"]["tokens"] * SHRUNK <= summary["original"]["tokens"], (
        summary["minimized"],
        text[-3000:],
    )
    for cell, outcome in (("bad", "OTHER_FAILURE"), ("good", "PASS")):  # the smaller script's own runs
        assert summary[cell]["minimized"]["outcome"] == outcome, summary[cell]
    assert summary["bad"]["minimized"]["signature"] == summary["bad"]["original"]["signature"]
    minimized = (folder / "minimized.py").read_text()
    assert "def save_grid" not in minimized and "--warmup" not in minimized  # never ran; a setting that does not matter
    left = subprocess.run(["pgrep", "-f", str(folder)], capture_output=True, text=True, check=False)
    assert left.stdout.strip() == "", f"runs left behind: {left.stdout}"
