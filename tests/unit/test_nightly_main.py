"""The main night's decisions and text without installs: flaky runs are never regressions, the state keeps main's
commit and folder, a night on which main did not move runs nothing, and the issue's title and body name the commit,
the pull request, the minimized script, the fixes that pass and the commands that re-run each step."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import pandas as pd
import pytest

from reprobisect.config.load import load_config
from reprobisect.errors import ConfigError
from reprobisect.model.record import Record
from reprobisect.model.store import Store
from reprobisect.nightly.main_follow_up import BACK_TO_BASELINE, Finding, passing_fixes
from reprobisect.nightly.main_night import default_branch, main_commit, run_main_night
from reprobisect.nightly.main_text import MainNews, main_body, main_title
from reprobisect.nightly.regressions import flaky_keys, regressed_keys
from reprobisect.nightly.release_night import NightlyRequest
from reprobisect.nightly.state import NightlyState, commit_state, load_state
from reprobisect.run.context import RunContext
from tests.conftest import ROOT

CELL = "torch-2.13.0+cpu_lightning-2.6.6"
KEY = ("gan", CELL, "cpu-deepspeed", "none")
A, B, C = "a" * 40, "b" * 40, "c" * 40


def _frame(rows: list[tuple[str, str, str]]) -> pd.DataFrame:
    """Runs of one night, already masked: (fix, outcome, signature id), a fix twice for two repeats."""
    return pd.DataFrame(
        [
            {"run_id": f"r{i}", "repro": "gan", "cell": CELL, "form": "cpu-deepspeed", "fix": fix, "outcome": outcome,
             "signature_id": sig}
            for i, (fix, outcome, sig) in enumerate(rows)
        ]
    )  # fmt: skip


def test_a_run_whose_repeats_disagree_is_flaky_not_a_regression() -> None:
    before = _frame([("none", "PASS", ""), ("none", "PASS", ""), ("freeze-d", "PASS", ""), ("freeze-d", "PASS", "")])
    after = _frame(
        [("none", "OTHER_FAILURE", "abc"), ("none", "PASS", ""), *[("freeze-d", "OTHER_FAILURE", "abc")] * 2]
    )
    assert regressed_keys(before, after) == [("gan", CELL, "cpu-deepspeed", "freeze-d")]
    assert flaky_keys(before, after) == {KEY: "PASS → OTHER_FAILURE abc | PASS"}


def _finding(**kwargs: object) -> Finding:
    base = {
        "key": KEY,
        "before": "✓",
        "after": "✗ abc",
        "commit": {"sha": C, "subject": "Training multiple models (#7018)", "pull_request": "deepspeedai/DeepSpeed#7018"},
        "last_good": {"sha": B, "subject": "Docs (#7001)", "pull_request": "deepspeedai/DeepSpeed#7001"},
        "probes": 4,
        "bisect_rerun": "reprobisect bisect --repro gan --git /clone",
        "minimized": {"path": "/out/minimized.py", "text": "import deepspeed\nassert False\n", "original": "80 lines",
                      "minimized": "2 lines", "stopped": "the time budget (600 s)", "tells_apart": True,
                      "runs": ["bad: OTHER_FAILURE", "good: PASS"],
                      "rerun": "reprobisect minimize gan.py --bad deepspeed==x --good deepspeed==y"},
        "fixes": {"zero-stage-0": "OTHER_FAILURE", BACK_TO_BASELINE: "PASS"},
        "rerun": ("nox -s repro_gan -- --deepspeed git+file:///clone@" + C,),
    }  # fmt: skip
    return Finding(**{**base, **kwargs})  # type: ignore[arg-type]


def _news(**kwargs: object) -> MainNews:
    base = {"at": "t", "backend": "cpu", "ref": "main", "clone": "/clone", "after": C, "before": A}
    return MainNews(**{**base, **kwargs})  # type: ignore[arg-type]


def test_the_title_names_the_repro_the_commit_and_the_pull_request() -> None:
    assert main_title(_news(findings=[_finding()])) == f"DeepSpeed main: gan fails since {C[:12]} (#7018)"
    two = main_title(_news(findings=[_finding()], not_followed=1))
    assert two.endswith("(#7018), and 1 more regression(s)")
    lost = main_title(_news(findings=[_finding(commit=None, commit_why="flaky probes")]))
    assert lost == f"DeepSpeed main: gan fails since {A[:12]}..{C[:12]} (commit not found)"
    assert main_title(_news(before=None, seeded=True)) == f"DeepSpeed main: {C[:12]} is the baseline for main (cpu)"
    assert main_title(_news(before=C)).startswith(f"DeepSpeed main: still {C[:12]}")
    flaky = main_title(_news(flaky={KEY: "PASS → OTHER_FAILURE abc | PASS"}))
    assert flaky == f"DeepSpeed main: {C[:12]} behaves like {A[:12]}; 1 flaky run(s)"
    assert not _news(flaky={KEY: "x"}).is_regression and _news(findings=[_finding()]).is_regression


def test_the_body_has_the_commit_the_script_inline_the_fixes_and_the_reruns() -> None:
    body = main_body(_news(findings=[_finding()], flaky={("gan", CELL, "cpu-deepspeed", "freeze-d"): "PASS → x"}))
    assert body.startswith("<!-- reprobisect-nightly backend=cpu track=main -->\n## DeepSpeed main: gan fails")
    assert f"**Introduced by** `{C[:12]}` Training multiple models (#7018) (deepspeedai/DeepSpeed#7018)" in body
    assert f"last good commit `{B[:12]}`" in body
    assert "```python\nimport deepspeed\nassert False\n```" in body
    assert f"**Fixes that pass tonight**: `{BACK_TO_BASELINE}` (DeepSpeed back at last night's commit)" in body
    assert "reprobisect bisect --repro gan --git /clone" in body and "nox -s repro_gan" in body
    assert "reprobisect minimize gan.py --bad deepspeed==x --good deepspeed==y" in body
    assert "### Flaky" in body and "freeze-d: PASS → x" in body
    summary = _news(findings=[_finding()]).summary()
    assert summary["regressions"][0]["fixes_passing"] == [BACK_TO_BASELINE]
    assert summary["regressions"][0]["commit"]["pull_request"] == "deepspeedai/DeepSpeed#7018"
    json.dumps(summary)  # JSON-ready
    missing = main_body(_news(findings=[_finding(minimized=None, minimize_why="passes alone", fixes={})]))
    assert "**Minimized script**: none (passes alone)." in missing and "none (none tried)" in missing


def _record(fix: str, outcome: str) -> Record:
    """What passing_fixes reads of a record, and nothing more."""
    fake = SimpleNamespace(repro="gan", cell={"id": "full-" + CELL}, form="cpu-deepspeed", fix=fix, outcome=outcome)
    return cast("Record", fake)


def test_passing_fixes_are_tonights_runs_of_the_same_repro_and_form() -> None:
    records = [_record("none", "OTHER_FAILURE"), _record("freeze-d", "PASS"), _record("zero-stage-0", "CRASH")]
    found = passing_fixes(records, KEY, {"full-" + CELL: CELL})
    assert found == {"freeze-d": "PASS", "zero-stage-0": "CRASH"}
    finding = _finding(fixes=found)
    assert finding.passing() == ["freeze-d"]


def _repo(root: Path) -> str:
    root.mkdir()
    for args in (["init", "-q", "-b", "main"], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q",
                 "--allow-empty", "-m", "one (#1)"]):  # fmt: skip
        subprocess.run(["git", "-C", str(root), *args], check=True)
    return subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()


def test_a_night_follows_the_clones_default_branch_deepspeeds_master(tmp_path: Path) -> None:
    upstream = tmp_path / "upstream"
    _repo(upstream)
    subprocess.run(["git", "-C", str(upstream), "branch", "-q", "-m", "main", "master"], check=True)
    subprocess.run(["git", "clone", "-q", str(upstream), str(tmp_path / "clone")], check=True)
    assert default_branch(tmp_path / "clone") == "master"  # origin/HEAD, as in a clone of DeepSpeed
    subprocess.run(["git", "-C", str(upstream), "checkout", "-q", "-b", "topic"], check=True)
    assert default_branch(upstream) == "topic"  # no origin: the branch checked out
    subprocess.run(["git", "-C", str(upstream), "checkout", "-q", "--detach"], check=True)
    assert default_branch(upstream) == "main"  # detached, no origin: main


def test_the_state_keeps_mains_folder_beside_the_releases(tmp_path: Path) -> None:
    for folder in ("baseline-0.19.1-x", "baseline-main-abc-y", "baseline-old-z"):
        (tmp_path / folder / "records").mkdir(parents=True)
    main = {"commit": A, "ref": "main", "since": "t", "dir": "baseline-main-abc-y", "clone": "/c"}
    commit_state(tmp_path, NightlyState(baseline="0.19.1", baseline_dir="baseline-0.19.1-x", main=main))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["baseline-0.19.1-x", "baseline-main-abc-y", "state.json"]
    assert load_state(tmp_path).main == main
    (tmp_path / "state.json").write_text(json.dumps({"schema": 1, "main": {"commit": A}}))
    with pytest.raises(ConfigError, match=r"key 'main' must hold commit, dir, clone"):
        load_state(tmp_path)


def test_a_night_on_which_main_did_not_move_runs_nothing_and_exits_0(tmp_path: Path) -> None:
    sha = _repo(tmp_path / "clone")
    assert main_commit(tmp_path / "clone", "main", fetch=True) == sha  # no origin: nothing to fetch
    with pytest.raises(ConfigError, match=r"no branch, tag or commit 'nope'"):
        main_commit(tmp_path / "clone", "nope", fetch=False)
    state = tmp_path / "state"
    (state / "baseline-main-x" / "records").mkdir(parents=True)
    config = load_config(ROOT / "matrix.yaml")
    assert config.nightly is not None
    main = {"commit": sha, "ref": "main", "since": "t", "dir": "baseline-main-x", "clone": str(tmp_path / "clone")}
    slice_ = {"axes": dict(config.nightly.axes), "repros": list(config.nightly.repros)}
    commit_state(state, NightlyState(backend="cpu", slice=slice_, main=main))
    request = NightlyRequest(state=state, out=tmp_path / "out", backend="cpu", git=tmp_path / "clone")
    lines: list[str] = []
    ctx = RunContext(base=None, store=Store(tmp_path / "out"), envs_dir=tmp_path, environ={}, echo=lines.append)  # type: ignore[arg-type]
    result = run_main_night(config, request, ctx, fetch=False)
    assert result.exit_code == 0 and not result.regressed and result.ran == []
    assert result.title == f"DeepSpeed main: still {sha[:12]}, nothing new since last night (cpu)"
    summary = json.loads(result.summary.read_text())
    assert summary["moved"] is False and summary["runs_executed"] == 0
    assert load_state(state).main == main  # unchanged
    assert load_state(state).history[-1]["ran"] == []
