"""Which code made a corpus table: the harness's own commit, or its installed version.

"k of n exact" is a claim about one state of the code, so the table says which: ``git rev-parse HEAD`` of the
checkout the running package lies in, with ``+dirty`` when that tree has changes (the number may then belong to
no commit at all), or the installed version when the package does not run from a checkout (a wheel in a venv).
"""

from __future__ import annotations

import datetime
import subprocess
from pathlib import Path

import reprobisect

__all__ = ["harness_commit", "today"]

_PACKAGE = Path(reprobisect.__file__).resolve().parent


def _git(top: Path, *args: str) -> str | None:
    """What ``git -C top ARGS`` prints, or None when git is missing or fails (not a checkout)."""
    try:
        done = subprocess.run(["git", "-C", str(top), *args], capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def harness_commit(package: Path = _PACKAGE) -> str:
    """``<sha>``, ``<sha>+dirty`` or ``reprobisect <version> (installed)``. Only a checkout whose top holds the
    package (``src/reprobisect``) counts: a venv inside some other repository is no checkout of the harness."""
    top = _git(package, "rev-parse", "--show-toplevel")
    if top is None or Path(top).resolve() / "src" / "reprobisect" != package:
        return f"reprobisect {reprobisect.__version__} (installed)"
    sha = _git(Path(top), "rev-parse", "HEAD")
    if not sha:
        return f"reprobisect {reprobisect.__version__} (installed)"
    changes = _git(Path(top), "status", "--porcelain")  # untracked files too: new code changes what runs
    return sha + ("+dirty" if changes is None or changes else "")


def today() -> str:
    """The date and time in UTC, to the minute: when the table was made."""
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
