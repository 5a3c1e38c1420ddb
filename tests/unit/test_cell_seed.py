"""A pinned-torch cell's venv is the one a reporter has: ``python -m venv``, with the pip and setuptools the
interpreter bundles. ``uv venv --seed`` put the newest setuptools there, which has no ``pkg_resources`` (setuptools
81 removed it), and every cell of Lightning before 2.4.0 was an ENV_ERROR that no user sees. Real venvs, a few
seconds each."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from reprobisect.cells import envs
from reprobisect.cells.base import base_interpreter
from reprobisect.model.cell import Cell
from tests.conftest import base_python


def _packages(python: Path | str) -> dict[str, str]:
    out = subprocess.run(
        [
            str(python),
            "-c",
            "import importlib.metadata as m, json; print(json.dumps({d.name: d.version for d in m.distributions()}))",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return dict(json.loads(out))


def _job(tmp_path: Path, executable: str) -> envs._CellInstall:
    base = base_interpreter(executable)
    cell = Cell(python=base.version, torch="2.13.0", torch_source="pypi", packages={"deepspeed": "0.18.6"})
    return envs._CellInstall(cell, base, tmp_path / "cell", tmp_path / "build.log", uv="uv")


@pytest.mark.skipif(
    envs.installer() != "uv", reason="the ensurepip seed is uv's path; without uv the base's pip installs"
)
def test_a_pinned_torch_cell_has_the_pip_and_setuptools_its_interpreter_bundles(tmp_path: Path) -> None:
    job = _job(tmp_path, base_python())
    envs._make_venv(job)
    subprocess.run([base_python(), "-m", "venv", str(tmp_path / "reporter")], check=True)
    mine, reporters = _packages(tmp_path / "cell/bin/python"), _packages(tmp_path / "reporter/bin/python")
    assert mine == reporters and "pip" in mine
    if "setuptools" in mine:  # CPython up to 3.11 bundles it; it carries pkg_resources
        major = int(mine["setuptools"].split(".")[0])
        assert major < 81
        subprocess.run([tmp_path / "cell/bin/python", "-c", "import pkg_resources"], check=True)
    assert f"{base_python()} -m venv" in (tmp_path / "build.log").read_text()


@pytest.mark.skipif(
    envs.installer() != "uv", reason="the ensurepip seed is uv's path; without uv the base's pip installs"
)
def test_an_interpreter_without_ensurepip_is_seeded_by_uv(tmp_path: Path) -> None:
    """Debian's python3 without python3-venv: ``-m venv`` fails, the half-made folder goes, uv seeds the venv."""
    fake = tmp_path / "python3"
    fake.write_text(
        f'#!/bin/sh\nif [ "$1" = "-m" ] && [ "$2" = "venv" ]; then mkdir -p "$3/bin"; echo "ensurepip is not '
        f'available" >&2; exit 1; fi\nexec {sys.executable} "$@"\n'
    )
    fake.chmod(0o755)
    job = _job(tmp_path, sys.executable)
    job.base = dataclasses.replace(job.base, executable=str(fake))  # the probe answers for the interpreter it execs
    envs._make_venv(job)
    assert "pip" in _packages(tmp_path / "cell/bin/python")
    log = (tmp_path / "build.log").read_text()
    assert "ensurepip is not available" in log and "seeding the venv with uv instead" in log


def _old_fingerprint(cell: Cell, base: object) -> str:
    """The fingerprint before the ensurepip seed (format 1, no "seed" key)."""
    made = {"cell": cell.to_dict(), "base": base.executable, "local": envs._local_stamp(cell), "format": 1}  # type: ignore[attr-defined]
    return hashlib.sha256(json.dumps(made, sort_keys=True).encode()).hexdigest()[:16]


def test_pinned_torch_cells_made_with_the_old_seed_are_made_again_system_ones_kept() -> None:
    """A pinned-torch cell built by ``uv venv --seed`` holds the newest setuptools: its fingerprint no longer
    matches, so it is rebuilt. A system-torch cell was never seeded: it keeps its fingerprint."""
    base = base_interpreter(sys.executable)
    pinned = Cell(python=base.version, torch="2.13.0", torch_source="pypi", packages={"deepspeed": "0.18.6"})
    system = Cell(python=base.version, torch="2.13.0", torch_source="system", packages={"deepspeed": "0.18.6"})
    assert envs._fingerprint(pinned, base) != _old_fingerprint(pinned, base)
    assert envs._fingerprint(system, base) == _old_fingerprint(system, base)
