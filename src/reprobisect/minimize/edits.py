"""Edits to a source text where the AST says the code is: what every rewrite (``rewrite``, ``substitute``,
``inline``) is made of, so that the rest of the script keeps its lines, its comments and its strings.
"""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Iterable

from reprobisect.minimize.statements import owns_its_lines, string_lines

__all__ = ["Edit", "SourceText", "atomic", "is_chain", "is_constant", "is_literal", "owns_lines", "parent_map"]


@dataclasses.dataclass(frozen=True)
class Edit:
    """One replacement of ``source[start:end]`` by ``new``; a rewrite is a list of them, none overlapping."""

    start: int  # character offsets into the source
    end: int
    new: str


class SourceText:
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

    def apply(self, edits: Iterable[Edit]) -> str:
        out, at = [], 0
        for edit in sorted(edits, key=lambda e: (e.start, e.end)):
            if edit.start < at:
                return self.source  # overlapping edits: no rewrite
            out += [self.source[at : edit.start], edit.new]
            at = edit.end
        return "".join([*out, self.source[at:]])


def is_literal(node: ast.AST | None) -> bool:
    if node is None:
        return False
    try:
        ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False
    return True


def atomic(text: str, node: ast.AST) -> str:
    """``text`` as it can stand in any expression: parenthesized unless it is a name, a constant or a display."""
    if isinstance(node, ast.Name | ast.Attribute | ast.Dict | ast.List | ast.Tuple | ast.Set | ast.Call):
        return text if "\n" not in text or not isinstance(node, ast.Name | ast.Attribute) else f"({text})"
    if isinstance(node, ast.Constant) and not (isinstance(node.value, int | float | complex) and text.startswith("-")):
        return text
    return f"({text})"


def is_constant(node: ast.AST) -> bool:
    """A number, string, bytes, bool or None, or a tuple of them: one value however often it is read (a list or a
    dict display is a new object at each read)."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        node = node.operand
    if isinstance(node, ast.Tuple):
        return all(is_constant(e) for e in node.elts)
    return isinstance(node, ast.Constant)


def is_chain(node: ast.AST) -> bool:
    """A name, or an attribute of one (``cfg.lr``): no call, nothing evaluated twice that could differ."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name)


def owns_lines(statement: ast.stmt, text: SourceText) -> bool:
    return owns_its_lines(statement, text.lines)


def parent_map(tree: ast.AST) -> dict[ast.AST, ast.AST]:
    return {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
