"""A command line a person can paste: its words quoted for a shell, a secret named by its variable, never its value.

A re-run command keeps ``--env HF_TOKEN=$HF_TOKEN`` where the user typed the token (``setting_word``): the record,
the summary's "Reproduce" line and report.md say which variable the run needs, and the shell that runs the command
again supplies it. ``shell_join`` quotes every word as ``shlex.join`` does, except that such a reference is left
for the shell to expand (``HF_TOKEN="$HF_TOKEN"``); nothing else a word holds is ever expanded.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from reprobisect.util.redact import secret_name

__all__ = ["setting_word", "shell_join", "shown_argv", "shown_setting"]

# The options whose items set a variable: ``--env VAR=VALUE``, ``--fix-env FIX=VAR=VALUE``.
_SETTING_OPTIONS = {"--env": False, "--fix-env": True}


def setting_word(name: str, value: str) -> str:
    """``NAME=VALUE``, or ``NAME=$NAME`` where ``NAME`` is a secret's (``util.redact.secret_name``)."""
    return f"{name}=${name}" if secret_name(name) else f"{name}={value}"


def shown_setting(item: str, *, fix: bool = False) -> str:
    """An ``--env`` item (``VAR=VALUE``) or, with ``fix``, a ``--fix-env`` item (``FIX=VAR=VALUE``) as a command
    line may show it: a secret's value replaced by a reference to its variable."""
    head, rest = item.split("=", 1) if fix and "=" in item else ("", item)
    name, sep, value = rest.partition("=")
    if not sep:
        return item
    shown = setting_word(name, value)
    return f"{head}={shown}" if fix else shown


def shown_argv(words: Sequence[str]) -> list[str]:
    """A command line's words with every ``--env``/``--fix-env`` secret shown as its variable (up to a ``--``:
    what follows is the script's)."""
    shown: list[str] = []
    option: str | None = None
    for index, word in enumerate(words):
        if word == "--":
            return [*shown, *words[index:]]
        if option is not None:
            shown.append(shown_setting(word, fix=_SETTING_OPTIONS[option]))
            option = None
            continue
        name, sep, item = word.partition("=")
        if name in _SETTING_OPTIONS and sep:
            shown.append(f"{name}={shown_setting(item, fix=_SETTING_OPTIONS[name])}")
        else:
            shown.append(word)
            option = word if word in _SETTING_OPTIONS else None
    return shown


def shell_join(words: Sequence[str]) -> str:
    """``words`` quoted for a shell (``shlex.join``), a word ending in ``NAME=$NAME`` left to expand that variable."""
    return " ".join(_quoted(word) for word in words)


def _quoted(word: str) -> str:
    head, sep, name = word.rpartition("=$")
    if sep and name.isidentifier() and name.isascii() and head.endswith(name):
        before = head[: len(head) - len(name)]
        if not before or not (before[-1].isalnum() or before[-1] == "_"):
            return shlex.quote(f"{head}=") + f'"${name}"'
    return shlex.quote(word)
