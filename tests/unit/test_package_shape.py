"""The package's shape (issue #40, "a house others can move into"): every module and class has a name of its own,
no module is over 500 lines, no function over 60 lines or 8 parameters (``self``/``cls`` not counted). Measured with
``ast`` on src/reprobisect. An exception is listed below with its reason; an entry that is no longer needed fails
too, so the list only shrinks."""

from __future__ import annotations

import ast
from collections import defaultdict

from tests.conftest import ROOT

PACKAGE = ROOT / "src" / "reprobisect"
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 60
MAX_PARAMETERS = 8

# The exceptions, each with why it stands: only what the limit would make worse, never code waiting to be split.
ALLOWED_MODULE_LINES: dict[str, str] = {}
ALLOWED_FUNCTION_LINES: dict[str, str] = {}
ALLOWED_PARAMETERS = {
    "util/cmd.py:run_tool": "subprocess.run's own keywords (timeout, env, cwd, input, check, ...), one helper for all",
}


def _modules() -> dict[str, ast.Module]:
    return {p.relative_to(PACKAGE).as_posix(): ast.parse(p.read_text(encoding="utf-8")) for p in PACKAGE.rglob("*.py")}


def _functions(tree: ast.Module) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]


def _parameters(function: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    a = function.args
    names = [*a.posonlyargs, *a.args, *a.kwonlyargs]
    count = len(names) + (a.vararg is not None) + (a.kwarg is not None)
    return count - (1 if names and names[0].arg in ("self", "cls") else 0)


def test_every_module_file_name_is_unique() -> None:
    seen: dict[str, list[str]] = defaultdict(list)
    for path in PACKAGE.rglob("*.py"):
        if path.name != "__init__.py":
            seen[path.name].append(path.relative_to(PACKAGE).as_posix())
    assert {name: paths for name, paths in seen.items() if len(paths) > 1} == {}


def test_every_class_name_is_unique() -> None:
    seen: dict[str, list[str]] = defaultdict(list)
    for module, tree in _modules().items():
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                seen[node.name].append(module)
    assert {name: where for name, where in seen.items() if len(where) > 1} == {}


def test_no_module_is_over_500_lines() -> None:
    over = {
        p.relative_to(PACKAGE).as_posix(): n
        for p in PACKAGE.rglob("*.py")
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert set(over) == set(ALLOWED_MODULE_LINES), over


def test_no_function_is_over_60_lines() -> None:
    over = {
        f"{module}:{f.name}": (f.end_lineno or f.lineno) - f.lineno + 1
        for module, tree in _modules().items()
        for f in _functions(tree)
        if (f.end_lineno or f.lineno) - f.lineno + 1 > MAX_FUNCTION_LINES
    }
    assert set(over) == set(ALLOWED_FUNCTION_LINES), over


def test_no_function_takes_more_than_8_parameters() -> None:
    over = {
        f"{module}:{f.name}": _parameters(f)
        for module, tree in _modules().items()
        for f in _functions(tree)
        if _parameters(f) > MAX_PARAMETERS
    }
    assert set(over) == set(ALLOWED_PARAMETERS), over


def test_the_minimize_function_is_short() -> None:
    tree = _modules()["minimize/pipeline.py"]
    (minimize,) = [f for f in _functions(tree) if f.name == "minimize"]
    assert (minimize.end_lineno or minimize.lineno) - minimize.lineno + 1 <= MAX_FUNCTION_LINES


def test_the_allow_lists_name_things_that_exist() -> None:
    modules = _modules()
    for entry in [*ALLOWED_FUNCTION_LINES, *ALLOWED_PARAMETERS]:
        module, _, name = entry.partition(":")
        assert module in modules and any(f.name == name for f in _functions(modules[module])), entry
    assert all((PACKAGE / module).is_file() for module in ALLOWED_MODULE_LINES)
