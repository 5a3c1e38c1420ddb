"""Real cells: uv venvs over the base interpreter's torch, real DeepSpeed and Lightning releases, real repros.

Slow: the first run of a DeepSpeed version compiles a comm op (about 30 s); cells are kept in
``.test-cells/`` (or $REPROBISECT_ENVS) so later runs reuse them, apart from the user's own ``.cells/``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from reprobisect.cells.base import base_interpreter
from reprobisect.cells.envs import ensure_env
from reprobisect.cells.op_builds import OPS
from reprobisect.cells.pinning import resolve_cell
from reprobisect.model.record import Record
from tests.conftest import ROOT, TEST_CELLS, base_python
from tests.system_tools import DEEPSPEED_OPS

pytestmark = pytest.mark.slow

OLD_DS = "0.16.4"
LIGHTNING = "2.6.6"


@pytest.fixture(scope="module")
def envs_dir() -> Path:
    """The tests' cell folder: never the user's ``.cells/``, whose cells a test must not build or change."""
    return Path(os.environ.get("REPROBISECT_ENVS", TEST_CELLS))


@pytest.fixture(scope="module")
def base():
    interpreter = base_interpreter(base_python())
    if interpreter.torch is None:
        pytest.fail(f"{interpreter.executable} has no torch: install it (pip install torch) before the slow tests")
    return interpreter


def _harness(*args: str, out: Path, envs_dir: Path) -> subprocess.CompletedProcess[str]:
    cmd = [
        sys.executable,
        "-m",
        "reprobisect",
        *args,
        "--out",
        str(out),
        "--envs",
        str(envs_dir),
        "--base-python",
        base_python(),
        "--config",
        str(ROOT / "matrix.yaml"),
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=1800, check=False, cwd=ROOT)


def _records(out: Path, repro: str) -> dict[tuple[str, str], Record]:
    found = {}
    for path in (out / "records" / repro).rglob("*.json"):
        record = Record.load(path)
        found[(record.form, record.fix)] = record
    return found


def test_cell_is_built_once_and_reused(base, envs_dir: Path) -> None:
    cell = resolve_cell(base, {"torch": "system", "deepspeed": OLD_DS, "lightning": LIGHTNING})
    first = ensure_env(cell, base, envs_dir)
    start = time.perf_counter()
    again = ensure_env(cell, base, envs_dir)
    assert again.reused
    assert time.perf_counter() - start < 0.5
    assert first.path == again.path
    # torch is the base interpreter's, never a second copy in the cell
    out = subprocess.run(
        [str(again.python), "-c", "import torch, json; print(json.dumps(torch.__file__))"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert not json.loads(out.stdout).startswith(str(again.path))


def test_a_cell_something_wrote_into_is_built_again(base, envs_dir: Path) -> None:
    """An unconfined run (or a hand) planted a sitecustomize.py in the cell: the next reuse must not trust it."""
    cell = resolve_cell(base, {"torch": "system", "deepspeed": OLD_DS, "lightning": LIGHTNING})
    env = ensure_env(cell, base, envs_dir)
    site = next(env.path.glob("lib/python*/site-packages"))
    (site / "sitecustomize.py").write_text("import os; os._exit(0)  # every run 'passes'\n")
    again = ensure_env(cell, base, envs_dir)
    assert not again.reused
    assert not (site / "sitecustomize.py").exists()
    assert ensure_env(cell, base, envs_dir).reused
    # built with its byte caches: a sandboxed run sees the cell read-only and could not write them
    assert list((site / "deepspeed" / "__pycache__").glob("__init__.cpython-*.pyc"))
    assert list((site / "lightning" / "fabric" / "__pycache__").glob("fabric.cpython-*.pyc"))


@pytest.mark.requires_tool(*DEEPSPEED_OPS)
def test_gan_cpu_forms_on_deepspeed_0_16_4_reproduce_the_report(tmp_path: Path, envs_dir: Path) -> None:
    done = _harness(
        "repro",
        "gan",
        "--backend",
        "cpu",
        "--deepspeed",
        OLD_DS,
        "--lightning",
        LIGHTNING,
        "--fix",
        "none,freeze-d",
        out=tmp_path,
        envs_dir=envs_dir,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("No CUDA device here") or "--backend" in done.stdout or "Running the" in done.stdout
    records = _records(tmp_path, "gan")
    for form in ("cpu-deepspeed", "cpu-shim"):
        none = records[(form, "none")]
        assert none.outcome == "REPRODUCED", (form, none.signature)
        assert none.known_signature == "zero-ipg-buffer-none"
        assert none.signature is not None
        assert none.signature.message == "'NoneType' object is not subscriptable"
        assert none.versions["deepspeed"] == OLD_DS
        assert none.versions_source == "imported"
        assert isinstance(none.failing_step, int)
        fixed = records[(form, "freeze-d")]
        assert fixed.outcome == "PASS", (form, fixed.signature)
        assert fixed.step_median_seconds is not None
    assert records[("cpu-shim", "none")].versions["lightning"] == LIGHTNING
    summary = (tmp_path / "summary-gan.md").read_text()
    assert "zero-ipg-buffer-none" in summary
    assert "REPRODUCED" in summary


@pytest.mark.requires_tool(*DEEPSPEED_OPS)
def test_a_second_release_with_the_same_op_sources_takes_the_op_from_the_cache(tmp_path: Path, envs_dir: Path) -> None:
    """DeepSpeed 0.16.4 and 0.16.5 ship the same CPU comm op sources: with an empty op cache, the first cell
    compiles it before its runs start (#41: never inside a timed run) and the second cell's run loads that build
    without compiling, and without a prebuild of its own (issue #18)."""
    cache = tmp_path / "ops"
    records = []
    for release in (OLD_DS, "0.16.5"):
        out = tmp_path / release
        done = subprocess.run(
            [
                sys.executable, "-m", "reprobisect", "repro", "gan", "--backend", "cpu", "--form", "cpu-deepspeed",
                "--fix", "none", "--deepspeed", release, "--lightning", LIGHTNING, "--out", str(out),
                "--envs", str(envs_dir), "--base-python", base_python(), "--config", str(ROOT / "matrix.yaml"),
            ],
            capture_output=True, text=True, timeout=1800, check=False, cwd=ROOT,
            env={**os.environ, "REPROBISECT_OP_CACHE": str(cache)},
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        (record,) = _records(out, "gan").values()
        records.append(record)
        prebuilt = "ops deepspeed_shm_comm ready in" in done.stdout
        assert prebuilt == (release == OLD_DS), done.stdout
    first, second = (r.config["ops"] for r in records)
    assert [(op["name"], op["built"]) for op in first] == [("deepspeed_shm_comm", False)]
    assert [(op["name"], op["built"]) for op in second] == [("deepspeed_shm_comm", False)]
    assert first[0]["key"] == second[0]["key"] and second[0]["seconds"] < 1.0
    assert [entry.name.rpartition("-")[0] for entry in OPS.entries(cache)] == ["deepspeed_shm_comm"]
