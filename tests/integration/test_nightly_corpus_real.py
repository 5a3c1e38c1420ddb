"""Issue #37, item 1, on real DeepSpeed releases: a corpus entry runs in the night beside the repros, and a release on
which it fails where the baseline passed is a regression named after the entry.

The entry ds-bf16-stray-grad (corpus/: bf16's immediate_grad_update, DeepSpeed 0.16.5 ... 0.17.0) passes on 0.16.4,
the seeded baseline, and fails on 0.16.5, the night's new release (``--up-to``): exit 1, the change listed under
``corpus-ds-bf16-stray-grad``, bisected to the pair 0.16.4 / 0.16.5. The GAN runs beside it (one form, one fix) and,
failing on both releases, is no regression.
"""

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

ENTRY = "ds-bf16-stray-grad"
SLICE = ["--backend", "cpu", "--repro", "gan", "--form", "cpu-deepspeed", "--fix", "none", "--corpus", ENTRY]


def _night(tmp_path: Path, envs: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], dict]:
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "reprobisect", "nightly", *SLICE, *args, "--jobs", "2", "--state",
           str(tmp_path / "state"), "--out", str(out), "--envs", str(envs), "--base-python", base_python(),
           "--config", str(ROOT / "matrix.yaml")]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, check=False, cwd=ROOT)
    summary = out / "nightly.json"
    return done, (json.loads(summary.read_text()) if summary.exists() else {})


def test_a_corpus_entry_that_fails_again_is_a_regression_of_the_night(tmp_path: Path, envs_dir: Path) -> None:  # noqa: F811
    seeded, summary = _night(tmp_path, envs_dir, "--baseline-release", "0.16.4")
    assert seeded.returncode == 0, seeded.stdout[-4000:] + seeded.stderr[-2000:]
    assert summary["seeded"] and summary["repros_not_run"] == []
    state = json.loads((tmp_path / "state" / "state.json").read_text())
    assert state["slice"]["repros"] == ["gan", f"corpus-{ENTRY}"]

    night, summary = _night(tmp_path, envs_dir, "--up-to", "0.16.5")
    text = night.stdout[-6000:] + night.stderr[-2000:]
    assert night.returncode == 1, text
    regressions = [c for c in summary["changes"] if c["regression"]]
    assert [c["repro"] for c in regressions] == [f"corpus-{ENTRY}"], summary["changes"]
    bisect = next(b for b in summary["bisects"] if b["repro"] == f"corpus-{ENTRY}")
    assert [(t["last"], t["first"]) for t in bisect["transitions"]] == [("0.16.4", "0.16.5")]
    body = (tmp_path / "out" / "nightly.md").read_text()
    assert f"corpus-{ENTRY}" in body and "**regression**" in body
