"""Candidates that cannot be interesting, told apart without running them.

A run costs seconds (an interpreter that imports torch and DeepSpeed); most candidates a reducer proposes are
broken in a way a reader sees at once: a block cut in half, a name used after its definition went. Those are
refused here for nothing: a candidate must compile, and pyflakes (the checker behind flake8's F-codes) must find
no undefined name the original did not already have. What is left is worth a run.

The other way round, some statements can go without a run of their own: an import none of whose names is used,
a top-level function or class nothing names (``unused_definitions``). The reducer drops them beside whatever it
tries, so a run is never spent asking about a statement that nothing can reach.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import warnings
from collections.abc import Mapping

from pyflakes import checker, messages  # type: ignore[import-untyped]  # no type information shipped

from reprobisect.minimize.settings import lost_sites
from reprobisect.util.python_source import PARSE_FAILURES, parse_python

__all__ = ["undefined_names", "unused_definitions", "why_not_runnable"]

_UNDEFINED = (messages.UndefinedName, messages.UndefinedLocal, messages.UndefinedExport)


@dataclasses.dataclass(frozen=True)
class _Checked:
    """What one pyflakes pass over a candidate says: the names it never defines, the unused statements' lines."""

    undefined: frozenset[str]
    unused: frozenset[int]


@functools.lru_cache(maxsize=1024)
def _checked(source: str) -> _Checked | None:
    """One compile and one pyflakes pass per text, None when it does not compile. Cached: the reducer asks about the
    same text several times (the pruning beside a candidate, its refusal, a group's closure)."""
    try:
        tree = parse_python(source, "<candidate>")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # SyntaxWarning for an odd escape is the script's business
            compile(tree, "<candidate>", "exec")
        found = checker.Checker(tree, filename="<candidate>").messages
    except PARSE_FAILURES:
        return None
    undefined = frozenset(str(m.message_args[0]) for m in found if isinstance(m, _UNDEFINED))
    unused_at: dict[int, int] = {}
    for message in found:
        if isinstance(message, messages.UnusedImport):
            unused_at[message.lineno] = unused_at.get(message.lineno, 0) + 1
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom) and unused_at.get(node.lineno, 0) >= len(node.names):
            lines.add(node.lineno)
    named = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | {
        n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)
    }
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and node.name not in named:
            lines.add(min([node.lineno, *(d.lineno for d in node.decorator_list)]))
    return _Checked(undefined=undefined, unused=frozenset(lines))


def undefined_names(source: str) -> frozenset[str] | None:
    """The names ``source`` uses and never defines (pyflakes' view); None when it does not compile."""
    checked = _checked(source)
    return checked.undefined if checked is not None else None


def unused_definitions(source: str) -> frozenset[int]:
    """The first lines (decorators included) of the statements of ``source`` that nothing uses: imports all of
    whose names pyflakes finds unused, and top-level functions and classes whose name appears nowhere else as a
    name. Empty when it does not compile."""
    checked = _checked(source)
    return checked.unused if checked is not None else frozenset()


def why_not_runnable(
    source: str, original_undefined: frozenset[str], sites: Mapping[str, int] | None = None
) -> str | None:
    """Why a candidate need not run (it does not compile, it uses a name it no longer defines, or it lost a place
    where the original set its environment: ``sites``, see ``settings``); None when it must run to tell."""
    undefined = undefined_names(source)
    if undefined is None:
        return "does not compile"
    new = sorted(undefined - original_undefined)
    if new:
        return f"undefined name {new[0]!r}" + (f" (+{len(new) - 1})" if len(new) > 1 else "")
    lost = lost_sites(source, sites or {})
    if lost:
        more = f" (+{len(lost) - 1})" if len(lost) > 1 else ""
        return f"no longer sets the environment as the original did: {lost[0][:80]}{more} (plain python needs it)"
    return None
