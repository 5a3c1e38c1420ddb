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

import pytest

from tests.conftest import ROOT, base_python
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
