"""Statements that go together: everything that names one setting, and what then loses a name.

A pasted script threads its settings through several places: ``parser.add_argument("--warmup", ...)``, a
``warmup: int`` field, ``warmup=args.warmup,`` in a constructor call, ``cfg.warmup`` where it is used. Removing any
one of them alone breaks the script (an unexpected keyword, a missing attribute), so delta debugging, which removes
statements of one level at a time, keeps all four. A *group* is every statement and element, at any level, that
names one such word (as an attribute, a keyword, a field or a ``--option``), closed over the names that removal
leaves undefined (``factor = warmup_factor(step, cfg.warmup)`` takes ``... * factor`` with it). One run says
whether the setting matters; most settings of a pasted script do not.
"""

from __future__ import annotations

import dataclasses
import io
import keyword
import re
import tokenize
from collections import defaultdict

from reprobisect.minimize.statements import Script
from reprobisect.minimize.static import undefined_names

__all__ = ["Group", "setting_groups"]

_OPTION = re.compile(r"""^[rbuRBU]?["']--?([A-Za-z][\w-]*)["']$""")
_MAX_CLOSURE = 6  # rounds of "what lost a name goes too"


@dataclasses.dataclass(frozen=True)
class Group:
    """One word's statements (closed over the names their removal leaves undefined)."""

    word: str
    units: frozenset[int]


def setting_groups(script: Script, removed: frozenset[int], pinned: frozenset[int]) -> list[Group]:
    """The groups worth a run, smallest first (the likeliest to go): for each setting-like word of what is left,
    the statements that name it and those that would lose a name without them; none that would take a ``pinned``
    statement, leave the script not compiling or with a new undefined name, or remove nothing new."""
    gone = script.removed_with_descendants(removed)
    words, settings = _words(script, gone | script.unwrapped(removed))  # an unwrapped header names nothing now
    base_undefined = undefined_names(script.text(removed))
    if base_undefined is None:
        return []
    groups: dict[frozenset[int], Group] = {}
    for word in sorted(settings):
        units = frozenset(u for u, named in words.items() if word in named)
        closed = _closure(script, removed, units, words, base_undefined)
        if closed is None or closed & pinned or not closed - gone:
            continue
        groups.setdefault(closed, Group(word, closed))
    return sorted(groups.values(), key=lambda g: (len(g.units), g.word))


def _closure(
    script: Script,
    removed: frozenset[int],
    units: frozenset[int],
    words: dict[int, frozenset[str]],
    base_undefined: frozenset[str],
) -> frozenset[int] | None:
    """``units`` and the statements that use a name their removal leaves undefined, until none is; None when the
    script then does not compile or a name stays undefined."""
    group = units
    for _ in range(_MAX_CLOSURE):
        undefined = undefined_names(script.text(removed | group))
        if undefined is None:
            return None
        lost = undefined - base_undefined
        if not lost:
            return group
        users = frozenset(u for u, named in words.items() if named & lost and not script.units[u].element) - group
        if not users:
            return None
        group |= users
    return None


def _words(script: Script, gone: set[int]) -> tuple[dict[int, frozenset[str]], set[str]]:
    """The names each unit still there writes on its own lines (not its children's), and the setting-like words:
    named by two units or more, and written as a field (``lr: float``) or an option (``"--lr"``) somewhere, or both
    as a keyword (``lr=``) and an attribute (``cfg.lr``). A keyword alone (``dim=1``, ``action=``) or an attribute
    alone (``x.detach``) is an API's name, not a setting: removing all its uses breaks the script."""
    source = "".join(script.lines)
    owner: dict[int, int] = {}  # line → the innermost unit whose own line it is
    for unit in script.units:  # parents come first: a child's lines go to the child, gone or not
        for number in range(unit.first, unit.last + 1):
            owner[number] = unit.id
    named: dict[int, set[str]] = defaultdict(set)
    kinds: dict[str, set[str]] = defaultdict(set)
    depth = 0
    tokens = _tokens(source)
    for index, token in enumerate(tokens):
        holder = owner.get(token.start[0])
        if token.type == tokenize.OP and token.string in "([{":
            depth += 1
        elif token.type == tokenize.OP and token.string in ")]}":
            depth -= 1
        word = None
        if token.type == tokenize.NAME and not keyword.iskeyword(token.string):
            word = token.string
            following = tokens[index + 1].string if index + 1 < len(tokens) else ""
            if following == "=" and depth > 0:
                kinds[word].add("keyword")
            elif following == ":" and token.start[1] == _indent(token):
                kinds[word].add("field")
            elif index > 0 and tokens[index - 1].string == ".":
                kinds[word].add("attribute")
        elif token.type == tokenize.STRING and (match := _OPTION.match(token.string)):
            word = match.group(1).replace("-", "_")
            kinds[word].add("option")
        if word is not None and holder is not None and holder not in gone:
            named[holder].add(word)
    counts: dict[str, int] = defaultdict(int)
    for names in named.values():
        for name in names:
            counts[name] += 1
    settings = {
        w for w, k in kinds.items() if counts[w] >= 2 and (k & {"field", "option"} or k >= {"keyword", "attribute"})
    }
    return {u: frozenset(n) for u, n in named.items()}, settings


def _indent(token: tokenize.TokenInfo) -> int:
    return len(token.line) - len(token.line.lstrip())


def _tokens(source: str) -> list[tokenize.TokenInfo]:
    try:
        return list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError, UnicodeDecodeError):  # 3.13 raises the last on some text
        return []
