"""Shared fixtures: a stand-in cell whose interpreter is the test interpreter, and tiny repros."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from reprobisect.cells import Cell
from reprobisect.config import Fix, Form, Repro
from reprobisect.envs import CellEnv

SCRIPTS = Path(__file__).parent / "resources" / "scripts"
TRACEBACKS = Path(__file__).parent / "resources" / "tracebacks"
ROOT = Path(__file__).parent.parent
# Cells the slow tests build: in the checkout but apart from the user's own .cells/ (gitignored, kept between runs).
TEST_CELLS = ROOT / ".test-cells"


@pytest.fixture
def plain_env(tmp_path: Path) -> CellEnv:
    """A 'cell' whose bin/python is this interpreter: enough to exercise the runner without installs."""
    path = tmp_path / "cell"
    (path / "bin").mkdir(parents=True)
    (path / "bin" / "python").symlink_to(sys.executable)
    cell = Cell(python="3", torch="none", torch_source="pinned", packages={})
    return CellEnv(cell=cell, path=path, reused=True, build_seconds=0.0)


def make_repro(
    script: str, *, expected: str | None = "zero-ipg-buffer-none", timeout: float = 60, args: tuple[str, ...] = ()
) -> Repro:
    """A repro with one cpu-deepspeed form running a test script, and the fix 'none'."""
    form = Form(name="cpu-deepspeed", script=SCRIPTS / script, precision="fp32", args=args)
    return Repro(
        name=Path(script).stem,
        title=script,
        report="",
        expected_signature=expected,
        timeout=timeout,
        forms={"cpu-deepspeed": form},
        fixes={"none": Fix(name="none", description="")},
    )


def base_python() -> str:
    """The interpreter integration cells are made from (it must have torch)."""
    return os.environ.get("REPROBISECT_BASE_PYTHON", sys.executable)
