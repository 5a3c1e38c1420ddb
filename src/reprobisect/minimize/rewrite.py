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
AST says the code is, so the rest of the script keeps its lines, its comments and its strings.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
from collections.abc import Callable, Iterable, Iterator

from reprobisect.minimize.statements import blocks, owns_its_lines, size_of, string_lines
from reprobisect.minimize.static import undefined_names

__all__ = ["Rewrite", "flattened", "rewrite_named", "rewrites"]

_MAX_STEPS = 200  # rewrites composed into one flattened candidate, at most


@dataclasses.dataclass(frozen=True)
class Rewrite:
    """One rewrite of a text: what it does (the same words name the same rewrite of a later text) and the result."""

    what: str
    text: str


@dataclasses.dataclass(frozen=True)
class _Edit:
    start: int  # character offsets into the source
    end: int
    new: str


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
        tree = ast.parse(source)
    except SyntaxError:
        return
    before = undefined_names(source)
    if before is None:
        return
    text = _Source(source)
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


class _Source:
    """A source text addressed the way the AST addresses it: 1-based lines, columns in UTF-8 bytes."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.lines = source.splitlines(keepends=True)
        self.starts = [0]
        for line in self.lines:
            self.starts.append(self.starts[-1] + len(line))
        self.in_string = string_lines(source)

    def offset(self, line: int, col: int) -> int:
        text = self.lines[line - 1] if line - 1 < len(self.lines) else ""
        return self.starts[line - 1] + len(text.encode("utf-8")[:col].decode("utf-8", errors="replace"))

    def span(self, node: ast.AST) -> tuple[int, int]:
        return (
            self.offset(node.lineno, node.col_offset),  # type: ignore[attr-defined]
            self.offset(node.end_lineno, node.end_col_offset),  # type: ignore[attr-defined]
        )

    def segment(self, node: ast.AST) -> str:
        start, end = self.span(node)
        return self.source[start:end]

    def whole_lines(self, first: int, last: int) -> tuple[int, int]:
        return self.starts[first - 1], self.starts[last]

    def indent_of(self, line: int) -> str:
        text = self.lines[line - 1]
        return text[: len(text) - len(text.lstrip())]

    def apply(self, edits: Iterable[_Edit]) -> str:
        out, at = [], 0
        for edit in sorted(edits, key=lambda e: (e.start, e.end)):
            if edit.start < at:
                return self.source  # overlapping edits: no rewrite
            out += [self.source[at : edit.start], edit.new]
            at = edit.end
        return "".join([*out, self.source[at:]])


def _all_edits(tree: ast.Module, text: _Source, given: frozenset[str]) -> Iterator[tuple[str, list[_Edit]]]:
    parents = _parents(tree)
    # values first (an option's default before the field it fills), inlining last: the order flattening takes
    yield from _option_defaults(tree, text, given)
    yield from _field_values(tree, text)
    yield from _assigned_values(tree, text, parents)
    yield from _unread(tree, text)
    yield from _identities(tree, text)
    yield from _default_arguments(tree, text)
    yield from _name_keywords(tree, text)
    yield from _inlines(tree, text, parents)


# -- values -----------------------------------------------------------------------------------------------------


def _literal(node: ast.AST | None) -> bool:
    if node is None:
        return False
    try:
        ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False
    return True


def _atomic(text: str, node: ast.AST) -> str:
    """``text`` as it can stand in any expression: parenthesized unless it is a name, a constant or a display."""
    if isinstance(node, ast.Name | ast.Attribute | ast.Dict | ast.List | ast.Tuple | ast.Set | ast.Call):
        return text if "\n" not in text or not isinstance(node, ast.Name | ast.Attribute) else f"({text})"
    if isinstance(node, ast.Constant) and not (isinstance(node.value, int | float | complex) and text.startswith("-")):
        return text
    return f"({text})"


def _option_defaults(tree: ast.Module, text: _Source, given: frozenset[str]) -> Iterator[tuple[str, list[_Edit]]]:
    """``args.lr`` → ``0.1``: every read of an option's destination on the names the parsed arguments go to."""
    holders = _argument_holders(tree)
    if not holders:
        return
    options: dict[str, str | None] = {}
    for call in ast.walk(tree):
        if not (
            isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "add_argument"
        ):
            continue
        flags = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        long = next((f for f in flags if f.startswith("--")), None)
        keywords = {k.arg: k.value for k in call.keywords if k.arg}
        dest_node = keywords.get("dest")
        dest = dest_node.value if isinstance(dest_node, ast.Constant) and isinstance(dest_node.value, str) else None
        if dest is None and long is not None:
            dest = long[2:].replace("-", "_")
        if dest is None or any(f in given for f in flags) or any(g.startswith(f + "=") for f in flags for g in given):
            continue
        action = keywords.get("action")
        action_name = action.value if isinstance(action, ast.Constant) else None
        default = keywords.get("default")
        if default is not None:
            value = text.segment(default) if _literal(default) else None
            value = _atomic(value, default) if value is not None else None
        elif action_name in ("store_true", "store_false"):
            value = "False" if action_name == "store_true" else "True"
        else:
            value = "None"
        options[dest] = value if dest not in options else None  # twice defined: no rewrite
    for dest, value in sorted(options.items()):
        if value is None:
            continue
        reads = _attribute_reads(tree, dest, lambda owner, node: owner in holders)
        if reads:
            yield f"option {dest}", [_Edit(*text.span(n), value) for n in reads]


