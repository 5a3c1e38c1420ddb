"""A bug between two packages on real releases (issue #51), searched as a grid of four DeepSpeed by four Lightning
releases and answered as one rule. Lightning #20040 itself (DeepSpeed 0.14.1 removed what Fabric's
``load_checkpoint`` imported) cannot be built beside torch 2.13: no DeepSpeed before 0.15 imports there (its elastic
agent imports a torch function since removed). So the script here fails on a feature of each package, each checked
by hand in the releases' sources (tests/resources/scripts/grid/frozen_copies.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, base_python
from tests.integration.release_history import History, build_history
from tests.integration.test_real_cells import envs_dir  # noqa: F401 - shared fixture
from tests.system_tools import DEEPSPEED_OPS

pytestmark = [pytest.mark.slow, pytest.mark.requires_tool(*DEEPSPEED_OPS)]

SCRIPT = ROOT / "tests" / "resources" / "scripts" / "grid" / "frozen_copies.py"
GRID = ("--deepspeed", "0.16.0,0.16.4,0.16.9,0.17.0", "--lightning", "2.5.0,2.5.2,2.5.5,2.6.0")
RULE = "fails where deepspeed ≥ 0.16.4 and lightning < 2.5.5"


def test_a_bug_between_two_packages_is_one_rule_found_with_fewer_cells_than_the_grid(
    tmp_path: Path,
    envs_dir: Path,  # noqa: F811
) -> None:
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "reprobisect", "triage", str(SCRIPT), *GRID, "--backend", "cpu"]
    cmd += ["--out", str(out), "--envs", str(envs_dir), "--base-python", base_python()]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, check=False, cwd=ROOT)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    [path] = out.glob("grid-*.json")
    report = json.loads(path.read_text())
    assert [region["rule"] for region in report["regions"]] == [RULE]
    [signature] = report["regions"][0]["signatures"]
    assert "TypeError" in signature["text"] and "exclude_frozen_parameters" in signature["text"]
    assert report["assumption_held"] and report["cells_run"] < report["cells_in_grid"] == 16
    for r, deepspeed in enumerate(report["rows"]):  # every cell, run or inferred, as the sources say
        for c, lightning in enumerate(report["cols"]):
            fails = deepspeed != "0.16.0" and lightning in ("2.5.0", "2.5.2")
            assert (report["grid"][r][c]["state"] == "fails") == fails, (deepspeed, lightning)
    assert RULE in done.stdout
    summary = next(out.glob("summary-*.md")).read_text()
    assert RULE.replace("<", "&lt;") in summary


# the files whose commits bring and mend the failure in histories built from the releases' sdists: DeepSpeed's
# tp_model_init comes with deepspeed/__init__.py, Lightning's exclude_frozen_parameters with Fabric's strategy
DS_CULPRIT = "deepspeed/__init__.py"
PL_CULPRIT = "src/lightning/fabric/strategies/deepspeed.py"


@pytest.mark.scheduled  # 41 min on 2 cores at load 15-21: 8 cells, 42 commit probes (34 past unimportable commits)
def test_the_commit_behind_each_edge_is_named_from_a_clone_of_each_package(
    tmp_path: Path,
    envs_dir: Path,  # noqa: F811
) -> None:
    """Issue #51 item 3 on real releases: a clone of each package built from two releases' sdists (one commit per
    changed file, no GitHub), the grid searched, then each edge's commit: the one edge pair along deepspeed (0.16.0 →
    0.16.4, brought) and the one along lightning (2.5.2 → 2.5.5, fixed), each one search for all its edges."""
    deepspeed = build_history(tmp_path / "ds", "deepspeed", "0.16.0", "0.16.4", base_python())
    lightning = build_history(tmp_path / "pl", "lightning", "2.5.2", "2.5.5", base_python())
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "reprobisect", "triage", str(SCRIPT), *GRID, "--backend", "cpu"]
    cmd += ["--git", f"deepspeed={deepspeed.repo}", "--git", f"lightning={lightning.repo}"]
    cmd += ["--out", str(out), "--envs", str(envs_dir), "--base-python", base_python()]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=3600, check=False, cwd=ROOT)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads(next(out.glob("grid-*.json")).read_text())
    assert [region["rule"] for region in report["regions"]] == [RULE]
    brought, fixed = sorted(report["culprits"], key=lambda c: c["axis"])
    assert (brought["axis"], brought["passing"], brought["failing"]) == ("deepspeed", "0.16.0", "0.16.4")
    assert brought["direction"] == "brought" and sorted(brought["edges_at"]) == ["2.5.0", "2.5.2"]
    assert _brackets(deepspeed, brought, DS_CULPRIT), (brought, done.stdout[-4000:])
    assert brought["commit"]["pull_request"].startswith("deepspeedai/DeepSpeed#9")
    assert (fixed["axis"], fixed["passing"], fixed["failing"]) == ("lightning", "2.5.5", "2.5.2")
    assert fixed["direction"] == "fixed" and sorted(fixed["edges_at"]) == ["0.16.4", "0.16.9", "0.17.0"]
    assert _brackets(lightning, fixed, PL_CULPRIT), (fixed, done.stdout[-4000:])
    assert fixed["commit"]["pull_request"].startswith("Lightning-AI/pytorch-lightning#9")
    assert f"brought by {brought['commit']['sha'][:12]}" in done.stdout
    assert f"fixed by {fixed['commit']['sha'][:12]}" in done.stdout
    summary = next(out.glob("summary-*.md")).read_text()
    assert f"**brought by `{brought['commit']['sha'][:12]}`**" in summary and f"--git {lightning.repo}" in summary


def _brackets(history: History, found: dict[str, Any], path: str) -> bool:
    """The search's answer holds the commit of ``path``: it is the commit named, or lies after the last commit
    without the change among the commits between them that no probe could judge (an sdist-made history has commits
    that do not import: ``deepspeed/__init__.py`` imports a module whose own commit comes later), each named as
    skipped."""
    order = history.shas
    first = order.index(found["commit"]["sha"])
    last_good = found["last_good_commit"]["sha"]
    last = order.index(last_good) if last_good in order else -1  # -1: the older release's tag
    between = [sha[:12] for sha in order[last + 1 : first]]
    return last < order.index(history.sha_of(path)) <= first and found["skipped_between"] == between
