"""Rewrites that deletion cannot make: a pasted script flattened, one checked step at a time.

Deleting statements stops where the script's own plumbing holds the failing lines up: the function that wraps
them is called from ``train``, which ``main`` calls; ``cfg.lr`` comes from a dataclass that ``from_args`` fills
from ``argparse``. A maintainer cutting such a script down makes changes a deletion cannot, and so does this:

- **inline** a function (or a method that does not use ``self``) called once: its parameters become assignments
  at the call and its body takes the call's place, its last ``return`` the assignment's value;
- **a command-line option's default**: ``args.lr`` becomes ``0.1`` where ``add_argument("--lr", default=0.1)``
  and the run does not pass ``--lr``;
- **a field set once**: ``cfg.lr`` becomes ``0.1`` where the only construction of the dataclass passes
  ``lr=0.1``;
- **an assignment used as its value**: ``tol = 0.02`` or ``lr = cfg.lr`` goes and its uses read the value;
- **a keyword that passes a name**, every ``device=device``, goes at once, so the name can go after it;
- **what nothing reads**: assignments to names nothing reads and option declarations whose value nothing reads
  (never one that calls the script's own function: ``history = train(...)`` trains);
- **arithmetic identities** (``x * 1.0``) and **arguments equal to the parameter's default** go.

Each rewrite is a candidate like any other, judged by real runs; none is trusted. Texts are edited where the
AST says the code is (``edits``), so the rest of the script keeps its lines, its comments and its strings. The
values put where names hold them are found in ``substitute``, the functions inlined in ``inline``; the cleanups
(what nothing reads, identities, defaults, keywords) and the order they are all tried in are here.
"""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Iterable, Iterator

from reprobisect.minimize.edits import Edit, SourceText, atomic, owns_lines, parent_map
from reprobisect.minimize.inline import inlines
from reprobisect.minimize.statements import blocks, size_of
from reprobisect.minimize.static import undefined_names
from reprobisect.minimize.substitute import argument_holders, assigned_values, field_values, option_defaults
from reprobisect.util.python_source import parse_python

__all__ = ["Rewrite", "flattened", "rewrite_named", "rewrites"]

_MAX_STEPS = 200  # rewrites composed into one flattened candidate, at most


@dataclasses.dataclass(frozen=True)
class Rewrite:
    """One rewrite of a text: what it does (the same words name the same rewrite of a later text) and the result."""

    what: str
    text: str


def rewrites(source: str, given_options: Iterable[str] = ()) -> list[Rewrite]:
    """Every single rewrite of ``source`` that compiles and leaves no name undefined that was defined, smallest
    first; ``given_options`` are the options the run passes (their defaults are not the values used)."""
    return sorted(_valid(source, frozenset(given_options)), key=lambda r: (size_of(r.text).tokens, r.what))


def rewrite_named(source: str, what: str, given_options: Iterable[str] = ()) -> Rewrite | None:
    """The rewrite of ``source`` that ``what`` names (one found on an earlier text), if it still applies; only it is
    checked."""
    return next(_valid(source, frozenset(given_options), only=what), None)


def _valid(
    source: str, given: frozenset[str], skip: frozenset[str] = frozenset(), only: str | None = None
) -> Iterator[Rewrite]:
    """The rewrites of ``source`` one by one, in ``_all_edits``' order (values before inlining), each checked as it
    comes: a caller that needs the first pays for the first. ``only``: the one of that name."""
    try:
        tree = parse_python(source)
    except SyntaxError:
        return
    before = undefined_names(source)
    if before is None:
        return
    text = SourceText(source)
    seen: set[str] = set()
    for what, edits in _all_edits(tree, text, given):
        if what in seen or what.split(" ", 1)[0] in skip or (only is not None and what != only):
            continue
        new = text.apply(edits)
        after = undefined_names(new) if new != source else None
        if after is not None and after <= before:
            seen.add(what)
            yield Rewrite(what=what, text=new)


def flattened(
    source: str, given_options: Iterable[str] = (), *, skip: Iterable[str] = ("keyword",)
) -> tuple[str, list[str]]:
    """``source`` with rewrite after rewrite applied, the first of each round (values before inlining), while any
    applies: one candidate that tries them all at once. The kinds in ``skip`` are left (by default the keywords: a
    name passed as a keyword is as often needed as not). Returns the text and what was done, in order."""
    done: list[str] = []
    seen = {source}
    given, skipped = frozenset(given_options), frozenset(skip)
    for _ in range(_MAX_STEPS):
        step = next((r for r in _valid(source, given, skipped) if r.text not in seen), None)
        if step is None:
            break
        source = step.text
        seen.add(source)
        done.append(step.what)
    return source, done


