"""The failure's slice: the statements the failing line depends on, as one candidate.

A maintainer reading a flattened repro asks of each statement "does the failing line need it?": does it bind a name
the failing line (or something it needs) reads, or act on an object that is needed (``engine_G.backward(loss_G)``
changes ``engine_G``, whose parameters the failing line compares)? Everything else — logging, timing, the
sample grid, a loop's bookkeeping — goes. That question, asked of the whole script at once, is a static backward
slice; it is approximate (an object changed through an alias or a global is missed), so it is a candidate like any
other, judged by real runs, and the statement reducer goes on from whichever text won.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator

from reprobisect.minimize.statements import blocks, owns_its_lines, string_lines
from reprobisect.util.python_source import parse_python

__all__ = ["failure_slice"]

_BLOCK_FIELDS = ("body", "orelse", "finalbody", "handlers")
_MAX_DEPTH = 20  # rounds of unwrapping, one nesting level or more each


def failure_slice(source: str, lines: Iterable[int], *, unwrap: bool = False, module_calls: bool = True) -> str | None:
    """``source`` with only the statements that the statements on ``lines`` (the failure's path through the
    script) depend on, their enclosing statements, and what acts on the objects they need; with ``unwrap``, the
    loops, ``if``s and ``with``s around the failing lines unwrapped too (their bodies one indent less) and the slice
    taken again, so what only the loop needed (a loader, a dataset) goes as well. Without ``module_calls``, a call on
    an imported module (``torch.manual_seed(0)``, ``deepspeed.init_distributed()``) does not count as acting on a
    needed object: the slice is smaller, and more often wrong. None when nothing goes or ``source`` does not parse."""
    wanted = frozenset(lines)
    cut = _slice(source, wanted, module_calls=module_calls)
    text, origins = cut if cut is not None else (source, list(range(1, source.count("\n") + 2)))
    if unwrap:
        before = text
        for _ in range(_MAX_DEPTH):  # an ``if step == 0`` unwrapped first lets the loop that binds ``step`` go next
            unwrapped = _unwrap_around(text, [i + 1 for i, o in enumerate(origins) if o in wanted])
            if unwrapped is None:
                break
            text, kept = unwrapped
            origins = [origins[k - 1] for k in kept]
        if text != before:
            again = _slice(text, [i + 1 for i, o in enumerate(origins) if o in wanted], module_calls=module_calls)
            text = again[0] if again is not None else text
    return text if text != source else None


def _slice(source: str, lines: Iterable[int], *, module_calls: bool = True) -> tuple[str, list[int]] | None:
    """The slice's text and, for each of its lines, the line of ``source`` it was."""
    try:
        tree = parse_python(source)
    except SyntaxError:
        return None
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    simple = [s for s in _statements(tree) if not _is_compound(s)]
    wanted = set(lines)
    kept: set[ast.stmt] = {s for s in simple if wanted & set(range(s.lineno, (s.end_lineno or s.lineno) + 1))}
    if not kept:
        return None
    needed: set[str] = set()
    modules = (
        set()
        if module_calls
        else {n for s in _statements(tree) if isinstance(s, ast.Import | ast.ImportFrom) for n in _binds(s)}
    )
    definitions = [s for s in _statements(tree) if isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)]
    changed = True
    while changed:
        changed = False
        for statement in list(kept):
            for ancestor in _ancestors(statement, parents):
                if ancestor not in kept:
                    kept.add(ancestor)
                    changed = True
        for statement in kept:
            needed |= _reads(statement)
        for statement in simple + definitions:
            if statement not in kept and _needed(statement, needed, modules):
                kept.add(statement)
                changed = True
    drop = [s for s in _statements(tree) if s not in kept and all(a in kept for a in _ancestors(s, parents))]
    drop = [s for s in drop if not _inside_kept_definition(s, kept, parents)]
    if not drop:
        return None
    return _without(source, tree, set(drop))


def _unwrap_around(source: str, lines: list[int]) -> tuple[str, list[int]] | None:
    """``source`` with every ``for``, ``while``, ``if`` and ``with`` (without ``else``) around ``lines`` unwrapped,
    and the lines of ``source`` each line of the result was; None when there is none or a string spans the lines
    that would move."""
    try:
        tree = parse_python(source)
    except SyntaxError:
        return None
    text = source.splitlines(keepends=True)
    wrappers = [
        s
        for s in _statements(tree)
        if isinstance(s, ast.For | ast.AsyncFor | ast.While | ast.If | ast.With | ast.AsyncWith)
        and not getattr(s, "orelse", None)
        and any(s.body[0].lineno <= line <= (s.end_lineno or s.lineno) for line in lines)
        and all(owns_its_lines(b, text) for b in s.body)
        and not (_loop_names(s) & _read_in(s.body))  # its body reads what the loop binds: it needs the loop
    ]
    if not wrappers:
        return None
    in_string = string_lines(source)
    headers: set[int] = set()
    dedent = [0] * (len(text) + 2)
    for wrapper in wrappers:
        headers.update(range(wrapper.lineno, wrapper.body[0].lineno))
        by = wrapper.body[0].col_offset - wrapper.col_offset
        for number in range(wrapper.body[0].lineno, (wrapper.end_lineno or wrapper.lineno) + 1):
            if number in in_string:
                return None
            dedent[number] += by
    out, kept = [], []
    for number, line in enumerate(text, start=1):
        if number in headers:
            continue
        by = dedent[number]
        if line.strip() and line[:by].strip():
            return None  # a line less indented than its block (a continuation): leave it be
        out.append(line[by:] if line.strip() else line)
        kept.append(number)
    return "".join(out), kept