def _attribute_reads(tree: ast.Module, attr: str, on: Callable[[str, ast.AST], bool]) -> list[ast.Attribute]:
    """Every read of ``NAME.attr`` where ``on(NAME, node)`` says the name holds what ``attr`` belongs to."""
    return [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Attribute)
        and n.attr == attr
        and isinstance(n.ctx, ast.Load)
        and isinstance(n.value, ast.Name)
        and on(n.value.id, n)
    ]


def _argument_holders(tree: ast.Module) -> frozenset[str]:
    """Names the parsed command line is bound to: ``args = parse_args(argv)``, ``args = parser.parse_args()``, and
    the parameters of the same name that it is passed on as."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            func = node.value.func
            called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if called.endswith(("parse_args", "parse_known_args")):
                names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return frozenset(names)


def _field_values(tree: ast.Module, text: _Source) -> Iterator[tuple[str, list[_Edit]]]:
    """``cfg.lr`` → ``0.1``: the fields of a dataclass built in one place only, with a literal there, read on the
    names an instance is bound to (``cfg = TrainConfig.from_args(args)``, a parameter of that name, ``self``)."""
    classes = {
        node.name: node
        for node in tree.body
        if isinstance(node, ast.ClassDef) and any("dataclass" in ast.unparse(d) for d in node.decorator_list)
    }
    stored = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store)}
    for name, cls in sorted(classes.items()):
        fields = [s.target.id for s in cls.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)]
        builds = [c for c in ast.walk(tree) if isinstance(c, ast.Call) and _builds(c, name, cls)]
        if len(builds) != 1:
            continue
        build = builds[0]
        given = dict(zip(fields, build.args, strict=False)) | {k.arg: k.value for k in build.keywords if k.arg}
        holders = _instance_names(tree, name)
        for field in fields:
            value = given.get(field)
            if field in stored or not _literal(value):
                continue
            assert value is not None
            reads = _attribute_reads(tree, field, functools.partial(_on_instance, holders, cls))
            if reads:
                yield (
                    f"field {name}.{field}",
                    [_Edit(*text.span(n), _atomic(text.segment(value), value)) for n in reads],
                )


def _instance_names(tree: ast.Module, name: str) -> frozenset[str]:
    """Names bound to ``name(...)`` or ``name.something(...)`` (a classmethod that builds one)."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            func = node.value.func
            while isinstance(func, ast.Attribute):
                func = func.value
            if isinstance(func, ast.Name) and func.id == name:
                found.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return frozenset(found)


def _on_instance(holders: frozenset[str], cls: ast.ClassDef, owner: str, node: ast.AST) -> bool:
    """``owner.field`` reads an instance: a name bound to one, or ``self`` inside the class."""
    return owner in holders or (owner == "self" and _inside_class(node, cls))


def _inside_class(node: ast.AST, cls: ast.ClassDef) -> bool:
    return any(child is node for child in ast.walk(cls))


def _builds(call: ast.Call, name: str, cls: ast.ClassDef) -> bool:
    func = call.func
    if isinstance(func, ast.Name) and func.id == name:
        return True
    return isinstance(func, ast.Name) and func.id == "cls" and any(call in set(ast.walk(m)) for m in cls.body)


