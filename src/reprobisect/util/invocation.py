"""Where the harness was started from, and so how a person runs it again there, and where its cells go.

Two ways of running it: from a checkout through nox (``nox -s triage -- issue.py``; nox sets
``NOX_CURRENT_SESSION`` in every session), or installed (``pip install reprobisect``: ``reprobisect triage
issue.py`` from any folder). Tried as a new user would, an installed harness printed "Re-run: nox -s triage -- …",
which exited 127 where there is no noxfile, and put a hidden 140 MB ``./.cells`` into whatever folder the user was
in. So every command line the harness prints for a person is made here, in the form that runs where it runs, and
the cells go to the checkout's ``.cells/`` under nox and to the user's cache folder otherwise.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

__all__ = ["CELLS_VARIABLE", "default_cells_dir", "followed_by", "rerun_head", "rerun_words", "under_nox"]

CELLS_VARIABLE = "REPROBISECT_ENVS"


def under_nox(environ: Mapping[str, str] | None = None) -> bool:
    """Whether this process runs inside a nox session (a checkout's noxfile started it)."""
    return "NOX_CURRENT_SESSION" in (os.environ if environ is None else environ)


def rerun_head(session: str, command: Sequence[str], environ: Mapping[str, str] | None = None) -> list[str]:
    """The words that start ``command`` where the harness runs, for arguments to follow: ``nox -s SESSION --``
    under nox (the session runs ``command``), ``reprobisect COMMAND…`` elsewhere."""
    return ["nox", "-s", session, "--"] if under_nox(environ) else ["reprobisect", *command]


def rerun_words(
    session: str, command: Sequence[str], args: Sequence[str] = (), environ: Mapping[str, str] | None = None
) -> list[str]:
    """``rerun_head`` and ``args``, without a dangling ``--`` where there are none. Quote them with
    ``util.neutral.command_line``."""
    return followed_by(rerun_head(session, command, environ), args)


def followed_by(head: Sequence[str], args: Sequence[str]) -> list[str]:
    """``head`` (words arguments may follow, perhaps ending in nox's ``--``) and ``args``, without a dangling
    ``--`` where there are none."""
    return [*head, *args] if args or not head or head[-1] != "--" else list(head[:-1])


def default_cells_dir(environ: Mapping[str, str] | None = None) -> Path:
    """Where cells (one venv per version combination, ~140 MB each) go unless ``--envs`` says: ``$REPROBISECT_ENVS``,
    else ``.cells`` of the checkout under nox, else the platform's cache folder (``$XDG_CACHE_HOME`` or
    ``~/.cache`` on Linux, ``~/Library/Caches`` on macOS) under ``reprobisect/cells``."""
    env = os.environ if environ is None else environ
    if env.get(CELLS_VARIABLE):
        return Path(env[CELLS_VARIABLE])
    if under_nox(env):
        return Path(".cells")
    return _cache_home(env) / "reprobisect" / "cells"


def _cache_home(environ: Mapping[str, str]) -> Path:
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches"
    given = environ.get("XDG_CACHE_HOME", "")
    return Path(given) if given and Path(given).is_absolute() else Path.home() / ".cache"
