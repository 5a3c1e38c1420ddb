"""Issue #31 on real packages: a long pasted GAN script (argument parsing, logging, a dataset, a sample grid,
checkpoints, a JSON summary) whose sanity check fails on DeepSpeed 0.16.5 and passes on 0.16.4 is cut down by
``reprobisect minimize`` to at least 5 times fewer lines and tokens, and the result, run again from scratch in a
store of its own, still fails on 0.16.5 the same way and passes on 0.16.4. A script that does not fail on the bad
release is refused with its own exit code; Ctrl-C keeps the best so far and leaves no run behind.
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


@pytest.fixture(scope="module")
def minimized(tmp_path_factory: pytest.TempPathFactory, envs_dir: Path) -> tuple[Path, Path, str]:  # noqa: F811
    """One minimization of the long script, shared by the tests that read it."""
    out = tmp_path_factory.mktemp("minimize")
    cmd = _command("minimize", str(LONG), "--bad", BAD, "--good", GOOD, "--jobs", "2", out=out, envs=envs_dir)
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=2400, check=False)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-3000:]
    return out, out / "minimize" / "script-gan_bf16_long", done.stdout


def test_a_long_script_shrinks_five_times_and_still_tells_the_releases_apart(
    minimized: tuple[Path, Path, str],
) -> None:
    _, folder, stdout = minimized
    summary = json.loads((folder / "minimize.json").read_text())
    assert summary["reduction"]["lines"] >= 5, summary
    assert summary["reduction"]["tokens"] >= 5, summary
    bad, good = summary["bad"], summary["good"]
    assert bad["minimized"]["signature"] == bad["original"]["signature"]
    assert "AssertionError: D's step used more than D's own gradient" in bad["minimized"]["signature_text"]
    assert good["original"]["outcome"] == good["minimized"]["outcome"] == "PASS"
    text = (folder / "minimized.py").read_text()
    assert "engine_D.zero_grad()" in text and "argparse" not in text and "save_grid" not in text
    diff = (folder / "minimized.diff").read_text()
    assert diff.startswith("--- a/gan_bf16_long.py\n+++ b/gan_bf16_long.py\n")
    section = (folder / "minimize.md").read_text()
    assert "## Minimized: gan_bf16_long.py" in section and "nox -s triage --" in section
    assert "Re-check it:" in stdout and "runs" in summary and summary["runs"] > 0


def test_the_minimized_script_run_from_scratch_gives_the_same_verdicts(
    minimized: tuple[Path, Path, str],
    tmp_path: Path,
    envs_dir: Path,  # noqa: F811
) -> None:
    _, folder, _ = minimized
    script = tmp_path / "gan_bf16_long.py"  # the file name the signature's traceback had
    script.write_text((folder / "minimized.py").read_text())
    cmd = _command("matrix", "--script", str(script), "--deepspeed", "0.16.4,0.16.5", out=tmp_path / "o", envs=envs_dir)
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=1200, check=False)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    outcomes = {}
    for path in (tmp_path / "o" / "records").rglob("*.json"):
        record = json.loads(path.read_text())
        outcomes[record["versions"]["deepspeed"]] = (record["outcome"], (record.get("signature") or {}).get("id"))
    summary = json.loads((folder / "minimize.json").read_text())
    assert outcomes["0.16.4"][0] == "PASS"
    assert outcomes["0.16.5"] == ("OTHER_FAILURE", summary["bad"]["original"]["signature"])


def test_a_script_that_passes_on_the_bad_release_is_refused(
    minimized: tuple[Path, Path, str],
    envs_dir: Path,  # noqa: F811
) -> None:
    out, _, _ = minimized  # the same store: the original's run on 0.16.4 is reused
    cmd = _command("minimize", str(LONG), "--bad", GOOD, "--good", BAD, out=out, envs=envs_dir)
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 10, done.stdout[-3000:] + done.stderr[-3000:]
    assert "gives PASS" in done.stderr and "nothing to minimize" in done.stderr


def test_ctrl_c_keeps_the_best_so_far_and_leaves_no_run(tmp_path: Path, envs_dir: Path) -> None:  # noqa: F811
    out = tmp_path / "out"
    cmd = _command("minimize", str(LONG), "--bad", BAD, "--good", GOOD, "--jobs", "2", out=out, envs=envs_dir)
    process = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # noqa: S603
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
    left = subprocess.run(["pgrep", "-f", str(folder)], capture_output=True, text=True, check=False)  # noqa: S607
    assert left.stdout.strip() == "", f"runs left behind: {left.stdout}"
    assert os.listdir(folder / "candidates")