def _assigned_values(
    tree: ast.Module, text: _Source, parents: dict[ast.AST, ast.AST]
) -> Iterator[tuple[str, list[_Edit]]]:
    """``tol = 0.02`` or ``lr = cfg.lr`` (a name bound once in its scope, to a constant, a name or an attribute of
    one) goes, and each read of that name in that scope (and in the functions inside it that do not bind it) reads
    the value. A parameter of the same name elsewhere is another variable."""
    scopes = _Scopes(tree, parents)
    declared = {name for n in ast.walk(tree) if isinstance(n, ast.Global | ast.Nonlocal) for name in n.names}
    for node in ast.walk(tree):
        if not (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id not in declared
            and (_constant(node.value) or _chain(node.value))
            and _own_lines(node, text)
        ):
            continue
        name, scope = node.targets[0].id, scopes.of(node)
        if scopes.binding_count(scope, name) != 1:
            continue
        reads = [
            n
            for n in ast.walk(tree)
            if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load) and scopes.resolve(n) is scope
        ]
        if not reads or (isinstance(node.value, ast.Name) and node.value.id == name):
            continue
        value = _atomic(text.segment(node.value), node.value)
        owner = getattr(scope, "name", "")
        yield (
            f"value {owner + '.' if owner else ''}{name}",
            [
                _Edit(*text.whole_lines(node.lineno, node.end_lineno or node.lineno), ""),
                *(_Edit(*text.span(r), value) for r in reads),
            ],
        )


_SCOPES: tuple[type[ast.AST], ...] = (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
_SCOPES = (*_SCOPES, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


class _Scopes:
    """Which scope binds a name where it is read (Python's rules, less ``global``/``nonlocal``, which the callers
    leave alone): the function, lambda, comprehension, class body or module around it."""

    def __init__(self, tree: ast.Module, parents: dict[ast.AST, ast.AST]) -> None:
        self.parents = parents
        self.bound: dict[int, dict[str, int]] = {}
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
                names = [node.id]
            elif isinstance(node, ast.arg):
                names = [node.arg]
            elif isinstance(node, ast.alias):
                names = [(node.asname or node.name).split(".")[0]]
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.ExceptHandler):
                names = [node.name] if node.name else []
            if not names:
                continue
            # a definition's name and a parameter belong to the scope around the definition / to the function
            scope = self.of(node) if not isinstance(node, ast.arg) else self._function_of(node)
            counts = self.bound.setdefault(id(scope), {})
            for name in names:
                counts[name] = counts.get(name, 0) + 1

    def of(self, node: ast.AST) -> ast.AST:
        """The scope a statement or expression is evaluated in."""
        while node in self.parents:
            node = self.parents[node]
            if isinstance(node, _SCOPES):
                return node
        return node

    def _function_of(self, arg: ast.arg) -> ast.AST:
        node: ast.AST = arg
        while node in self.parents and not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            node = self.parents[node]
        return node

    def binding_count(self, scope: ast.AST, name: str) -> int:
        return self.bound.get(id(scope), {}).get(name, 0)

    def resolve(self, load: ast.Name) -> ast.AST | None:
        """The scope whose binding of ``load.id`` this read sees (None: a builtin or undefined)."""
        scope = self.of(load)
        first = True
        while True:
            skip = isinstance(scope, ast.ClassDef) and not first  # a method does not see its class's names
            if not skip and self.binding_count(scope, load.id):
                return scope
            if scope not in self.parents:
                return None
            scope, first = self.of(scope), False


def _constant(node: ast.AST) -> bool:
    """A number, string, bytes, bool or None, or a tuple of them: one value however often it is read (a list or a
    dict display is a new object at each read)."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        node = node.operand
    if isinstance(node, ast.Tuple):
        return all(_constant(e) for e in node.elts)
    return isinstance(node, ast.Constant)


def _chain(node: ast.AST) -> bool:
    """A name, or an attribute of one (``cfg.lr``): no call, nothing evaluated twice that could differ."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name)


def _own_lines(statement: ast.stmt, text: _Source) -> bool:
    return owns_its_lines(statement, text.lines)


def _name_keywords(tree: ast.Module, text: _Source) -> Iterator[tuple[str, list[_Edit]]]:
    """Every ``device=device`` (a keyword whose value is a variable the script assigns) of one name, gone
    together: the variable can go after it."""
    assigned = {
        t.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign)
        for t in ast.walk(node.targets[0] if isinstance(node, ast.Assign) else node.target)
        if isinstance(t, ast.Name)
    }
    by_name: dict[str, list[_Edit]] = {}
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


