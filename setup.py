"""The one build step ``pyproject.toml`` cannot say: the checkout's ``matrix.yaml`` and ``repros/`` go into the
package (``reprobisect/data/project/``) as the default matrix of an installed harness, run from any folder.

They are copied when the package is built, so the checkout's files stay the only copy (one source of truth); an
editable install reads the checkout's own. ``MANIFEST.in`` puts them in the sdist, so a wheel built from it has
them too. Everything else is in ``pyproject.toml``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
PROJECT_FILES = ("matrix.yaml", "repros")  # the matrix and the scripts and fixes it names, relative to it


class BuildPyWithProject(build_py):
    """``build_py`` that also copies the default matrix and its repros into the built package."""

    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return
        target = Path(self.build_lib) / "reprobisect" / "data" / "project"
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir(parents=True)
        for name in PROJECT_FILES:
            source = ROOT / name
            if source.is_dir():
                shutil.copytree(source, target / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
            else:
                shutil.copy2(source, target / name)


setup(cmdclass={"build_py": BuildPyWithProject})
