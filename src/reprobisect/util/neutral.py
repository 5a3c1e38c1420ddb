"""One neutraliser for text a run produced, for every place a person or GitHub reads it.

A repro prints what it likes, and its words reach the terminal (the runs table), Markdown files (the session
summary, report.md, the nightly issue) and report.html. There, an escape sequence could set a window title,
clear the screen, write the clipboard (OSC 52) or hide text by colour; a NUL or a bidi control could make a
line read otherwise; and in Markdown posted to GitHub an ``@mention`` pings someone, ``<!--`` hides the rest
and ``<script>`` is markup. Each reader gets one function here, built on the same patterns:

- :func:`printable`: the terminal; escape sequences removed, other control characters shown as ``?``.
- :func:`md_safe`: one Markdown line or table cell; no newline, no ``<``, no mention, no ``|``.
- :func:`md_document`: a whole Markdown file as a last pass; the harness's own markup stays, and any escape
  sequence or control character left by a field no one neutralised is removed.
- :func:`html_text`: text in report.html (autoescaped besides): control characters shown as their symbols
  (``␛``, ``␀``), never passed, and mentions broken as in Markdown.
- :func:`command_line`: a command that re-runs what ran (a "Reproduce" or "Re-run" line): quoted for a shell on one
  line, exactly, or a shell comment saying it cannot be given, never a neutralised (and so different) command.
- :func:`md_code`: one line as a Markdown code span, whatever backticks it holds.

Every pattern is linear in its input (tests/unit/test_linear_patterns.py): logs are megabytes.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from reprobisect.util.shell import shell_join

__all__ = ["command_line", "html_text", "md_code", "md_document", "md_safe", "printable"]

# Terminal escape sequences (CSI, OSC, and two-character escapes), then any other control or bidi character.
_ESCAPES = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-_])")
_BIDI = "\u200e\u200f\u202a-\u202e\u2066-\u2069"
_CONTROLS = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{_BIDI}]")  # newline and tab stay
_LINE_BREAKERS = re.compile(f"[\x00-\x1f\x7f-\x9f{_BIDI}]+")
_MENTION = re.compile(r"(?<![\w/.+-])@(?=[A-Za-z0-9_-])")
_ZERO_WIDTH_SPACE = "\u200b"
_BACKTICKS = re.compile(r"`+")
MAX_COMMAND_WORDS = 200
MAX_COMMAND_WORD = 500


def printable(text: str) -> str:
    """Text a run produced, safe to print: escape sequences removed, other control characters shown as ``?``.

    A repro's exception message is shown in the table; an ANSI sequence in it must not colour, move the
    cursor, or hide what follows (e.g. make a failed run look like ``✓ PASS``).
    """
    return _CONTROLS.sub("?", _ESCAPES.sub("", text))


def md_safe(text: str) -> str:
    """Text a run or a record produced, safe inside a Markdown line or table cell that is posted as an issue.

    One line (a newline could open an HTML comment that hides the rest, or end a table row), no escape
    sequence, no HTML (``<`` is escaped: no ``<!--``, no tags), no ``@mention`` that would ping someone (a
    zero-width space after the ``@``; an ``@`` inside a word or URL, as in ``repo.git@v0.16.4``, is no
    mention and stays), and no ``|`` that would split a table cell.
    """
    flat = _LINE_BREAKERS.sub(" ", _ESCAPES.sub("", text))
    return _break_mentions(flat.replace("<", "&lt;").replace("|", "\\|"))


def md_document(text: str) -> str:
    """A whole Markdown file the harness wrote, with every escape sequence and control character (but newline
    and tab) removed: the fields are neutralised one by one (:func:`md_safe`), this catches one that was not."""
    return _CONTROLS.sub("", _ESCAPES.sub("", text))


def html_text(text: str) -> str:
    """Text for report.html (a log's tail, a traceback, a signature): every control character but newline and
    tab shown as its symbol from Unicode's Control Pictures (``␛[31m``, ``␀``), so the page shows what the run
    printed and passes none of it on (to a terminal it is copied into, say); mentions broken as in Markdown."""
    return _break_mentions(_CONTROLS.sub(_picture, text))


def _picture(match: re.Match[str]) -> str:
    code = ord(match[0])
    if code < 0x20:
        return chr(0x2400 + code)
    return "\u2421" if code == 0x7F else "\ufffd"  # DEL, then C1 and bidi controls


def _break_mentions(text: str) -> str:
    return _MENTION.sub("@" + _ZERO_WIDTH_SPACE, text)


def command_line(words: Sequence[str]) -> str:
    """``words`` (the program first) quoted for a POSIX shell on one line (``util.shell.shell_join``, as ``shlex.join``
    but a secret's ``NAME=$NAME`` left to expand): the command that re-runs
    exactly what ran. Where a word holds what no line shows as it is (a newline, an escape sequence, another control
    or bidi character), the words are too many or a word too long, the command cannot be given: a shell comment says
    so and names the argument (0 is the program), so that a pasted line runs nothing. Why not neutralise the word: a
    script argument ``a\x1b[2Jb`` shown as ``ab`` would re-run something else, silently."""
    if len(words) > MAX_COMMAND_WORDS:
        return f"# the command cannot be shown as one line: it has {len(words)} arguments, over {MAX_COMMAND_WORDS}"
    for number, word in enumerate(words):
        why = _unshowable(word)
        if why is not None:
            return f"# the command cannot be shown as one line: argument {number} {why}"
    return shell_join(words)  # shlex.join's quoting, a secret's ``NAME=$NAME`` left for the shell (util.shell)


def _unshowable(word: str) -> str | None:
    if len(word) > MAX_COMMAND_WORD:
        return f"is longer than {MAX_COMMAND_WORD} characters"
    if word.isprintable():
        return None
    if "\n" in word or "\r" in word:
        return "holds a line break"
    return "holds an escape sequence" if "\x1b" in word else "holds a control character"


def md_code(text: str) -> str:
    """``text`` (one line: a :func:`command_line`) as a Markdown code span, fenced by more backticks than any run
    inside it (CommonMark), so that a backtick in a script's argument cannot end the span and start Markdown."""
    longest = max((len(run) for run in _BACKTICKS.findall(text)), default=0)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    fence = "`" * (longest + 1)
    return f"{fence}{pad}{text}{pad}{fence}"