def _all_edits(tree: ast.Module, text: SourceText, given: frozenset[str]) -> Iterator[tuple[str, list[Edit]]]:
    parents = parent_map(tree)
    # values first (an option's default before the field it fills), inlining last: the order flattening takes
    yield from option_defaults(tree, text, given)
    yield from field_values(tree, text)
    yield from assigned_values(tree, text, parents)
    yield from _unread(tree, text)
    yield from _identities(tree, text)
    yield from _default_arguments(tree, text)
    yield from _name_keywords(tree, text)
    yield from inlines(tree, text, parents)


# -- the cleanups: what nothing reads, identities, defaults passed again, keywords that pass a name ---------------


def _name_keywords(tree: ast.Module, text: SourceText) -> Iterator[tuple[str, list[Edit]]]:
    """Every ``device=device`` (a keyword whose value is a variable the script assigns) of one name, gone
    together: the variable can go after it."""
    assigned = {
        t.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign)
        for t in ast.walk(node.targets[0] if isinstance(node, ast.Assign) else node.target)
        if isinstance(t, ast.Name)
    }
    by_name: dict[str, list[Edit]] = {}
    for call in ast.walk(tree):
        if not isinstance(call, ast.Call):
            continue
        parts: list[ast.AST] = sorted([*call.args, *call.keywords], key=lambda n: (n.lineno, n.col_offset))  # type: ignore[attr-defined]
        passing: dict[str, set[int]] = {}
        for part in parts:
            if isinstance(part, ast.keyword) and isinstance(part.value, ast.Name) and part.value.id in assigned:
                passing.setdefault(part.value.id, set()).add(id(part))
        for name, drop in passing.items():
            by_name.setdefault(name, []).extend(_dropped_parts(parts, drop, text))
    for name, edits in sorted(by_name.items()):
        yield f"keyword ={name}", edits


def _unread(tree: ast.Module, text: SourceText) -> Iterator[tuple[str, list[Edit]]]:
    """Every assignment to names nothing reads, and every option declaration whose value nothing reads, gone in one
    rewrite (a block they empty keeps a ``pass``): what is left of the plumbing once its values were substituted."""
    read = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    holders = argument_holders(tree)
    options = {
        n.attr
        for n in ast.walk(tree)
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id in holders
    }
    if any(isinstance(n, ast.Name) and n.id in holders and isinstance(n.ctx, ast.Load) for n in ast.walk(tree)) and any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in ("vars", "getattr")
        for n in ast.walk(tree)
    ):
        return  # vars(args) or getattr(args, name) reads options by name: none is known unread
    functions = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
    edits = []
    for block in blocks(tree):
        unread = [s for s in block if _is_unread(s, read, options) and owns_lines(s, text) and not _calls(s, functions)]
        for statement in unread:
            start, end = text.whole_lines(statement.lineno, statement.end_lineno or statement.lineno)
            emptied = len(unread) == len(block) and statement is block[0]  # a block needs one statement
            edits.append(Edit(start, end, f"{text.indent_of(statement.lineno)}pass\n" if emptied else ""))
    if not edits:
        return
    yield "unread assignments and options", edits


def _calls(statement: ast.stmt, functions: set[str]) -> bool:
    """The statement calls one of the script's own functions: what it does is more than its value
    (``history = train(...)`` trains, whoever reads ``history``)."""
    return any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Name | ast.Attribute) and _called_name(n.func) in functions
        for n in ast.walk(statement)
    )


def _called_name(func: ast.expr) -> str:
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


def _is_unread(statement: ast.stmt, read: set[str], options: set[str]) -> bool:
    if isinstance(statement, ast.Assign):
        names = [t for target in statement.targets for t in ast.walk(target) if not isinstance(t, ast.expr_context)]
        return all(isinstance(n, ast.Name | ast.Tuple | ast.List | ast.Starred) for n in names) and not any(
            isinstance(n, ast.Name) and n.id in read for n in names
        )
    if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call):
        call = statement.value
        if isinstance(call.func, ast.Attribute) and call.func.attr == "add_argument":
            flags = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            dests = {k.value.value for k in call.keywords if k.arg == "dest" and isinstance(k.value, ast.Constant)}
            dests |= {f.lstrip("-").replace("-", "_") for f in flags}
            return bool(flags) and all(f.startswith("-") for f in flags) and not (dests & options)
    return False


