"""The environment a script sets for itself, which a minimized script must keep to run as plain ``python``.

Every candidate runs with the variables the harness's launcher sets (``MASTER_ADDR``, ``RANK``, ...; a form's
``DS_ACCELERATOR=cpu``; the user's ``--env``). A script that sets them itself (``os.environ.setdefault(name,
value)`` in a loop over torchrun's variables) lost nothing inside the harness when those lines went, so the reducer
dropped them; pasted into an upstream issue, ``python minimized.py`` then failed on a plain machine for a reason
that has nothing to do with the bug. So every place the original sets a variable, and that ran in its traced run, is
a **site** a candidate must keep (``static.why_not_runnable`` refuses one that lost a site, unrun; the failure's
slice keeps their lines): the lines that set the environment stay, and the result names them.

A site is an assignment to ``os.environ[...]``, a call of ``os.environ.setdefault``/``update`` or ``os.putenv``
(``environ`` imported from ``os`` too), whatever its key: a name computed in a loop counts as well. Sites are told
apart by their code (``ast.unparse``), so moving one (a function inlined) keeps it, and a rewrite that changes one
is refused like a deletion.
"""

from __future__ import annotations

import ast
import collections
import dataclasses
import functools
from collections.abc import Iterable, Mapping

from reprobisect.util.python_source import PARSE_FAILURES, parse_python

__all__ = ["Site", "lost_sites", "required_sites", "sites"]


@dataclasses.dataclass(frozen=True)
class Site:
    """One place a script sets its environment: its first line, its code, the variables it names (constant keys)."""

    line: int
    code: str
    names: tuple[str, ...]


@functools.lru_cache(maxsize=1024)
def sites(source: str) -> tuple[Site, ...]:
    """Every place ``source`` sets an environment variable, in line order (none when it does not parse)."""
    return tuple(site for site, _ in _located(source))


def required_sites(source: str, ran: Iterable[int] | None) -> dict[str, int]:
    """The sites of the original a candidate must keep, as code → how many: those on a line that ran, and those
    inside an ``if`` that ran and reads the environment (``if "MASTER_PORT" not in os.environ:``: inside the harness,
    which sets that variable, its body never runs; as plain ``python`` it must). Every site when ``ran`` is None
    (the original was not traced)."""
    executed = None if ran is None else set(ran)
    kept = [
        site.code
        for site, guards in _located(source)
        if executed is None or site.line in executed or any(guard in executed for guard in guards)
    ]
    return dict(collections.Counter(kept))


@functools.lru_cache(maxsize=256)
def _located(source: str) -> tuple[tuple[Site, tuple[int, ...]], ...]:
    """Each site in line order, with the lines of the ``if`` statements around it whose test reads the
    environment (none when ``source`` does not parse)."""
    try:
        tree = parse_python(source)
        parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        found = [(site, _env_guards(node, parents)) for node in ast.walk(tree) if (site := _site(node)) is not None]
    except PARSE_FAILURES:
        return ()
    return tuple(sorted(found, key=lambda pair: pair[0].line))


def _env_guards(node: ast.AST, parents: Mapping[ast.AST, ast.AST]) -> tuple[int, ...]:
    guards = []
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.If) and _reads_environment(node.test):
            guards.append(node.lineno)
    return tuple(guards)


def _reads_environment(test: ast.expr) -> bool:
    """Whether an ``if`` test looks at the environment: ``os.environ`` / ``environ`` or ``os.getenv`` in it."""
    return any(
        _is_environ(n) or (isinstance(n, ast.Attribute) and n.attr == "getenv" and _is_name(n.value, "os"))
        for n in ast.walk(test)
        if isinstance(n, ast.expr)
    )


def lost_sites(source: str, required: Mapping[str, int]) -> list[str]:
    """The code of each required site ``source`` no longer has (as often as it lacks it)."""
    if not required:
        return []
    have = collections.Counter(site.code for site in sites(source))
    return [code for code, count in required.items() for _ in range(count - have.get(code, 0))]


def _site(node: ast.AST) -> Site | None:
    if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        subscripts = [t.slice for t in targets if isinstance(t, ast.Subscript) and _is_environ(t.value)]
        return Site(node.lineno, _code(node), _names(subscripts)) if subscripts else None
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
        return None
    method, owner = node.func.attr, node.func.value
    if method in ("setdefault", "putenv"):
        sets = _is_environ(owner) if method == "setdefault" else _is_name(owner, "os")
        keys: list[ast.expr | None] = list(node.args[:1])
    elif method == "update":
        sets = _is_environ(owner)
        keys = [k for arg in node.args if isinstance(arg, ast.Dict) for k in arg.keys]
    else:
        return None
    named = tuple(kw.arg for kw in node.keywords if kw.arg)
    return Site(node.lineno, _code(node), _names(keys) + named) if sets else None


def _code(node: ast.AST) -> str:
    try:
        return ast.unparse(node)
    except (RecursionError, ValueError):
        return f"<line {getattr(node, 'lineno', '?')}>"


def _names(keys: Iterable[ast.expr | None]) -> tuple[str, ...]:
    return tuple(k.value for k in keys if isinstance(k, ast.Constant) and isinstance(k.value, str))


def _is_environ(node: ast.expr) -> bool:
    """``os.environ`` or a bare ``environ`` (``from os import environ``)."""
    if isinstance(node, ast.Attribute):
        return node.attr == "environ" and _is_name(node.value, "os")
    return _is_name(node, "environ")


def _is_name(node: ast.expr, name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == name
