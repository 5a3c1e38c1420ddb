"""A compatibility rule with ``imports`` holds only for runs whose scripts may import one of its modules."""

from __future__ import annotations

import keyword
import tempfile
from pathlib import Path

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from reprobisect.config.expand import CompatibilityRule
from reprobisect.config.load import Config, load_config
from reprobisect.config.script_imports import MAX_SCRIPT_BYTES, imported_modules, rules_for_scripts
from reprobisect.run.matrix_plan import plan_cells
from reprobisect.run.matrix_request import MatrixRequest
from reprobisect.run.sandbox import Confinement
from tests.unit.test_run_matrix import BASE, FakeIndex

RULE = CompatibilityRule(
    when={"lightning": ">=2.6"}, require={"deepspeed": ">=0.16"}, reason="Lightning refuses", imports=("lightning",)
)
PURE_DEEPSPEED = "import deepspeed\nimport torch\nfrom deepspeed.pipe import PipelineModule\n"


def _script(folder: Path, text: str, name: str = "issue.py") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text)
    return path


def test_the_imports_a_script_spells_are_read(tmp_path: Path) -> None:
    assert imported_modules(_script(tmp_path, PURE_DEEPSPEED)) == {"deepspeed", "torch"}
    fabric = _script(tmp_path, "def main():\n    from lightning.fabric import Fabric\n", "fabric.py")
    assert imported_modules(fabric) == {"lightning"}
    dynamic = _script(tmp_path, "import importlib\nL = importlib.import_module('lightning.pytorch')\n", "dyn.py")
    assert "lightning" in (imported_modules(dynamic) or set())


def test_what_cannot_be_told_counts_as_importing_anything(tmp_path: Path) -> None:
    assert imported_modules(tmp_path / "missing.py") is None
    assert imported_modules(_script(tmp_path / "a", "def (:\n")) is None
    assert imported_modules(_script(tmp_path / "b", "from . import helper\n")) is None
    beside = _script(tmp_path / "c", "import helper\nimport deepspeed\n")
    (beside.parent / "helper.py").write_text("import lightning\n")
    assert imported_modules(beside) is None
    binary = tmp_path / "d.py"
    binary.write_bytes(b"\xff\xfe\x00import lightning")
    assert imported_modules(binary) is None
    huge = _script(tmp_path / "e", "import deepspeed\n" + "x = 1\n" * (MAX_SCRIPT_BYTES // 6))
    assert imported_modules(huge) is None  # not parsed: a rule about an import holds
    assert imported_modules(tmp_path / "e") is None  # a folder, not a file


def test_a_rule_with_imports_holds_only_where_a_script_may_import_them(tmp_path: Path) -> None:
    plain = CompatibilityRule(when={"torch": "system"}, require={"python": "system"}, reason="r")
    pure = _script(tmp_path / "pure", PURE_DEEPSPEED)
    lightning = _script(tmp_path / "pl", "import lightning as L\n")
    broken = _script(tmp_path / "broken", "import (\n")
    assert rules_for_scripts([RULE, plain], [pure]) == (plain,)
    assert rules_for_scripts([RULE, plain], [pure, lightning]) == (RULE, plain)
    assert rules_for_scripts([RULE, plain], [pure, broken]) == (RULE, plain)
    assert rules_for_scripts([RULE, plain], []) == (RULE, plain)


@settings(max_examples=150, deadline=None)
@given(text=st.text(max_size=300))
def test_any_text_is_read_or_said_unknown_never_an_error(text: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "issue.py"
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        found = imported_modules(path)
        assert found is None or all(isinstance(name, str) for name in found)


NAMES = st.from_regex(r"[a-z_][a-z0-9_]{0,12}", fullmatch=True).filter(
    lambda n: not keyword.iskeyword(n) and n != "issue"
)


@settings(max_examples=150, deadline=None)
@given(modules=st.lists(st.tuples(NAMES, st.booleans(), st.booleans()), min_size=1, max_size=6))
def test_every_import_statement_is_seen_nested_or_not(modules: list[tuple[str, bool, bool]]) -> None:
    lines = []
    for name, dotted, nested in modules:
        statement = f"from {name}.sub import thing" if dotted else f"import {name}"
        lines += [f"def f_{len(lines)}():", f"    {statement}"] if nested else [statement]
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "issue.py"
        path.write_text("\n".join(lines) + "\n")
        found = imported_modules(path)
        assert found is not None and {name for name, _, _ in modules} <= found


def _config(tmp_path: Path, script: Path) -> Config:
    data = {
        "version": 1,
        "matrix": {
            "axes": {
                "python": ["system"],
                "torch": ["system"],
                "deepspeed": ["0.15.4", "0.16.4"],
                "lightning": ["2.6.6"],
            },
            "compatibility": [
                {
                    "when": {"lightning": ">=2.6", "torch": ">=2.5"},
                    "require": {"deepspeed": ">=0.16"},
                    "imports": ["lightning"],
                    "reason": "Lightning refuses deepspeed < 0.16",
                }
            ],
        },
        "repros": {
            "issue": {
                "title": "an issue's script",
                "forms": {"cpu-deepspeed": {"script": str(script), "precision": "fp32"}},
                "fixes": {"none": {}},
            }
        },
    }
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "matrix.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return load_config(path)


def test_a_pure_deepspeed_script_runs_the_release_the_lightning_rule_would_block(tmp_path: Path) -> None:
    request = MatrixRequest(repros=("issue",), backend="cpu", confinement=Confinement(sandbox=False))
    pure = plan_cells(_config(tmp_path / "pure", _script(tmp_path, PURE_DEEPSPEED)), request, BASE, FakeIndex())  # type: ignore[arg-type]
    assert [(c.pins["deepspeed"], c.blocked) for c in pure] == [("0.15.4", None), ("0.16.4", None)]
    lightning = _script(tmp_path / "pl", "import lightning\nimport deepspeed\n")
    with_lightning = plan_cells(_config(tmp_path / "pl", lightning), request, BASE, FakeIndex())  # type: ignore[arg-type]
    assert [(c.pins["deepspeed"], c.blocked) for c in with_lightning] == [
        ("0.15.4", "Lightning refuses deepspeed < 0.16"),
        ("0.16.4", None),
    ]
