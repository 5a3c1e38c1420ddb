"""docs/development.md's one-page architecture stays the code's: the layers it names are the import contract
``lint-imports`` checks (pyproject.toml, [tool.importlinter]), in order, and every module it names exists."""

from __future__ import annotations

import re
import tomllib

from tests.docs.markdown import ROOT

DEVELOPMENT = ROOT / "docs" / "development.md"
PACKAGE = ROOT / "src" / "reprobisect"


def _section() -> str:
    text = DEVELOPMENT.read_text(encoding="utf-8")
    start = text.index("## Architecture on one page")
    return text[start : text.index("\n## ", start + 1)]


def test_the_layers_it_names_are_the_import_contract() -> None:
    line = _section().split("<!-- layers -->\n", 1)[1].splitlines()[0]
    documented = [layer.strip().strip("`") for layer in line.split("→")]
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]
    layers = next(c for c in contracts["contracts"] if c["name"] == "layers: imports only go down")["layers"]
    assert documented == [layer.replace("reprobisect.", "") for layer in layers]


def test_every_module_it_names_exists() -> None:
    named = set(re.findall(r"\b((?:[a-z_]+/)+[a-z_<>]+\.py)\b", _section()))
    named = {path for path in named if "<" not in path and not path.startswith(("tests/", "docs/"))}
    assert named and all((PACKAGE / path).is_file() for path in named), sorted(
        p for p in named if not (PACKAGE / p).is_file()
    )
