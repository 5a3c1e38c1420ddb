"""A commit's wheel builds as its cell's installs do (cells/built_wheels.py): a tree whose ``setup.py`` imports
``pkg_resources`` (Lightning before 2.4) does not build on a base whose setuptools removed it (81 on), and builds
when the cell pins ``setuptools==80.9.0`` (``--require``), because the isolated build's tools are then held to
the cell's pins. The control (no pins) fails the same way, so the test can fail."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from reprobisect.cells.built_wheels import BuildWith, build_commit, check_wheel

pytestmark = pytest.mark.slow

SETUP = """
import pkg_resources  # as Lightning's setup.py before 2.4 did
from setuptools import setup
setup(name="oldpkg", version="0.1", packages=["oldpkg"])
"""


def _commit(repo: Path) -> str:
    (repo / "oldpkg").mkdir(parents=True)
    (repo / "oldpkg" / "__init__.py").write_text("VALUE = 1\n")
    (repo / "setup.py").write_text(SETUP)
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "old setup.py"], check=True)
    return subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()


def _base_without_pkg_resources(folder: Path) -> Path:
    """A base interpreter with pip and the index's newest setuptools (no ``pkg_resources``), as pyenv's 3.11.7 with
    setuptools 84 was when the harness met this."""
    subprocess.run(["uv", "venv", "--quiet", "--seed", "--python", sys.executable, str(folder)], check=True)
    python = folder / "bin" / "python"
    subprocess.run(["uv", "pip", "install", "--quiet", "--python", str(python), "setuptools>=81", "pip"], check=True)
    has = subprocess.run([str(python), "-c", "import pkg_resources"], capture_output=True, check=False)
    assert has.returncode != 0, "the base still has pkg_resources: the control would not fail"
    return python


def test_a_commit_builds_with_the_setuptools_its_cell_pins(tmp_path: Path) -> None:
    sha = _commit(tmp_path / "repo")
    python = _base_without_pkg_resources(tmp_path / "base")
    version = subprocess.run(
        [str(python), "-c", "import sys; print('%d.%d.%d' % sys.version_info[:3])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()

    control = BuildWith(python=str(python), python_version=version, log=tmp_path / "control.log")
    wheel, why = build_commit(tmp_path / "wheels1", "oldpkg", tmp_path / "repo", sha, control)
    assert wheel is None and "pkg_resources" in why

    pins = {
        "setuptools": "80.9.0",
        "deepspeed": "0.15.3",
        "oldpkg": "0.1",
        "torchvision": "match",
        "x": "git+file:///r",
    }
    held = BuildWith(python=str(python), python_version=version, log=tmp_path / "held.log", constraints=pins)
    wheel, why = build_commit(tmp_path / "wheels2", "oldpkg", tmp_path / "repo", sha, held)
    assert wheel is not None and why == "", (tmp_path / "held.log").read_text()
    assert check_wheel(wheel, "oldpkg", "0.1") is None
    assert (
        "its build tools held to the cell's pins: deepspeed==0.15.3 setuptools==80.9.0 \n"
        in (tmp_path / "held.log").read_text()
    )
