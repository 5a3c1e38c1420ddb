"""A script as a tree of removable statements, and the text of that script with some of them left out.

The statement reducer only deletes: its candidate is the script's own lines without the lines of some statements
(a block left empty gets ``pass``), so what it leaves reads as its author wrote it (the rewrites that deletion
cannot make, an inlined function or an option's default, are ``rewrite``'s, between rounds of deletion).
Statements are the units because a statement's lines are a whole: dropping one never leaves half an expression
behind, which a line-based reducer would do on every other try. The tree (a block's statements are the
children of its compound statement) lets a reducer work level by level, as hierarchical delta debugging does:
first which top-level statements matter, then which statements inside the functions and loops that are left.

A compound statement can also be *unwrapped* (``Script.unwrap_id``): its header and its other blocks (``else``,
``except``, ``finally``) go and its body stays, one indent less. Removing it would take the failing line with it;
unwrapping keeps that line while the loop, the ``if`` or the ``with`` around it goes: ``for step, real in
enumerate(loader):`` around the one call that fails, and with it the loader and the dataset it needed.

The elements of a call, dict, list, tuple or set written one or more lines each (``lr=args.lr,`` in a call that
spans lines, one key of a config dict) are units too, children of their statement: a pasted script keeps most of
its configuration that way, and deleting such a line keeps the syntax whole, as deleting a statement does.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import io
import re
import tokenize
from collections.abc import Iterable, Iterator, Sequence

from reprobisect.util.python_source import parse_python

__all__ = ["Script", "Size", "Statement", "blocks", "owns_its_lines", "parse_script", "size_of", "string_lines", "tidy"]

_TRAILER = re.compile(r",?\s*(#.*)?")  # what may follow an element on its last line
# Compound statements whose body can stand without them (a function's or a class's cannot: it is a definition).
_UNWRAPPABLE: tuple[type[ast.stmt], ...] = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try)
if hasattr(ast, "TryStar"):  # Python 3.11: try ... except*
    _UNWRAPPABLE = (*_UNWRAPPABLE, ast.TryStar)
# The blocks of a compound statement, by the field that holds them (ExceptHandler and match_case hold their own).
_BLOCK_FIELDS = ("body", "orelse", "finalbody")


@dataclasses.dataclass(frozen=True)
class Statement:
    """One removable statement: its lines (decorators included), where it sits, and the block it belongs to."""

    id: int
    first: int  # 1-based, inclusive
    last: int
    depth: int
    parent: int | None  # the enclosing compound statement's unit; None at module level
    block: int  # index into Script.blocks
    body_first: int | None = None  # a function's first body line: its header runs when defined, its body when called
    element: bool = False  # an element of a call or a display, not a statement
    body: tuple[int, int] | None = None  # an unwrappable compound statement's body: first and last line
    dedent: int = 0  # how much deeper than its header that body is indented


@dataclasses.dataclass(frozen=True)
class Block:
    """A list of statements (a body, an else, a handler's body): when all of them go, ``pass`` takes their place
    (except an ``elif`` chain's tail, whose own lines are the whole of it)."""

    parent: int | None
    indent: str
    first_line: int
    pass_when_empty: bool


@dataclasses.dataclass(frozen=True)
class Size:
    """How big a script is: non-blank lines and Python tokens (comments and layout not counted)."""

    lines: int
    tokens: int

    def __str__(self) -> str:
        return f"{self.lines} lines, {self.tokens} tokens"


@dataclasses.dataclass(frozen=True)
class Script:
    """A parsed script: its lines and its units, in source order."""

    lines: tuple[str, ...]  # with their line endings
    units: tuple[Statement, ...]
    blocks: tuple[Block, ...]

    def level(self, depth: int, removed: Iterable[int], pinned: Iterable[int] = ()) -> list[int]:
        """The units at ``depth`` that are still there (neither removed nor inside a removed statement) and not
        ``pinned``, each followed by its unwrapping where it has one not yet made (a pinned statement can be
        unwrapped: its failing line stays): what a reducer may try to remove at this level."""
        removed = set(removed)
        gone = self.removed_with_descendants(removed)
        keep = set(pinned)
        found: list[int] = []
        for unit in self.units:
            if unit.depth != depth or unit.id in gone:
                continue
            if unit.id not in keep:
                found.append(unit.id)
            if unit.body is not None and self.unwrap_id(unit.id) not in removed:
                found.append(self.unwrap_id(unit.id))
        return found

    def unwrap_id(self, unit: int) -> int:
        """The id that, among removed ids, unwraps ``unit`` instead of removing it."""
        return len(self.units) + unit

    def unwrapped(self, removed: Iterable[int]) -> frozenset[int]:
        """The units ``removed`` unwraps (and does not remove)."""
        ids = set(removed)
        return self._unwrapped(ids, self.removed_with_descendants(ids))

    def _unwrapped(self, ids: set[int], gone: set[int]) -> frozenset[int]:
        count = len(self.units)
        return frozenset(
            i - count for i in ids if count <= i < 2 * count and self.units[i - count].body and i - count not in gone
        )

    def enclosing(self, lines: Iterable[int]) -> frozenset[int]:
        """The units that hold any of ``lines``, with every statement around them: removing one of them would
        remove that line."""
        found: set[int] = set()
        for number in lines:
            for unit in self.units:
                if unit.first <= number <= unit.last:
                    found.add(unit.id)
        return frozenset(found)

    @property
    def depth(self) -> int:
        """The deepest level (0 for a script of top-level statements only, -1 for one without statements)."""
        return max((u.depth for u in self.units), default=-1)

    def removed_with_descendants(self, removed: Iterable[int]) -> set[int]:
        """``removed`` and every statement inside one of them (an unwrapping takes nothing with it)."""
        gone = {i for i in removed if i < len(self.units)}
        for unit in self.units:  # parents come before their children
            if unit.parent is not None and unit.parent in gone:
                gone.add(unit.id)
        return gone

    def text(self, removed: Iterable[int]) -> str:
        """The script without the ``removed`` statements' lines; an emptied block gets ``pass``."""
        return self.text_with_origins(removed)[0]

    def origins(self, removed: Iterable[int]) -> list[int | None]:
        """For each line of ``text(removed)``, the original line it is (None for a ``pass`` put in)."""
        return self.text_with_origins(removed)[1]

    def text_with_origins(self, removed: Iterable[int]) -> tuple[str, list[int | None]]:
        """``text(removed)`` and ``origins(removed)`` from one pass."""
        kept = self._kept_lines(removed)
        return "".join(line for line, _ in kept), [number for _, number in kept]

    def unexecuted(self, ran: Iterable[int]) -> frozenset[int]:
        """The statements none of whose lines ran (``ran``: line numbers a traced run reported): a function counts
        as run when its body did, not its ``def`` line; elements go with their statement, never alone."""
        executed = set(ran)
        dead: set[int] = set()
        for unit in self.units:
            start = unit.body_first if unit.body_first is not None else unit.first
            if not unit.element and not any(n in executed for n in range(start, unit.last + 1)):
                dead.add(unit.id)
        return frozenset(dead)

    def starting_at(self, lines: Iterable[int]) -> frozenset[int]:
        """The statements (not elements) that start on one of ``lines``."""
        wanted = set(lines)
        return frozenset(u.id for u in self.units if not u.element and u.first in wanted)

    @functools.cached_property
    def _members(self) -> list[list[int]]:
        """Each block's units, by block index: computed once, not once per block per candidate text."""
        members: list[list[int]] = [[] for _ in self.blocks]
        for unit in self.units:
            members[unit.block].append(unit.id)
        return members

    def _kept_lines(self, removed: Iterable[int]) -> list[tuple[str, int | None]]:
        removed = set(removed)
        gone = self.removed_with_descendants(removed)
        drop = [False] * (len(self.lines) + 1)
        for unit in self.units:
            if unit.id in gone:
                for number in range(unit.first, unit.last + 1):
                    drop[number] = True
        dedent = [0] * (len(self.lines) + 1)
        cut = [False] * (len(self.lines) + 1)  # an unwrapped statement's header and other blocks
        for unit in (self.units[i] for i in self._unwrapped(removed, gone)):
            first, last = unit.body or (unit.first, unit.last)
            for number in (*range(unit.first, first), *range(last + 1, unit.last + 1)):
                drop[number] = cut[number] = True
            for number in range(first, last + 1):
                dedent[number] += unit.dedent
        passes: dict[int, str] = {}
        for index, block in enumerate(self.blocks):
            members = self._members[index]
            empty = members and all(u in gone for u in members)
            if block.pass_when_empty and block.parent not in gone and empty and not cut[block.first_line]:
                indent = block.indent[: max(0, len(block.indent) - dedent[block.first_line])]
                passes[block.first_line] = f"{indent}pass\n"
        out: list[tuple[str, int | None]] = []
        for number, line in enumerate(self.lines, start=1):
            if number in passes:
                out.append((passes[number], None))
            if not drop[number]:
                out.append((_dedented(line, dedent[number]), number))
        return out


def _dedented(line: str, by: int) -> str:
    """``line`` less ``by`` columns of indent; a line with less (inside a string) or a blank one stays as it is."""
    if by <= 0 or not line.strip() or line[:by].strip():
        return line
    return line[by:]


def parse_script(source: str) -> Script:
    """The statement tree of ``source`` (SyntaxError if it does not parse)."""
    tree = parse_python(source)
    lines = tuple(source.splitlines(keepends=True))
    builder = _Builder(lines)
    builder.add_block(tree.body, parent=None, depth=0, pass_when_empty=False)
    return Script(lines=lines, units=tuple(builder.units), blocks=tuple(builder.blocks))


class _Builder:
    def __init__(self, lines: Sequence[str]) -> None:
        self.lines = lines
        self.units: list[Statement] = []
        self.blocks: list[Block] = []

    def add_block(self, statements: list[ast.stmt], *, parent: int | None, depth: int, pass_when_empty: bool) -> None:
        if not statements:
            return
        first_line = _first_line(statements[0])
        indent = _indent(self.lines[first_line - 1])
        if parent is not None and first_line <= self.units[parent].first:
            return  # the block shares its header's line (``if x: y``): the compound statement is one unit
        index = len(self.blocks)
        self.blocks.append(Block(parent=parent, indent=indent, first_line=first_line, pass_when_empty=pass_when_empty))
        for group in _line_groups(statements):
            unit = Statement(
                id=len(self.units),
                first=_first_line(group[0]),
                last=max(_last_line(s) for s in group),
                depth=depth,
                parent=parent,
                block=index,
            )
            if len(group) == 1 and isinstance(group[0], ast.FunctionDef | ast.AsyncFunctionDef):
                unit = dataclasses.replace(unit, body_first=_first_line(group[0].body[0]))
            if len(group) == 1 and isinstance(group[0], _UNWRAPPABLE):
                unit = self.unwrappable(unit, group[0])
            self.units.append(unit)
            if len(group) == 1:
                self.add_children(group[0], unit.id, depth + 1)
                if not any(isinstance(getattr(group[0], f, None), list) for f in ("body", "handlers", "cases")):
                    self.add_elements(group[0], unit.id, depth + 1)

    def unwrappable(self, unit: Statement, statement: ast.stmt) -> Statement:
        """``unit`` with its body's lines and indent, when its body starts on a line of its own."""
        body: list[ast.stmt] = getattr(statement, "body", [])
        first = _first_line(body[0])
        if first <= unit.first:
            return unit
        deeper = len(_indent(self.lines[first - 1])) - len(_indent(self.lines[unit.first - 1]))
        if deeper <= 0:
            return unit
        return dataclasses.replace(unit, body=(first, max(_last_line(s) for s in body)), dedent=deeper)

    def add_elements(self, node: ast.AST, parent: int, depth: int) -> None:
        """The line-owning elements of the collections inside a simple statement, as units under ``parent``; an
        element's own collections go under the element."""
        self.add_elements_of(ast.iter_child_nodes(node), parent, depth)

    def add_elements_of(self, children: Iterable[ast.AST], parent: int, depth: int) -> None:
        for child in children:
            if isinstance(child, ast.JoinedStr):
                continue  # an f-string's inner expressions are text
            elements = _elements(child)
            owned = _owned_elements(child, elements, self.lines)
            if not owned:
                self.add_elements_of(ast.iter_child_nodes(child), parent, depth)
                continue
            first_line = elements[min(owned)].first
            indent = _indent(self.lines[first_line - 1])
            self.blocks.append(Block(parent=parent, indent=indent, first_line=first_line, pass_when_empty=False))
            block = len(self.blocks) - 1
            for index, element in enumerate(elements):
                holder = parent
                if index in owned:
                    unit = Statement(
                        id=len(self.units),
                        first=element.first,
                        last=element.last,
                        depth=depth,
                        parent=parent,
                        block=block,
                        element=True,
                    )
                    self.units.append(unit)
                    holder = unit.id
                self.add_elements_of(element.children, holder, depth + 1 if index in owned else depth)

    def add_children(self, statement: ast.stmt, unit: int, depth: int) -> None:
        for field in _BLOCK_FIELDS:
            block = getattr(statement, field, None)
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                elif_chain = field == "orelse" and self.lines[_first_line(block[0]) - 1].lstrip().startswith("elif")
                self.add_block(block, parent=unit, depth=depth, pass_when_empty=not elif_chain)
        for holder in (*getattr(statement, "handlers", ()), *getattr(statement, "cases", ())):
            self.add_block(holder.body, parent=unit, depth=depth, pass_when_empty=True)


@dataclasses.dataclass(frozen=True)
class _Element:
    """One element of a call or a display: its lines and columns, and the nodes inside it that may hold collections
    of their own (a dict entry's key and value; another element's child nodes)."""

    first: int
    last: int
    start_col: int  # on the first line
    end_col: int  # on the last line
    children: tuple[ast.AST, ...]


def _element(*nodes: ast.AST) -> _Element:
    """One node (an argument, a keyword, an item), or a dict entry's key and value."""
    head, tail = nodes[0], nodes[-1]
    return _Element(
        first=int(getattr(head, "lineno", 0)),
        last=int(getattr(tail, "end_lineno", None) or getattr(tail, "lineno", None) or 0),
        start_col=int(getattr(head, "col_offset", 0)),
        end_col=int(getattr(tail, "end_col_offset", None) or 0),
        children=nodes if len(nodes) > 1 else tuple(ast.iter_child_nodes(head)),
    )


def _elements(node: ast.AST) -> list[_Element]:
    """The elements of a call (its arguments and keywords, in source order) or of a display in a load context; none
    for anything else (a subscript's tuple and an assignment's targets are not lists of removable things)."""
    if isinstance(node, ast.Call):
        found = [_element(n) for n in (*node.args, *node.keywords)]
        return sorted(found, key=lambda e: (e.first, e.start_col))
    if isinstance(node, ast.Dict):  # a ``**x`` entry has no key: its ``**`` is allowed before it (_owned_elements)
        return [_element(k, v) if k is not None else _element(v) for k, v in zip(node.keys, node.values, strict=True)]
    if isinstance(node, ast.List | ast.Tuple | ast.Set) and isinstance(getattr(node, "ctx", ast.Load()), ast.Load):
        return [_element(n) for n in node.elts]
    return []


def _owned_elements(node: ast.AST, elements: list[_Element], lines: Sequence[str]) -> set[int]:
    """The indices of the ``elements`` of ``node`` that own the lines they stand on: nothing but the element before
    it on its first line (``**`` at most) and nothing but a comma or a comment after it on its last, no line shared
    with another element or a bracket."""
    owned: set[int] = set()
    opening, closing = int(getattr(node, "lineno", 0)), int(getattr(node, "end_lineno", None) or 0)
    if not elements or opening == closing:
        return owned
    for index, element in enumerate(elements):
        before = lines[element.first - 1][: element.start_col].strip()
        after = lines[element.last - 1][element.end_col :].strip()
        if before not in ("", "**") or not _TRAILER.fullmatch(after):
            continue
        if element.first <= opening or element.last >= closing:
            continue  # on the line of the opening or the closing bracket
        neighbours = elements[index - 1 : index] + elements[index + 1 : index + 2]
        if any(n.first <= element.last and element.first <= n.last for n in neighbours if n is not element):
            continue
        owned.add(index)
    return owned


def _first_line(statement: ast.stmt) -> int:
    decorators: list[ast.expr] = getattr(statement, "decorator_list", [])
    return min([statement.lineno, *(d.lineno for d in decorators)])


def _last_line(statement: ast.stmt) -> int:
    end: int | None = statement.end_lineno
    return end if end is not None else statement.lineno


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" \t"))]


