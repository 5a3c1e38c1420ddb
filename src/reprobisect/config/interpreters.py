"""What a ``python`` axis value may be, decided without running it.

A cell is made from the interpreter its ``python`` value names, and the harness asks that interpreter what it is
(``cells/base.py``) outside the sandbox: a value of ``/bin/sh`` made ``sh -c <probe>`` run, and a script file
named in ``matrix.yaml`` or ``--python`` ran with the user's rights. So a value is a version (``3.11``, found on
this machine by ``cells/envs.py``), ``system`` (the base interpreter), or the absolute path of an executable file
whose name and whose target's name are a Python interpreter's and which is no script (no ``#!``): checked with a
``stat`` and two bytes read, before anything runs it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from reprobisect.errors import ConfigError
from reprobisect.util.bounds import cut

__all__ = ["check_interpreter"]

_VERSION = re.compile(r"[23](\.[0-9]{1,2}){0,2}")  # 3, 3.11, 3.11.2
_NAME = re.compile(r"python(3(\.[0-9]{1,2})?)?[dmt]?")  # python, python3, python3.11, python3.13t
_RIGHT = (
    "give 'system', a version such as '3.11', or the absolute path of a Python interpreter "
    "(named python, python3 or python3.N, an executable file, no script)"
)


def _problem(value: str) -> str | None:
    """Why ``value`` is no interpreter the harness may ask, or None."""
    if value == "system" or _VERSION.fullmatch(value):
        return None
    if not value.startswith("/"):
        return "is neither a version nor an absolute path"
    path = Path(value)
    if not _NAME.fullmatch(path.name):
        return f"is named {cut(path.name, 40)}, not python3.N"
    try:
        target = path.resolve(strict=True)
        if not target.is_file() or not os.access(target, os.X_OK):
            return "is not an executable file"
        with target.open("rb") as head:
            if head.read(2) == b"#!":
                return "is a script (#!), not an interpreter"
    except (OSError, RuntimeError):
        return "does not exist or cannot be read"
    if not _NAME.fullmatch(target.name):
        return f"leads to {cut(target.name, 40)}, not python3.N"
    return None


def check_interpreter(value: str, where: str) -> str:
    """``value`` when a ``python`` axis may hold it; else ConfigError naming ``where``, the value (cut to a readable
    length), what is wrong with it and what would be right. Nothing is run."""
    problem = _problem(value)
    if problem is None:
        return value
    msg = f"{where}: python {cut(value)} {problem}; {_RIGHT}"
    raise ConfigError(msg)
