"""Reading the project's Markdown as GitHub shows it: fenced blocks, links, heading anchors.

Shared by the tests of this folder; standard library only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"

_FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([\w+-]*)[^\n]*$")
# [text](target) and ![alt](target); the text may hold one level of brackets or a code span
_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


@dataclass(frozen=True)
class Block:
    """A fenced code block: its info string's language and its text."""

    lang: str
    text: str
    line: int  # 1-based line of the opening fence


def pages() -> list[Path]:
    """Every Markdown page a reader of the project follows links between."""
    found = [ROOT / name for name in ("README.md", "CONTRIBUTING.md", "CHANGELOG.md")]
    return [path for path in found if path.exists()] + sorted(DOCS.glob("*.md"))


def split_fences(text: str) -> tuple[list[str], list[Block]]:
    """The lines outside fenced blocks (fenced lines blanked, so line numbers hold) and the blocks."""
    prose: list[str] = []
    blocks: list[Block] = []
    fence: str | None = None
    lang, start, body = "", 0, []
    for number, line in enumerate(text.splitlines(), start=1):
        match = _FENCE.match(line)
        if fence is None and match:
            fence, lang, start, body = match.group(2), match.group(3), number, []
            prose.append("")
        elif fence is not None and line.strip().startswith(fence[0] * len(fence)) and not line.strip().strip(fence[0]):
            blocks.append(Block(lang=lang, text="\n".join(body), line=start))
            fence = None
            prose.append("")
        elif fence is not None:
            body.append(line)
            prose.append("")
        else:
            prose.append(line)
    return prose, blocks


def links(text: str) -> list[tuple[int, str]]:
    """(line, target) of every inline link and image outside fenced blocks."""
    prose, _ = split_fences(text)
    return [(number, m.group(1)) for number, line in enumerate(prose, start=1) for m in _LINK.finditer(line)]


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: its text lower-cased, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    text = text.replace("`", "").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every heading anchor of a page; a repeated heading gets -1, -2, ... as on GitHub."""
    prose, _ = split_fences(text)
    seen: dict[str, int] = {}
    found: set[str] = set()
    for line in prose:
        match = _HEADING.match(line)
        if not match:
            continue
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found