def _identities(tree: ast.Module, text: SourceText) -> Iterator[tuple[str, list[Edit]]]:
    """``x * 1.0``, ``1 * x``, ``x + 0``, ``x - 0``, ``x / 1`` become ``x``, all at once (outermost first where
    they nest): the arithmetic a script wrote for its reader, not for the bug."""
    edits: list[Edit] = []
    taken: list[tuple[int, int]] = []
    for node in ast.walk(tree):  # breadth first: an outer operation before the ones inside it
        if not isinstance(node, ast.BinOp):
            continue
        kept = _identity_operand(node)
        if kept is None:
            continue
        while isinstance(kept, ast.BinOp) and _identity_operand(kept) is not None:  # (x * 1) * 1
            kept = _identity_operand(kept)
        assert kept is not None
        start, end = text.span(node)
        if any(a <= start and end <= b for a, b in taken):
            continue
        taken.append((start, end))
        edits.append(Edit(start, end, atomic(text.segment(kept), kept)))
    if edits:
        yield "identities", edits


def _identity_operand(node: ast.BinOp) -> ast.expr | None:
    def is_number(operand: ast.expr, value: int) -> bool:
        return isinstance(operand, ast.Constant) and type(operand.value) in (int, float) and operand.value == value

    if isinstance(node.op, ast.Mult):
        if is_number(node.right, 1):
            return node.left
        if is_number(node.left, 1):
            return node.right
    if isinstance(node.op, ast.Add | ast.Sub) and is_number(node.right, 0):
        return node.left
    if isinstance(node.op, ast.Add) and is_number(node.left, 0):
        return node.right
    if isinstance(node.op, ast.Div | ast.Pow) and is_number(node.right, 1):
        return node.left
    return None


def _default_arguments(tree: ast.Module, text: SourceText) -> Iterator[tuple[str, list[Edit]]]:
    """Arguments that pass what the parameter's default would (``Generator(8)`` where ``latent=8``), in calls of
    the script's own functions and classes, gone at once: trailing positional ones, and keywords anywhere."""
    signatures: dict[str, tuple[list[str], dict[str, str]]] = {}
    counts: dict[str, int] = {}
    for node in tree.body:
        function = node
        if isinstance(node, ast.ClassDef):
            inits = [m for m in node.body if isinstance(m, ast.FunctionDef) and m.name == "__init__"]
            function = inits[0] if inits else None  # type: ignore[assignment]
        if isinstance(function, ast.FunctionDef) and isinstance(node, ast.FunctionDef | ast.ClassDef):
            counts[node.name] = counts.get(node.name, 0) + 1
            params = [a.arg for a in function.args.args][1 if isinstance(node, ast.ClassDef) else 0 :]
            positional = function.args.args[len(function.args.args) - len(function.args.defaults) :]
            defaults = {a.arg: text.segment(d) for a, d in zip(positional, function.args.defaults, strict=True)}
            defaults |= {
                a.arg: text.segment(d)
                for a, d in zip(function.args.kwonlyargs, function.args.kw_defaults, strict=True)
                if d
            }
            signatures[node.name] = (params, defaults)
    edits: list[Edit] = []
    for call in ast.walk(tree):
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and counts.get(call.func.id) == 1):
            continue
        params, defaults = signatures[call.func.id]
        if any(isinstance(a, ast.Starred) for a in call.args) or len(call.args) > len(params):
            continue
        parts: list[ast.AST] = sorted([*call.args, *call.keywords], key=lambda n: (n.lineno, n.col_offset))  # type: ignore[attr-defined]
        drop: set[int] = set()
        for index in range(len(call.args) - 1, -1, -1):  # trailing positionals equal to their defaults
            if defaults.get(params[index]) != text.segment(call.args[index]) or any(
                k.arg is None for k in call.keywords
            ):
                break
            drop.add(id(call.args[index]))
        drop |= {id(k) for k in call.keywords if k.arg is not None and defaults.get(k.arg) == text.segment(k.value)}
        edits += _dropped_parts(parts, drop, text)
    if edits:
        yield "default arguments", edits


def _dropped_parts(parts: list[ast.AST], drop: set[int], text: SourceText) -> list[Edit]:
    """Edits that remove the arguments of a call whose ids are in ``drop``, each run of neighbours with its commas
    at once (a run's edits would overlap otherwise)."""
    edits = []
    index = 0
    while index < len(parts):
        if id(parts[index]) not in drop:
            index += 1
            continue
        last = index
        while last + 1 < len(parts) and id(parts[last + 1]) in drop:
            last += 1
        if last + 1 < len(parts):
            edits.append(Edit(text.span(parts[index])[0], text.span(parts[last + 1])[0], ""))
        elif index > 0:
            edits.append(Edit(text.span(parts[index - 1])[1], text.span(parts[last])[1], ""))
        else:
            edits.append(Edit(text.span(parts[index])[0], text.span(parts[last])[1], ""))
        index = last + 1
    return edits