def _line_groups(statements: list[ast.stmt]) -> list[list[ast.stmt]]:
    """Statements that share a line (``a = 1; b = 2``) go together: their lines cannot be parted."""
    groups: list[list[ast.stmt]] = []
    for statement in statements:
        if groups and _first_line(statement) <= max(_last_line(s) for s in groups[-1]):
            groups[-1].append(statement)
        else:
            groups.append([statement])
    return groups


def blocks(tree: ast.AST) -> Iterator[list[ast.stmt]]:
    """Every list of statements in ``tree``: a module's, a body, an ``else``, a ``finally``, a handler's body."""
    for node in ast.walk(tree):
        for field in _BLOCK_FIELDS:
            block = getattr(node, field, None)
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                yield block


def owns_its_lines(statement: ast.stmt, lines: Sequence[str]) -> bool:
    """The statement has its lines to itself (no ``a = 1; b = 2`` neighbour, no ``if x: y`` header on its line), so
    removing or moving those lines touches it alone. ``lines``: the source's lines, as the AST numbers them."""
    head = lines[statement.lineno - 1].encode("utf-8")[: statement.col_offset].decode("utf-8", errors="replace")
    last = lines[(statement.end_lineno or statement.lineno) - 1]
    tail = last.encode("utf-8")[statement.end_col_offset or 0 :].decode("utf-8", errors="replace").strip()
    return not head.strip() and (not tail or tail.startswith("#"))