def _unread(tree: ast.Module, text: _Source) -> Iterator[tuple[str, list[_Edit]]]:
    """Every assignment to names nothing reads, and every option declaration whose value nothing reads, gone in one
    rewrite (a block they empty keeps a ``pass``): what is left of the plumbing once its values were substituted."""
    read = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    holders = _argument_holders(tree)
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
        unread = [s for s in block if _is_unread(s, read, options) and _own_lines(s, text) and not _calls(s, functions)]
        for statement in unread:
            start, end = text.whole_lines(statement.lineno, statement.end_lineno or statement.lineno)
            emptied = len(unread) == len(block) and statement is block[0]  # a block needs one statement
            edits.append(_Edit(start, end, f"{text.indent_of(statement.lineno)}pass\n" if emptied else ""))
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


def _identities(tree: ast.Module, text: _Source) -> Iterator[tuple[str, list[_Edit]]]:
    """``x * 1.0``, ``1 * x``, ``x + 0``, ``x - 0``, ``x / 1`` become ``x``, all at once (outermost first where
    they nest): the arithmetic a script wrote for its reader, not for the bug."""
    edits: list[_Edit] = []
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
        edits.append(_Edit(start, end, _atomic(text.segment(kept), kept)))
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


def _default_arguments(tree: ast.Module, text: _Source) -> Iterator[tuple[str, list[_Edit]]]:
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
    edits: list[_Edit] = []
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


def _dropped_parts(parts: list[ast.AST], drop: set[int], text: _Source) -> list[_Edit]:
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
            edits.append(_Edit(text.span(parts[index])[0], text.span(parts[last + 1])[0], ""))
        elif index > 0:
            edits.append(_Edit(text.span(parts[index - 1])[1], text.span(parts[last])[1], ""))
        else:
            edits.append(_Edit(text.span(parts[index])[0], text.span(parts[last])[1], ""))
        index = last + 1
    return edits


# -- inlining ---------------------------------------------------------------------------------------------------


def _parents(tree: ast.AST) -> dict[ast.AST, ast.AST]:
    return {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def _inlines(tree: ast.Module, text: _Source, parents: dict[ast.AST, ast.AST]) -> Iterator[tuple[str, list[_Edit]]]:
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
    text: _Source,
    parents: dict[ast.AST, ast.AST],
) -> list[_Edit] | None:
    statement = parents.get(call)
    if isinstance(statement, ast.Expr):
        target = None
    elif isinstance(statement, ast.Assign) and len(statement.targets) == 1 and statement.value is call:
        target = text.segment(statement.targets[0])
    else:
        return None
    if not _own_lines(statement, text) or _inside(call, function, parents):
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
    if body:
        first = min([body[0].lineno, *(d.lineno for d in getattr(body[0], "decorator_list", []))])
        inner = text.indent_of(first)
        for number in range(first, (body[-1].end_lineno or body[-1].lineno) + 1):
            line = text.lines[number - 1]
            if number in text.in_string or not line.strip():
                lines.append(line if line.endswith("\n") else line + "\n")
            else:
                lines.append(indent + (line[len(inner) :] if line.startswith(inner) else line.lstrip()))
    if ending is not None:
        lines += [f"{indent}{part}\n" if i == 0 else f"{part}\n" for i, part in enumerate(ending.split("\n"))]
    if not lines:
        lines = [f"{indent}pass\n"]
    edits = [_Edit(*text.whole_lines(statement.lineno, statement.end_lineno or statement.lineno), "".join(lines))]
    first_def = min([function.lineno, *(d.lineno for d in function.decorator_list)])
    siblings = owner.body if owner is not None else []
    if owner is None or len(siblings) > 1:
        edits.append(_Edit(*text.whole_lines(first_def, function.end_lineno or function.lineno), ""))
    return edits


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
    function: ast.FunctionDef, owner: ast.ClassDef | None, call: ast.Call, text: _Source
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
