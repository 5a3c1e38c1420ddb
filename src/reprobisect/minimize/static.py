"""Candidates that cannot be interesting, told apart without running them.

A run costs seconds (an interpreter that imports torch and DeepSpeed); most candidates a reducer proposes are
broken in a way a reader sees at once: a block cut in half, a name used after its definition went. Those are
refused here for nothing: a candidate must compile, and pyflakes (the checker behind flake8's F-codes) must find
no undefined name the original did not already have. What is left is worth a run.
"""

from __future__ import annotations

import ast
import warnings

from pyflakes import checker, messages  # type: ignore[import-untyped]  # no type information shipped

__all__ = ["undefined_names", "why_not_runnable"]

_UNDEFINED = (messages.UndefinedName, messages.UndefinedLocal, messages.UndefinedExport)


def undefined_names(source: str) -> frozenset[str] | None:
    """The names ``source`` uses and never defines (pyflakes' view); None when it does not compile."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # SyntaxWarning for an odd escape is the script's business
            tree = ast.parse(source)
            compile(tree, "<candidate>", "exec")
    except (SyntaxError, ValueError):
        return None
    found = checker.Checker(tree, filename="<candidate>")
    return frozenset(str(m.message_args[0]) for m in found.messages if isinstance(m, _UNDEFINED))


def why_not_runnable(source: str, original_undefined: frozenset[str]) -> str | None:
    """Why a candidate need not run (it does not compile, or it uses a name it no longer defines); None when it
    must run to tell."""
    undefined = undefined_names(source)
    if undefined is None:
        return "does not compile"
    new = sorted(undefined - original_undefined)
    if new:
        return f"undefined name {new[0]!r}" + (f" (+{len(new) - 1})" if len(new) > 1 else "")
    return None
