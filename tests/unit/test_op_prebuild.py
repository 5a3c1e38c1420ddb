"""Ops built before the runs that need them (run/op_prebuild.py): which ops, the child that builds them through
DeepSpeed's own builders, and the marker that spares the other cells of a sweep an interpreter start."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reprobisect.cells.envs import CellEnv
from reprobisect.model.cell import Cell
from reprobisect.run import op_prebuild
from reprobisect.run.op_prebuild import SCRIPT_OPS, SHM_OP, cell_ops, ops_for, prebuild_ops

CPU = {"DS_ACCELERATOR": "cpu"}
_FAKE_ALL_OPS = """
import os
class Builder:
    def __init__(self, name, works=True):
        self.name, self.works = name, works
    def is_compatible(self, verbose=False):
        return self.name != "elsewhere_only"
    def load(self, verbose=True):
        if not self.works:
            raise RuntimeError("nvcc not found")
        with open(os.path.join(os.environ["BUILT_INTO"], self.name), "a") as handle:
            handle.write("built\\n")
ALL_OPS = {n: Builder(n) for n in ("fused_adam", "deepspeed_shm_comm", "elsewhere_only")}
ALL_OPS["broken"] = Builder("broken", works=False)
"""


def _cell(tmp_path: Path, release: str = "0.16.5", *, shm: bool = True) -> CellEnv:
    """A real venv (no pip) whose ``deepspeed`` is a stand-in with ``ALL_OPS`` builders that note each build."""
    path = tmp_path / f"cell-{release}"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True, timeout=120)
    (site,) = path.glob("lib/python*/site-packages")
    package = site / "deepspeed"
    (package / "ops" / "op_builder").mkdir(parents=True)
    (package / "comm").mkdir()
    for init in (package, package / "ops", package / "ops" / "op_builder"):
        (init / "__init__.py").write_text("")
    (package / "ops" / "op_builder" / "all_ops.py").write_text(_FAKE_ALL_OPS)
    (package / "comm" / "torch.py").write_text("builder = 'ShareMemCommBuilder'\n" if shm else "pass\n")
    cell = Cell(python="3.11", torch="2.13.0", torch_source="system", packages={"deepspeed": release})
    return CellEnv(cell=cell, path=path, reused=False, build_seconds=0.0)


def test_the_ops_a_run_needs_come_from_its_script_and_its_accelerator(tmp_path: Path) -> None:
    deepspeed = tmp_path / "deepspeed"
    (deepspeed / "comm").mkdir(parents=True)
    (deepspeed / "comm" / "torch.py").write_text("def build_shm_op(): ShareMemCommBuilder\n")
    script = "from deepspeed.ops.adam import FusedAdam\noptimizer = FusedAdam(params)\n"
    assert ops_for(script, {}, deepspeed) == ("fused_adam",)  # a GPU form: no CPU comm op
    assert ops_for(script, CPU, deepspeed) == ("fused_adam", SHM_OP)
    assert ops_for("import deepspeed", CPU, None) == ()  # no DeepSpeed in the cell: nothing to build
    assert ops_for("import torch\nprint(1)", CPU, deepspeed) == ()  # a script that never names DeepSpeed
    (deepspeed / "comm" / "torch.py").write_text("pass\n")  # a release that never builds the comm op
    assert ops_for("import deepspeed", CPU, deepspeed) == ()


@given(st.text(max_size=200))
def test_any_script_text_names_only_known_ops(text: str) -> None:
    assert set(ops_for(text, {}, None)) <= set(SCRIPT_OPS.values())


def test_a_cell_s_ops_are_built_once_and_the_next_cell_with_the_same_sources_starts_nothing(
    tmp_path: Path,
) -> None:
    built = tmp_path / "built"
    built.mkdir()
    environ = {**os.environ, "REPROBISECT_OP_CACHE": str(tmp_path / "ops")}
    first, second = _cell(tmp_path, "0.16.4"), _cell(tmp_path, "0.16.5")
    runs = [("import deepspeed\nFusedAdam\n", {**CPU, "BUILT_INTO": str(built)}), ("import deepspeed", {})]
    (ops,) = cell_ops(first, runs).items()
    assert ops[1] == ("fused_adam", SHM_OP)
    done = prebuild_ops(first, ops[1], dict(ops[0]), environ)
    assert done is not None and done.failure is None and not done.reused
    assert sorted(p.name for p in built.iterdir()) == ["deepspeed_shm_comm", "fused_adam"]
    again = prebuild_ops(second, ops[1], dict(ops[0]), environ)  # another release, the same op sources
    assert again is not None and again.reused and again.seconds == 0.0
    assert (built / "fused_adam").read_text() == "built\n"  # not built a second time


def test_a_package_that_never_lets_the_interpreter_exit_does_not_hold_the_prebuild(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DeepSpeed 0.18.2 on torch 2.3.1 with Python 3.12 imports, then never exits (torch's inductor pool): the
    builder child leaves as soon as its ops are built, not at its timeout."""
    built = tmp_path / "built"
    built.mkdir()
    cell = _cell(tmp_path)
    (all_ops,) = cell.path.glob("lib/python*/site-packages/deepspeed/ops/op_builder/all_ops.py")
    hang = "import threading\nthreading.Thread(target=threading.Event().wait).start()  # joined at exit: forever\n"
    all_ops.write_text(hang + all_ops.read_text())
    environ = {**os.environ, "REPROBISECT_OP_CACHE": str(tmp_path / "ops")}
    monkeypatch.setattr(op_prebuild, "_TIMEOUT", 30.0)  # without the early exit: a failure at 30 s, not a hang
    start = time.monotonic()
    done = prebuild_ops(cell, ("fused_adam",), {"BUILT_INTO": str(built)}, environ)
    assert done is not None and done.failure is None and (built / "fused_adam").is_file()
    assert time.monotonic() - start < 60


def test_a_failed_prebuild_is_said_and_leaves_no_marker(tmp_path: Path) -> None:
    built = tmp_path / "built"
    built.mkdir()
    environ = {**os.environ, "REPROBISECT_OP_CACHE": str(tmp_path / "ops")}
    cell = _cell(tmp_path)
    form_env = {"BUILT_INTO": str(built)}
    done = prebuild_ops(cell, ("broken",), form_env, environ)
    assert done is not None and done.failure is not None and "exit 1" in done.failure
    assert "nvcc not found" in Path(done.failure.rpartition("see ")[2]).read_text()
    retried = prebuild_ops(cell, ("broken",), form_env, environ)
    assert retried is not None and not retried.reused  # tried again next time, never taken as built
    skipped = prebuild_ops(cell, ("elsewhere_only",), form_env, environ)
    assert skipped is not None and skipped.failure is None  # an op this machine cannot have: the runs say so
    assert prebuild_ops(cell, (), form_env, environ) is None
