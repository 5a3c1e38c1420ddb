"""The files that run inside a cell (``run/child/``) load on the oldest Python a cell may have.

Why: they run on the cell's interpreter, not the harness's, and matrix.yaml's report cells are Python 3.8
(Lightning #10510's environment). ``op_cache.py`` used ``functools.cache`` (3.9+): every run in a 3.8 cell failed
before the repro started, ``AttributeError: module 'functools' has no attribute 'cache'``, an OTHER_FAILURE at
setup that said nothing of the repro.
"""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path

import pytest

from reprobisect.cells.pythons import find_python

CHILD = Path(__file__).parents[2] / "src" / "reprobisect" / "run" / "child"
OLDEST = "3.8"
FILES = sorted(p for p in CHILD.glob("*.py") if p.name != "__init__.py")
NEEDS = {"pytest_runner.py": "pytest"}  # what a file imports that a bare interpreter lacks


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_a_child_file_parses_as_python_3_8(path: Path) -> None:
    ast.parse(path.read_text(encoding="utf-8"), filename=str(path), feature_version=(3, 8))


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_a_child_file_loads_on_python_3_8(path: Path) -> None:
    python = find_python(OLDEST)
    if python is None:
        pytest.skip(f"no Python {OLDEST} on this machine (uv python find, pyenv): the parse test above still runs")
    code = "import runpy, sys; runpy.run_path(sys.argv[1])"  # defines the file's functions: decorators run
    done = subprocess.run([python, "-c", code, str(path)], capture_output=True, text=True, timeout=60, check=False)
    missing = NEEDS.get(path.name)
    if missing and f"No module named '{missing}'" in done.stderr:
        return  # it loads up to the import a cell provides
    assert done.returncode == 0, done.stderr[-2000:]
