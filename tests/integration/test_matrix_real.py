"""A real matrix: a patch fix on a private copy and an override fix in a cell of its own, on real releases."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from reprobisect.model.record import Record
from tests.conftest import ROOT, base_python
from tests.integration.test_real_cells import envs_dir  # noqa: F401 - shared fixture
from tests.system_tools import DEEPSPEED_OPS

pytestmark = [pytest.mark.slow, pytest.mark.requires_tool("patch")]


def _config(tmp_path: Path) -> Path:
    data = yaml.safe_load((ROOT / "matrix.yaml").read_text())
    gan = data["repros"]["gan"]
    gan["inputs"] = [str(ROOT / item) for item in gan.get("inputs", [])]
    for form in gan["forms"].values():
        form.update({k: str(ROOT / form[k]) for k in ("script", "fix_script") if k in form})
    for fix in gan["fixes"].values():
        if "patch" in fix:
            fix["patch"] = str(ROOT / fix["patch"])
    gan["fixes"]["deepspeed-0.16.8"] = {"description": "another release", "override": {"deepspeed": "0.16.8"}}
    data["repros"] = {"gan": gan}
    data.pop("nightly", None)  # it names zero3, which this copy leaves out
    path = tmp_path / "matrix.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _matrix(config: Path, out: Path, envs: Path) -> subprocess.CompletedProcess[str]:
    cmd = [
        sys.executable,
        "-m",
        "reprobisect",
        "matrix",
        "--config",
        str(config),
        "--repro",
        "gan",
        "--form",
        "cpu-deepspeed",
        "--fix",
        "none,deepspeed-drop-foreign-grads,deepspeed-0.16.8",
        "--jobs",
        "2",  # the three fixes two at a time: CI's two cores
        "--deepspeed",
        "0.16.4",
        "--lightning",
        "2.6.6",
        "--backend",
        "cpu",
        "--out",
        str(out),
        "--envs",
        str(envs),
        "--base-python",
        base_python(),
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=1800, check=False)


@pytest.mark.requires_tool(*DEEPSPEED_OPS)
def test_patch_and_override_fixes(tmp_path: Path, envs_dir: Path) -> None:  # noqa: F811
    config = _config(tmp_path)
    done = _matrix(config, tmp_path / "reports", envs_dir)
    assert done.returncode == 0, done.stdout + done.stderr
    records = {r.fix: r for r in (Record.load(p) for p in (tmp_path / "reports" / "records").rglob("*.json"))}
    assert records["none"].outcome == "REPRODUCED"
    patched = records["deepspeed-drop-foreign-grads"]
    assert patched.outcome == "PASS", patched.signature
    assert patched.fix_kind == "patch"
    override = records["deepspeed-0.16.8"]
    assert override.fix_kind == "override"
    assert override.known_signature == "zero-param-already-reduced"  # 0.16.8 words the same bug its own way
    assert override.versions["deepspeed"] == "0.16.8"
    assert override.cell["packages"]["deepspeed"] == "0.16.8"
    assert override.matrix_cell == records["none"].cell["id"]  # reported in the row of the 0.16.4 cell
    # the patch lives in a private overlay; the cell's own DeepSpeed is untouched
    cell = envs_dir / records["none"].cell["id"]
    installed = next(cell.glob("lib/python*/site-packages/deepspeed/runtime/zero/stage_1_and_2.py")).read_text()
    assert "Drop it." not in installed
    overlay = next(cell.glob("overlays/deepspeed-drop-foreign-grads-*/deepspeed/runtime/zero/stage_1_and_2.py"))
    assert "Drop it." in overlay.read_text()
    # a second run reuses every environment and every record
    again = _matrix(config, tmp_path / "reports", envs_dir)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "built in" not in again.stdout
    assert again.stdout.count("(stored)") == 3


def test_a_patch_that_does_not_apply_is_an_env_error_where_it_does_not(tmp_path: Path, envs_dir: Path) -> None:  # noqa: F811
    """A well-formed patch whose hunks match no line of this release (applied with --fuzz=0): its runs are
    ENV_ERROR naming the file and why, the other fixes run; a patch that is no diff at all stops the run."""
    config = _config(tmp_path)
    bad = tmp_path / "bad.diff"
    bad.write_text(
        "--- a/deepspeed/runtime/zero/stage_1_and_2.py\n+++ b/deepspeed/runtime/zero/stage_1_and_2.py\n"
        "@@ -1,1 +1,1 @@\n-this line is not in the file\n+nor is this one\n"
    )
    data = yaml.safe_load(config.read_text())
    data["repros"]["gan"]["fixes"]["deepspeed-drop-foreign-grads"]["patch"] = str(bad)
    config.write_text(yaml.safe_dump(data))
    done = _matrix(config, tmp_path / "reports", envs_dir)
    assert done.returncode == 0, done.stdout + done.stderr
    records = {r.fix: r for r in (Record.load(p) for p in (tmp_path / "reports" / "records").rglob("*.json"))}
    patched = records["deepspeed-drop-foreign-grads"]
    assert patched.outcome == "ENV_ERROR" and patched.signature is not None
    assert patched.signature.exception == "PatchError" and "does not apply" in patched.signature.message
    assert records["none"].outcome == "REPRODUCED"
    not_a_diff = tmp_path / "not-a-diff.diff"
    not_a_diff.write_text("this is no patch\n")
    data["repros"]["gan"]["fixes"]["deepspeed-drop-foreign-grads"]["patch"] = str(not_a_diff)
    config.write_text(yaml.safe_dump(data))
    stopped = _matrix(config, tmp_path / "other", envs_dir)
    assert stopped.returncode == 2
    assert "not-a-diff.diff: no '+++ ' file headers" in stopped.stderr
    assert not (tmp_path / "other" / "records").exists()
