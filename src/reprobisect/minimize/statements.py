"""A script as a tree of removable statements, and the text of that script with some of them left out.

Minimization only deletes: a candidate is the original's own lines without the lines of some statements (a block
left empty gets ``pass``), so the result reads as its author wrote it and its diff against the original is
deletions. Statements are the units because a statement's lines are a whole: dropping one never leaves half an
expression behind, which a line-based reducer would do on every other try. The tree (a block's statements are the
children of its compound statement) lets a reducer work level by level, as hierarchical delta debugging does:
first which top-level statements matter, then which statements inside the functions and loops that are left.
"""

from __future__ import annotations

import ast
import dataclasses
import io
import tokenize
from collections.abc import Iterable, Sequence

__all__ = ["Script", "Size", "Unit", "parse_script", "size_of", "tidy"]

# The blocks of a compound statement, by the field that holds them (ExceptHandler and match_case hold their own).
_BLOCK_FIELDS = ("body", "orelse", "finalbody")


@dataclasses.dataclass(frozen=True)
class Unit:
    """One removable statement: its lines (decorators included), where it sits, and the block it belongs to."""

    id: int
    first: int  # 1-based, inclusive
    last: int
    depth: int
    parent: int | None  # the enclosing compound statement's unit; None at module level
    block: int  # index into Script.blocks


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
    units: tuple[Unit, ...]
    blocks: tuple[Block, ...]

    def level(self, depth: int, removed: Iterable[int], pinned: Iterable[int] = ()) -> list[int]:
        """The units at ``depth`` that are still there (neither removed nor inside a removed statement) and not
        ``pinned``: what a reducer may try to remove at this level."""
        gone = self.removed_with_descendants(removed)
        keep = set(pinned)
        return [u.id for u in self.units if u.depth == depth and u.id not in gone and u.id not in keep]

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
        """``removed`` and every statement inside one of them."""
        gone = set(removed)
        for unit in self.units:  # parents come before their children
            if unit.parent is not None and unit.parent in gone:
                gone.add(unit.id)
        return gone

    def text(self, removed: Iterable[int]) -> str:
        """The script without the ``removed`` statements' lines; an emptied block gets ``pass``."""
        gone = self.removed_with_descendants(removed)
        drop = [False] * (len(self.lines) + 1)
        for unit in self.units:
            if unit.id in gone:
                for number in range(unit.first, unit.last + 1):
                    drop[number] = True
        passes: dict[int, str] = {}
        for index, block in enumerate(self.blocks):
            members = [u for u in self.units if u.block == index]
            if block.pass_when_empty and block.parent not in gone and members and all(u.id in gone for u in members):
                passes[block.first_line] = f"{block.indent}pass\n"
        out: list[str] = []
        for number, line in enumerate(self.lines, start=1):
            if number in passes:
                out.append(passes[number])
            if not drop[number]:
                out.append(line)
        return "".join(out)


def parse_script(source: str) -> Script:
    """The statement tree of ``source`` (SyntaxError if it does not parse)."""
    tree = ast.parse(source)
    lines = tuple(source.splitlines(keepends=True))
    builder = _Builder(lines)
    builder.add_block(tree.body, parent=None, depth=0, pass_when_empty=False)
    return Script(lines=lines, units=tuple(builder.units), blocks=tuple(builder.blocks))


class _Builder:
    def __init__(self, lines: Sequence[str]) -> None:
        self.lines = lines
        self.units: list[Unit] = []
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
            unit = Unit(
                id=len(self.units),
                first=_first_line(group[0]),
                last=max(_last_line(s) for s in group),
                depth=depth,
                parent=parent,
                block=index,
            )
            self.units.append(unit)
            if len(group) == 1:
                self.add_children(group[0], unit.id, depth + 1)

    def add_children(self, statement: ast.stmt, unit: int, depth: int) -> None:
        for field in _BLOCK_FIELDS:
            block = getattr(statement, field, None)
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                elif_chain = field == "orelse" and self.lines[_first_line(block[0]) - 1].lstrip().startswith("elif")
                self.add_block(block, parent=unit, depth=depth, pass_when_empty=not elif_chain)
        for holder in (*getattr(statement, "handlers", ()), *getattr(statement, "cases", ())):
            self.add_block(holder.body, parent=unit, depth=depth, pass_when_empty=True)


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


def size_of(source: str) -> Size:
    """Non-blank lines and Python tokens of ``source`` (comments, newlines and indentation are not tokens here);
    a source that does not tokenize counts its whitespace-separated words."""
    lines = sum(1 for line in source.splitlines() if line.strip())
    layout = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER}
    try:
        tokens = sum(1 for t in tokenize.generate_tokens(io.StringIO(source).readline) if t.type not in layout)
    except (tokenize.TokenError, SyntaxError):
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
    except (tokenize.TokenError, SyntaxError):
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