def string_lines(source: str) -> frozenset[int]:
    """Lines that continue a string started on an earlier line: moving or re-indenting them would change the
    string (empty when the source does not tokenize)."""
    found: set[int] = set()
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type == tokenize.STRING or token.type == getattr(tokenize, "FSTRING_MIDDLE", -1):
                found.update(range(token.start[0] + 1, token.end[0] + 1))
    except (tokenize.TokenError, SyntaxError, UnicodeDecodeError):  # 3.13 raises the last on some text
        pass
    return frozenset(found)


def size_of(source: str) -> Size:
    """Non-blank lines and Python tokens of ``source`` (comments, newlines and indentation are not tokens here);
    a source that does not tokenize counts its whitespace-separated words."""
    lines = sum(1 for line in source.splitlines() if line.strip())
    layout = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER}
    try:
        tokens = sum(1 for t in tokenize.generate_tokens(io.StringIO(source).readline) if t.type not in layout)
    except (tokenize.TokenError, SyntaxError, UnicodeDecodeError):  # 3.13 raises the last on some text
        tokens = len(source.split())
    return Size(lines=lines, tokens=tokens)


def tidy(source: str) -> str:
    """``source`` without its comment-only lines and with runs of blank lines cut to one: what is left after
    statements went is code, not the notes that stood beside it. Lines inside a string are never touched, and the
    first line stays when it is a ``#!`` line or a coding declaration. A source that does not tokenize is returned
    as it is."""
    lines = source.splitlines(keepends=True)
    comment_only: set[int] = set()
    in_string: set[int] = set()
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            (row, col), (end_row, _) = token.start, token.end
            if token.type == tokenize.COMMENT and not lines[row - 1][:col].strip():
                comment_only.add(row)
            elif token.type == tokenize.STRING or token.type == getattr(tokenize, "FSTRING_MIDDLE", -1):
                in_string.update(range(row + 1, end_row + 1))
    except (tokenize.TokenError, SyntaxError, UnicodeDecodeError):  # 3.13 raises the last on some text
        return source
    out: list[str] = []
    for number, line in enumerate(lines, start=1):
        if number in in_string:
            out.append(line)
            continue
        stripped = line.strip()
        if number in comment_only and not (number == 1 and stripped.startswith(("#!", "# -*-"))):
            continue
        if not stripped and (not out or not out[-1].strip()):
            continue
        out.append(line)
    while out and not out[-1].strip():
        out.pop()
    return "".join(out)
