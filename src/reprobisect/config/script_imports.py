"""Which modules a repro's scripts import, so that a compatibility rule about one package holds only where it is used.

matrix.yaml's rule "Lightning >= 2.6 with torch >= 2.6 refuses deepspeed < 0.16" is about Lightning's import of
DeepSpeed: a pure-DeepSpeed script from an issue never meets it, yet every triage cell carries the default cell's
Lightning, so without this the rule would block the script's DeepSpeed releases before 0.16 (a corpus entry whose
bug came with 0.16.0 could not show its passing 0.15.4). A rule with ``imports`` holds for a request only when one
of its scripts may import one of those modules. The answer errs on the side of the rule: a script that cannot be
read or parsed, that imports relatively or a module beside it (which may import anything), or that names the
module in a string (``importlib.import_module("lightning")``) counts as importing it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Sequence
from pathlib import Path

from reprobisect.config.expand import CompatibilityRule
from reprobisect.util.python_source import parse_python

__all__ = ["MAX_SCRIPT_BYTES", "imported_modules", "rules_for_scripts"]

MAX_SCRIPT_BYTES = 4 << 20  # a script from an issue is a page or two; a larger file is not parsed, the rule holds


def imported_modules(path: Path) -> frozenset[str] | None:
    """The top-level modules ``path`` imports or names in a string, as its syntax says; None when that cannot be
    told (the file unreadable, larger than ``MAX_SCRIPT_BYTES`` or no Python, a relative import, an import of a
    module that lies beside it)."""
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_SCRIPT_BYTES + 1)
        if len(raw) > MAX_SCRIPT_BYTES:
            return None
        tree = parse_python(raw.decode("utf-8"), filename=str(path))
    except (OSError, UnicodeDecodeError, SyntaxError):
        return None
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level or node.module is None:
                return None
            names.add(node.module.split(".")[0])
        elif isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            names.add(node.value.split(".")[0].strip())
    if any(_lies_beside(path, name) for name in names):
        return None
    return frozenset(names)


def _lies_beside(path: Path, name: str) -> bool:
    """A module of the script's own folder: what it imports is not in the script."""
    if not name.isidentifier():
        return False
    folder = path.parent
    return (folder / f"{name}.py").is_file() or (folder / name / "__init__.py").is_file()


def _may_import(scripts: Sequence[Path], modules: Iterable[str]) -> bool:
    wanted = set(modules)
    for script in scripts:
        found = imported_modules(script)
        if found is None or found & wanted:
            return True
    return False


def rules_for_scripts(rules: Sequence[CompatibilityRule], scripts: Sequence[Path]) -> tuple[CompatibilityRule, ...]:
    """The rules that hold for runs of ``scripts``: every rule without ``imports``, and each rule with them when a
    script may import one of its modules (no scripts: every rule)."""
    return tuple(rule for rule in rules if not rule.imports or not scripts or _may_import(scripts, rule.imports))
