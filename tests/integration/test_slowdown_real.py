"""Issue #38 on real packages: a slowdown DeepSpeed shipped, found on the CPU of one process by a timing search.

DeepSpeed 0.18.5 made every ZeRO-1/2 step count the parameters used in backward inside every gradient hook (PR #7780;
reported as issue #7885, "Training with Zero-2 slow down a lot from v0.18.4 to v0.18.5"), work that grows with the
square of the parameter tensors; 0.18.7 counts once per backward phase (PR #7886, whose own figure is 0.1265 s
against 0.0505 s an iteration on 8 H100s). Measured by hand here with plain venvs (tests/resources/scripts/slowdown/
zero2_many_params.py, 64 Linear(16, 16), bf16, one process, gloo): 7.2 ms a step on 0.18.4, 60.7 ms on 0.18.5, 8.2 ms
on 0.18.7; commit 311674ffa (#7780) 63.4 ms against its parent's 7.7 ms.

``bisect --slower-than 50 --all-transitions`` over 0.18.4 … 0.18.7 must find the slowdown coming between 0.18.4 and
0.18.5 with an interval wholly above the limit; 0.18.7 must never be called slower (it is either where the slowdown
went or, on a machine too loaded to tell, skipped as ambiguous and listed). Then, over a git history built from the
0.18.4 and 0.18.5 sdists (one commit per changed file, tests/integration/release_history.py), ``--git`` must name
the commit of ``deepspeed/runtime/zero/stage_1_and_2.py``, the file where #7780 put the count into every hook.
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
RELEASES = ["0.18.4", "0.18.5", "0.18.6", "0.18.7"]


@pytest.fixture(scope="module")
def shared_out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One records folder for the bisection and the triage over the same releases: either reuses the other's runs."""
    return tmp_path_factory.mktemp("slowdown") / "reports"


def _bisect(*args: str, out: Path, envs: Path, command: str = "bisect") -> subprocess.CompletedProcess[str]:
    target = ["--script", str(SCRIPT), "--axis", "deepspeed"] if command == "bisect" else [str(SCRIPT)]
    cmd = [sys.executable, "-m", "reprobisect", command, *target, "--instruments"]
    cmd += ["--env", "OMP_NUM_THREADS=1", *args, "--max-repeats", "6", "--backend", "cpu"]
    cmd += ["--lightning", "2.6.6", "--out", str(out), "--envs", str(envs), "--base-python", base_python()]
    cmd += ["--config", str(ROOT / "matrix.yaml"), "--", "--steps", "15"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=1200, check=False)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-3000:]
    return done


def test_the_release_that_made_zero2_slower_and_the_one_that_mended_it(
    shared_out: Path,
    envs_dir: Path,  # noqa: F811
) -> None:
    """Measured: 6 min 9 s with cold cells and op cache on 2 shared cores (load 6-8), 70 s warm."""
    out = shared_out
    done = _bisect(
        "--good", RELEASES[0], "--bad", RELEASES[-1], "--all-transitions", "--slower-than", "50", out=out, envs=envs_dir
    )
    [path] = out.glob("bisect-*-0.18.4-0.18.7-all-transitions.json")
    report = json.loads(path.read_text())
    came = report["transitions"][0]
    assert (came["last"], came["first"]) == ("0.18.4", "0.18.5"), done.stdout[-3000:]
    assert came["from"]["slower"] is False and came["to"]["slower"] is True
    assert came["to"]["timing"]["low"] > 1.5 and came["to"]["timing"]["runs"] >= 3
    timings = {p["version"]: p["timing"] for p in report["probes"]}
    assert timings["0.18.6"]["verdict"] == "slower"
    assert timings["0.18.7"]["verdict"] in ("not slower", "ambiguous")
    if timings["0.18.7"]["verdict"] == "not slower":
        assert [(t["last"], t["first"]) for t in report["transitions"]][1:] == [("0.18.6", "0.18.7")]
    else:
        assert "0.18.7" in [s["version"] for s in report["skipped"]]
    assert report["slowdown"]["threshold_percent"] == 50 and report["comparable"] is True
    assert "Timing: step, slower = ratio above ×1.500" in done.stdout


def test_triage_says_which_releases_got_slower(shared_out: Path, envs_dir: Path) -> None:  # noqa: F811
    """``triage --slower-than`` over the same releases: the sweep, then the timing search over all four; its runs
    are the bisection's when that test ran first (one records folder), else the bisection reuses these."""
    done = _bisect(
        "--deepspeed", ">=0.18.4,<=0.18.7", "--slower-than", "50", out=shared_out, envs=envs_dir, command="triage"
    )
    summary = (shared_out / "summary-script-zero2_many_params.md").read_text()
    assert "### Slower: script-zero2_many_params (cpu-deepspeed) across deepspeed" in summary, done.stdout[-3000:]
    assert "**slower: deepspeed 0.18.5 … 0.18.6** (step ×" in summary and "against 0.18.4" in summary
    assert "came between 0.18.4 and 0.18.5: the commit: add --git CLONE" in summary
    assert "| 0.18.5 | slower |" in summary and "| 0.18.7 | slower |" not in summary
    assert "Not affected: none of the 4 releases 0.18.4 … 0.18.7 fails." in summary  # outcomes: all pass


@pytest.mark.scheduled  # 5.5 minutes on two loaded cores (sdists, a history, a timing search over its commits)
def test_the_file_of_the_pull_request_that_made_it_slower(
    tmp_path: Path,
    envs_dir: Path,  # noqa: F811
) -> None:
    """A limit of 100 % here: the 27 file commits are judged against the first one's three runs, and on a shared
    machine a good commit's interval reached ×1.39; the slow ones start at ×3.5. Measured: 5 min 30 s on 2 shared
    cores (load 4-5), release cells warm, 7 commits' wheels built; it names the file of #7780."""
    history = build_history(tmp_path / "history", "deepspeed", "0.18.4", "0.18.5", base_python())
    out = tmp_path / "reports"
    done = _bisect(
        "--git", str(history.repo), "--good", history.old_tag, "--bad", history.new_tag, "--slower-than", "100",
        out=out, envs=envs_dir,
    )  # fmt: skip
    [path] = out.glob("bisect-*-v0.18.4-v0.18.5-first-bad.json")
    [came] = json.loads(path.read_text())["transitions"]
    assert came["first"] == history.sha_of("deepspeed/runtime/zero/stage_1_and_2.py")[:12], done.stdout[-3000:]
    assert came["skipped_between"] == [] and came["to"]["timing"]["low"] > 2


@pytest.mark.scheduled  # about 6 minutes: the releases, then the same commit search as above, through triage
def test_triage_names_the_commit_that_made_it_slower(tmp_path: Path, envs_dir: Path) -> None:  # noqa: F811
    history = build_history(tmp_path / "history", "deepspeed", "0.18.4", "0.18.5", base_python())
    out = tmp_path / "reports"
    done = _bisect(
        "--deepspeed", ">=0.18.4,<=0.18.5", "--slower-than", "100", "--git", str(history.repo),
        out=out, envs=envs_dir, command="triage",
    )  # fmt: skip
    summary = (out / "summary-script-zero2_many_params.md").read_text()
    sha = history.sha_of("deepspeed/runtime/zero/stage_1_and_2.py")[:12]
    assert f"came between 0.18.4 and 0.18.5: **by `{sha}`**" in summary, done.stdout[-3000:]
