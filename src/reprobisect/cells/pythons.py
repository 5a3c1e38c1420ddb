"""Which Python interpreters this machine has, for a cell that pins one (``--python 3.12.1``): never downloaded.

A cell's interpreter is found by uv (``uv python find --no-python-downloads``), on PATH (``python3.12``) or in pyenv's
versions folder, in that order; a path is taken as it is, once checked (config/interpreters.py).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from reprobisect.config.interpreters import check_interpreter
from reprobisect.errors import ToolError
from reprobisect.util.cmd import run_tool

__all__ = ["find_python"]


def _runs(python: str) -> bool:
    try:
        run_tool([python, "-c", "pass"], what="trying an interpreter", timeout=60)
    except ToolError:
        return False
    return True


def find_python(version: str) -> str | None:
    """An interpreter of this Python version on this machine, or None (nothing is downloaded)."""
    if "/" in version:  # a path: an interpreter's, checked without running it (config/interpreters.py)
        return check_interpreter(version, "python") if Path(version).exists() else None
    try:
        done = run_tool(["uv", "python", "find", "--no-python-downloads", version], what="uv python find", timeout=60)
        if done.stdout.strip():
            return done.stdout.strip()
    except ToolError:
        pass
    found = shutil.which(f"python{version}")
    if found and _runs(found):
        return found
    return _pyenv_python(version)


def _pyenv_python(version: str) -> str | None:
    """pyenv's interpreter of ``version``: ``3.12.1`` is ``versions/3.12.1/bin/python3.12`` (the binary is named by
    the minor version: looking for ``python3.12.1`` found none, and a corpus entry pinning 3.12.1 was ENV_ERROR in
    every cell on a machine that had it); ``3.12`` is the newest ``versions/3.12.*``."""
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    minor = ".".join(version.split(".")[:2])
    if version.count(".") >= 2:
        exact = pyenv / version / "bin" / f"python{minor}"
        return str(exact) if exact.is_file() else None
    found = [p for p in pyenv.glob(f"{version}.*/bin/python{minor}") if _release(p.parents[1].name) is not None]
    return str(max(found, key=lambda p: _release(p.parents[1].name) or ())) if found else None


def _release(name: str) -> tuple[int, ...] | None:
    """``3.12.1`` as ``(3, 12, 1)``; None for a folder that is not a plain release (``3.12.1-debug``)."""
    parts = name.split(".")
    return tuple(int(part) for part in parts) if all(part.isdigit() for part in parts) else None