def _loop_names(statement: ast.stmt) -> set[str]:
    """The names a ``for`` or a ``with`` binds for its body."""
    targets: list[ast.AST] = []
    if isinstance(statement, ast.For | ast.AsyncFor):
        targets = [statement.target]
    elif isinstance(statement, ast.With | ast.AsyncWith):
        targets = [item.optional_vars for item in statement.items if item.optional_vars is not None]
    return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}


def _read_in(body: list[ast.stmt]) -> set[str]:
    return {n.id for s in body for n in ast.walk(s) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _statements(tree: ast.AST) -> Iterator[ast.stmt]:
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt):
            yield node


def _is_compound(statement: ast.stmt) -> bool:
    return any(isinstance(getattr(statement, field, None), list) for field in _BLOCK_FIELDS) and not isinstance(
        statement, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef
    )


def _ancestors(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> Iterator[ast.stmt]:
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.stmt):
            yield node


def _inside_kept_definition(statement: ast.stmt, kept: set[ast.stmt], parents: dict[ast.AST, ast.AST]) -> bool:
    """A statement of a kept function or class stays: the slice does not look inside definitions."""
    return any(
        isinstance(a, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and a in kept
        for a in _ancestors(statement, parents)
    )


def _reads(statement: ast.stmt) -> set[str]:
    """The names a kept statement reads: a compound statement's header only (its body is judged statement by
    statement), a definition's whole body."""
    if _is_compound(statement):
        parts: list[ast.AST] = [
            getattr(statement, field)
            for field in ("test", "iter", "target", "items", "subject")
            if isinstance(getattr(statement, field, None), ast.AST | list)
        ]
        nodes = [n for part in parts for item in (part if isinstance(part, list) else [part]) for n in ast.walk(item)]
        handlers = getattr(statement, "handlers", [])
        nodes += [n for h in handlers if h.type is not None for n in ast.walk(h.type)]
    else:
        nodes = list(ast.walk(statement))
    return {n.id for n in nodes if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _binds(statement: ast.stmt) -> set[str]:
    if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return {statement.name}
    if isinstance(statement, ast.Import | ast.ImportFrom):
        return {(a.asname or a.name).split(".")[0] for a in statement.names}
    targets: list[ast.AST] = []
    if isinstance(statement, ast.Assign):
        targets = list(statement.targets)
    elif isinstance(statement, ast.AugAssign | ast.AnnAssign):
        targets = [statement.target]
    return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


def _acts_on(statement: ast.stmt) -> set[str]:
    """The objects a statement changes in place: the receiver of a method call made for its effect
    (``engine.step()``), the base of an item or attribute it assigns (``os.environ["X"] = ...``)."""
    bases: set[str] = set()
    if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call):
        bases |= _base(statement.value.func, attribute_only=True)
    targets: list[ast.AST] = []
    if isinstance(statement, ast.Assign):
        targets = list(statement.targets)
    elif isinstance(statement, ast.AugAssign | ast.AnnAssign):
        targets = [statement.target]
    for target in targets:
        for node in ast.walk(target):
            if isinstance(node, ast.Subscript | ast.Attribute) and isinstance(node.ctx, ast.Store):
                bases |= _base(node.value, attribute_only=False)
    return bases


def _base(node: ast.AST, *, attribute_only: bool) -> set[str]:
    if attribute_only and not isinstance(node, ast.Attribute):
        return set()
    while isinstance(node, ast.Attribute | ast.Subscript | ast.Call):
        node = node.func if isinstance(node, ast.Call) else node.value
    return {node.id} if isinstance(node, ast.Name) else set()


def _needed(statement: ast.stmt, needed: set[str], modules: set[str]) -> bool:
    return bool((_binds(statement) | (_acts_on(statement) - modules)) & needed)


def _without(source: str, tree: ast.Module, drop: set[ast.stmt]) -> tuple[str, list[int]] | None:
    """``source`` without the lines of ``drop`` (a block left empty gets ``pass``), and the line each line of
    the result was; None when a dropped statement shares a line with another."""
    lines = source.splitlines(keepends=True)
    if any(not owns_its_lines(s, lines) for s in drop):
        return None
    gone: set[int] = set()
    passes: dict[int, str] = {}
    for block in blocks(tree):
        dropped = [s for s in block if s in drop]
        for statement in dropped:
            first = min([statement.lineno, *(d.lineno for d in getattr(statement, "decorator_list", []))])
            gone.update(range(first, (statement.end_lineno or statement.lineno) + 1))
        if dropped and len(dropped) == len(block):
            first_line = lines[block[0].lineno - 1]
            passes[block[0].lineno] = first_line[: len(first_line) - len(first_line.lstrip())] + "pass\n"
    out, origins = [], []
    for number, line in enumerate(lines, start=1):
        if number in passes:
            out.append(passes[number])
        elif number not in gone:
            out.append(line)
        else:
            continue
        origins.append(number)
    return "".join(out), origins
