"""Rewrites that put a value where a name holds it: a command-line option's default (``args.lr`` → ``0.1``),
a field set once (``cfg.lr`` → ``0.1``), an assignment used as its value (``tol = 0.02``). Each is a candidate
(``rewrite``), judged by real runs.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Callable, Iterator

from reprobisect.minimize.edits import Edit, SourceText, atomic, is_chain, is_constant, is_literal, owns_lines

__all__ = ["argument_holders", "assigned_values", "field_values", "option_defaults"]


def option_defaults(tree: ast.Module, text: SourceText, given: frozenset[str]) -> Iterator[tuple[str, list[Edit]]]:
    """``args.lr`` → ``0.1``: every read of an option's destination on the names the parsed arguments go to."""
    holders = argument_holders(tree)
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
            value = text.segment(default) if is_literal(default) else None
            value = atomic(value, default) if value is not None else None
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
            yield f"option {dest}", [Edit(*text.span(n), value) for n in reads]


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


def argument_holders(tree: ast.Module) -> frozenset[str]:
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


def field_values(tree: ast.Module, text: SourceText) -> Iterator[tuple[str, list[Edit]]]:
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
            if field in stored or not is_literal(value):
                continue
            assert value is not None
            reads = _attribute_reads(tree, field, functools.partial(_on_instance, holders, cls))
            if reads:
                yield (
                    f"field {name}.{field}",
                    [Edit(*text.span(n), atomic(text.segment(value), value)) for n in reads],
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


def assigned_values(
    tree: ast.Module, text: SourceText, parents: dict[ast.AST, ast.AST]
) -> Iterator[tuple[str, list[Edit]]]:
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
            and (is_constant(node.value) or is_chain(node.value))
            and owns_lines(node, text)
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
        value = atomic(text.segment(node.value), node.value)
        owner = getattr(scope, "name", "")
        yield (
            f"value {owner + '.' if owner else ''}{name}",
            [
                Edit(*text.whole_lines(node.lineno, node.end_lineno or node.lineno), ""),
                *(Edit(*text.span(r), value) for r in reads),
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
