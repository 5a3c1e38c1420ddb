"""Kept DeepSpeed wheels for real (issue #18): two cells of one DeepSpeed release, each with an empty uv cache of
its own, so only the harness's kept wheel can spare the second one the build; its build log says it did."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from reprobisect.cells.base import base_interpreter
from reprobisect.cells.envs import ensure_env
from reprobisect.model.cell import SYSTEM, Cell
from tests.conftest import base_python

pytestmark = pytest.mark.slow

RELEASE = "0.16.4"


def _cell(lightning: str, torch: str) -> Cell:
    return Cell(
        python=base_interpreter(base_python()).version,
        torch=torch,
        torch_source=SYSTEM,
        packages={"deepspeed": RELEASE, "lightning": lightning},
    )


def _installed(python: Path, package: str) -> str:
    code = f"import importlib.metadata as m; print(m.version({package!r}))"
    return subprocess.run([python, "-c", code], capture_output=True, text=True, check=True, timeout=60).stdout.strip()


def test_the_second_cell_of_a_release_installs_the_kept_wheel_and_builds_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = base_interpreter(base_python())
    if base.torch is None:
        pytest.fail(f"{base.executable} has no torch: install it (pip install torch) before the slow tests")
    envs_dir = tmp_path / "cells"
    monkeypatch.setenv("REPROBISECT_WHEEL_CACHE", str(tmp_path / "wheels"))
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-first"))
    first = ensure_env(_cell("2.6.6", base.torch), base, envs_dir)
    first_log = (envs_dir / f"{first.cell.id}.build.log").read_text()
    kept = tmp_path / "wheels" / f"deepspeed-{RELEASE}-py{'.'.join(base.version.split('.')[:2])}"
    [wheel] = kept.glob("*.whl")
    assert "pip wheel" in first_log and "Built deepspeed" not in first_log, first_log[-2000:]

    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-second"))  # uv's own build cannot help this one
    second = ensure_env(_cell("2.6.5", base.torch), base, envs_dir)
    second_log = (envs_dir / f"{second.cell.id}.build.log").read_text()
    assert "pip wheel" not in second_log and "Building deepspeed" not in second_log, second_log[-2000:]
    assert "Built deepspeed" not in second_log and f"{wheel} (built before, not built again)" in second_log
    assert _installed(second.python, "deepspeed") == RELEASE and _installed(second.python, "lightning") == "2.6.5"
