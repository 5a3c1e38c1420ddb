"""docs/development.md's map of the package matches the code: every module of ``src/reprobisect`` is named in it,
and every module path it names exists (issue #53, item 4). A module added without a word in the map, or a rename
the map did not follow, fails here rather than misleading the next reader."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "reprobisect"
MAP = ROOT / "docs" / "development.md"


def _modules() -> list[Path]:
    return sorted(
        p.relative_to(PACKAGE)
        for p in PACKAGE.rglob("*.py")
        if p.name not in ("__init__.py", "__main__.py") and "__pycache__" not in p.parts
    )


def unnamed_modules(text: str, modules: list[Path]) -> list[str]:
    """The modules whose file name the map never says (``grid.py``; ``matrix_grid.py`` does not name it)."""
    return [str(m) for m in modules if not re.search(rf"(?<![\w]){re.escape(m.name)}", text)]


def missing_paths(text: str) -> list[str]:
    """Module paths the map names (``run/one_run.py``) that are neither in the package nor in the checkout."""
    named = set(re.findall(r"(?<![\w./-])((?:[a-z_]+/)+[a-z_0-9]+\.py)\b", text))
    return sorted(n for n in named if not (PACKAGE / n).exists() and not (ROOT / n).exists())


def test_every_module_is_on_the_map() -> None:
    assert unnamed_modules(MAP.read_text(), _modules()) == []


def test_every_module_path_on_the_map_exists() -> None:
    assert missing_paths(MAP.read_text()) == []


def test_the_checks_see_a_module_left_off_and_a_path_renamed_away() -> None:
    modules = [Path("bisect/grid.py"), Path("run/one_run.py")]
    assert unnamed_modules("the grid (`matrix_grid.py`), one run (`one_run.py`)", modules) == ["bisect/grid.py"]
    assert missing_paths("see run/runner.py and run/one_run.py") == ["run/runner.py"]
