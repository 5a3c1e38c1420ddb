"""Inlining a function (or a method that does not use ``self``) called once: its parameters become assignments
at the call and its body takes the call's place, its last ``return`` the assignment's value. A candidate like any
other rewrite (``rewrite``), judged by real runs.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from reprobisect.minimize.edits import Edit, SourceText, owns_lines

__all__ = ["inlines"]


def inlines(tree: ast.Module, text: SourceText, parents: dict[ast.AST, ast.AST]) -> Iterator[tuple[str, list[Edit]]]:
    functions = [(n, None) for n in tree.body if isinstance(n, ast.FunctionDef)]
    methods = [
        (m, c) for c in tree.body if isinstance(c, ast.ClassDef) for m in c.body if isinstance(m, ast.FunctionDef)
    ]
    defined: dict[str, int] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            defined[node.name] = defined.get(node.name, 0) + 1
    for function, owner in [*functions, *methods]:
        if defined.get(function.name) != 1:
            continue
        call = _only_call(tree, function.name, method=owner is not None)
        if call is None:
            continue
        edits = _inline(function, owner, call, text, parents)
        if edits is not None:
            yield f"inline {function.name}", edits


def _only_call(tree: ast.Module, name: str, *, method: bool) -> ast.Call | None:
    """The one call of ``name`` when the script names it nowhere else."""
    uses: list[ast.AST]
    if method:
        uses = [n for n in ast.walk(tree) if isinstance(n, ast.Attribute) and n.attr == name]
        if any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(tree)):
            return None
    else:
        uses = [n for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)]
    if len(uses) != 1:
        return None
    calls = [c for c in ast.walk(tree) if isinstance(c, ast.Call) and c.func is uses[0]]
    return calls[0] if calls else None


def _inline(
    function: ast.FunctionDef,
    owner: ast.ClassDef | None,
    call: ast.Call,
    text: SourceText,
    parents: dict[ast.AST, ast.AST],
) -> list[Edit] | None:
    statement = parents.get(call)
    if isinstance(statement, ast.Expr):
        target = None
    elif isinstance(statement, ast.Assign) and len(statement.targets) == 1 and statement.value is call:
        target = text.segment(statement.targets[0])
    else:
        return None
    if not owns_lines(statement, text) or _inside(call, function, parents):
        return None
    body = list(function.body)
    if (
        body
        and isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
        and isinstance(body[0].value.value, str)
    ):
        body = body[1:]
    if not body or body[0].lineno == function.lineno or not _inlinable(function, body):
        return None
    bindings = _bindings(function, owner, call, text)
    if bindings is None:
        return None
    last = body[-1]
    ending: str | None = None
    if isinstance(last, ast.Return):
        body = body[:-1]
        value = text.segment(last.value) if last.value is not None else None
        if target is not None:
            ending = f"{target} = {value if value is not None else 'None'}" if value != target else None
        elif value is not None:
            ending = value
    elif target is not None:
        ending = f"{target} = None"
    indent = text.indent_of(statement.lineno)
    lines = [f"{indent}{name} = {value}\n" for name, value in bindings]
    lines += _body_lines(body, indent, text)
    if ending is not None:
        lines += [f"{indent}{part}\n" if i == 0 else f"{part}\n" for i, part in enumerate(ending.split("\n"))]
    if not lines:
        lines = [f"{indent}pass\n"]
    edits = [Edit(*text.whole_lines(statement.lineno, statement.end_lineno or statement.lineno), "".join(lines))]
    first_def = min([function.lineno, *(d.lineno for d in function.decorator_list)])
    siblings = owner.body if owner is not None else []
    if owner is None or len(siblings) > 1:
        edits.append(Edit(*text.whole_lines(first_def, function.end_lineno or function.lineno), ""))
    return edits


def _body_lines(body: list[ast.stmt], indent: str, text: SourceText) -> list[str]:
    """The lines of ``body`` re-indented to ``indent`` (lines inside a multi-line string and blank ones as they are)."""
    if not body:
        return []
    lines = []
    first = min([body[0].lineno, *(d.lineno for d in getattr(body[0], "decorator_list", []))])
    inner = text.indent_of(first)
    for number in range(first, (body[-1].end_lineno or body[-1].lineno) + 1):
        line = text.lines[number - 1]
        if number in text.in_string or not line.strip():
            lines.append(line if line.endswith("\n") else line + "\n")
        else:
            lines.append(indent + (line[len(inner) :] if line.startswith(inner) else line.lstrip()))
    return lines


def _inside(node: ast.AST, container: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    while node in parents:
        node = parents[node]
        if node is container:
            return True
    return False


def _inlinable(function: ast.FunctionDef, body: list[ast.stmt]) -> bool:
    """No ``yield``, ``await``, ``global`` or ``nonlocal``, no ``*args``/``**kwargs``, and no ``return`` but the
    last statement of the body (one inside a nested function is that function's)."""
    arguments = function.args
    if arguments.vararg or arguments.kwarg or arguments.posonlyargs:
        return False
    for node in _own_nodes(body):
        if isinstance(node, ast.Yield | ast.YieldFrom | ast.Await | ast.Global | ast.Nonlocal):
            return False
        if isinstance(node, ast.Return) and node is not body[-1]:
            return False
    return True


def _own_nodes(body: list[ast.stmt]) -> Iterator[ast.AST]:
    """The nodes of ``body`` outside nested functions, lambdas and classes."""
    stack: list[ast.AST] = list(body)
    while stack:
        node = stack.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef):
                stack.append(child)


def _bindings(
    function: ast.FunctionDef, owner: ast.ClassDef | None, call: ast.Call, text: SourceText
) -> list[tuple[str, str]] | None:
    """``(parameter, value)`` for each parameter, in order; None when the call cannot be matched to them or a
    method uses its ``self``/``cls``."""
    params = [a.arg for a in function.args.args]
    decorators = {ast.unparse(d) for d in function.decorator_list}
    if owner is not None:
        if "staticmethod" not in decorators:
            if not params:
                return None
            receiver, params = params[0], params[1:]
            if any(isinstance(n, ast.Name) and n.id == receiver for n in ast.walk(function)):
                return None
        if decorators - {"staticmethod", "classmethod"}:
            return None
    elif function.decorator_list:
        return None
    if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
        return None
    kwonly = [a.arg for a in function.args.kwonlyargs]
    if len(call.args) > len(params):
        return None
    values: dict[str, str] = {}
    for name, arg in zip(params, call.args, strict=False):
        values[name] = _value_text(text.segment(arg))
    for keyword in call.keywords:
        assert keyword.arg is not None
        if keyword.arg not in params + kwonly or keyword.arg in values:
            return None
        values[keyword.arg] = _value_text(text.segment(keyword.value))
    defaults = dict(zip(params[len(params) - len(function.args.defaults) :], function.args.defaults, strict=True))
    defaults |= {a.arg: d for a, d in zip(function.args.kwonlyargs, function.args.kw_defaults, strict=True) if d}
    out = []
    for name in params + kwonly:
        if name not in values:
            if name not in defaults:
                return None
            values[name] = _value_text(text.segment(defaults[name]))
        if values[name] != name:
            out.append((name, values[name]))
    return out


def _value_text(segment: str) -> str:
    return f"({segment})" if "\n" in segment else segment
