"""Tools a run needs that are not the cell's packages: pytest, for a package's own tests run as a repro (--pytest).

A cell that already sees a pytest (its own, or a GPU image's through the base interpreter) uses it. Otherwise
the harness installs pytest once per Python version into ``<envs>/tools/pytest-py<X.Y>/`` and puts that folder
on the run's PYTHONPATH: the cell itself, its id and every other repro's runs stay as they are. pytest is pure
Python, so one folder serves every cell of that Python. Installed with the user's index (uv or pip), offline
from a wheelhouse too; several harnesses at once take turns on a lock.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import sys
import tempfile
from pathlib import Path

from reprobisect.cells.envs import CellEnv, installer
from reprobisect.errors import EnvBuildError
from reprobisect.util.cmd import run_tool

__all__ = ["has_pytest", "pytest_folder"]

_PROBE = "import importlib.util, sys; sys.exit(0 if importlib.util.find_spec('pytest') else 3)"
_VERSION = "import sys; print(f'{sys.version_info[0]}.{sys.version_info[1]}')"


def has_pytest(env: CellEnv) -> bool:
    """Does the cell's python import pytest already (its own, or its base interpreter's)?"""
    done = run_tool([env.python, "-c", _PROBE], what="looking for pytest in the cell", timeout=60, check=False)
    return done.returncode == 0


def pytest_folder(env: CellEnv, envs_dir: Path) -> Path | None:
    """None when the cell has pytest; else the folder holding one for the cell's Python, installed on first use."""
    if has_pytest(env):
        return None
    version = run_tool([env.python, "-c", _VERSION], what="asking the cell's Python version", timeout=60).stdout
    folder = envs_dir / "tools" / f"pytest-py{version.strip()}"
    if (folder / "pytest").is_dir():
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    with (folder.parent / f"{folder.name}.flock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (folder / "pytest").is_dir():
            _install(env, folder, version.strip())
    return folder


def _install(env: CellEnv, folder: Path, version: str) -> None:
    """pytest into a new folder, renamed into place once complete (a cut install is never used)."""
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
    try:
        if installer() == "uv":
            cmd = ["uv", "pip", "install", "--quiet", "--python", str(env.python), "--target", str(staging), "pytest"]
        else:  # the cell may have no pip of its own: the harness's pip, for the cell's Python (pytest is pure Python)
            cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--target", str(staging)]
            cmd += ["--python-version", version, "--only-binary", ":all:", "pytest"]
        run_tool(cmd, what=f"installing pytest for the cell {env.cell.id}", timeout=600, error=EnvBuildError)
        if folder.exists():
            shutil.rmtree(folder)
        os.replace(staging, folder)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
