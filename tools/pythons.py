"""The CPython interpreters on this machine that the package claims to support, oldest and newest.

``requires-python`` says ">=3.11", and Debian 12's ``/usr/bin/python3`` is 3.11.2: the oldest Python a user can
bring. Features came in patch releases (``TarFile.extractall(filter=...)`` in 3.11.4; a NUL byte in source is a
SyntaxError only from 3.11.4 on), so a newer 3.11 in CI proves nothing about 3.11.2. CI runs the whole suite on the
oldest interpreter found here and the unit suite on the newest (noxfile.py: ``tests --force-python``,
``tests_newest``).

``python tools/pythons.py oldest`` (or ``newest``, or ``all``) prints the path(s); exit 1 when none is found.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

FLOOR = (3, 11)  # requires-python in pyproject.toml
# Places a system interpreter lives beside PATH (a venv's python3 comes first on PATH), and pyenv's versions.
SYSTEM_DIRS = ("/usr/bin", "/usr/local/bin")
NAMES = ("python3", *(f"python3.{minor}" for minor in range(FLOOR[1], 20)))


def found() -> dict[tuple[int, int, int], str]:
    """Every interpreter named python3 or python3.N on PATH or in the system folders, by its version (first path
    found for a version), those older than FLOOR left out."""
    folders = [*os.environ.get("PATH", "").split(os.pathsep), *SYSTEM_DIRS, *_pyenv_dirs()]
    versions: dict[tuple[int, int, int], str] = {}
    seen: set[Path] = set()
    for folder in folders:
        for name in NAMES:
            path = shutil.which(name, path=folder) if folder else None
            if path is None or (real := Path(path).resolve()) in seen:
                continue
            seen.add(real)
            version = _version(path)
            if version is not None and version[:2] >= FLOOR:
                versions.setdefault(version, path)
    return versions


def _pyenv_dirs() -> list[str]:
    """The bin folders of every Python pyenv installed: its shims run only the versions pyenv has made current."""
    root = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"
    return sorted(str(p / "bin") for p in root.glob("3.*") if (p / "bin").is_dir()) if root.is_dir() else []


def _version(path: str) -> tuple[int, int, int] | None:
    """The interpreter's version; None for one that does not start (a pyenv shim with no such version)."""
    try:
        done = subprocess.run(
            [path, "-c", "import sys; print(*sys.version_info[:3])"], capture_output=True, text=True, timeout=20
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    parts = done.stdout.split()
    if done.returncode != 0 or len(parts) != 3 or not all(p.isdigit() for p in parts):
        return None
    return int(parts[0]), int(parts[1]), int(parts[2])


def oldest() -> str | None:
    versions = found()
    return versions[min(versions)] if versions else None


def newest() -> str | None:
    versions = found()
    return versions[max(versions)] if versions else None


def main(argv: list[str]) -> int:
    which = argv[0] if argv else "all"
    if which == "all":
        for version, path in sorted(found().items()):
            print(".".join(map(str, version)), path)
        return 0
    if which not in ("oldest", "newest"):
        print("usage: python tools/pythons.py [oldest|newest|all]", file=sys.stderr)
        return 2
    path = oldest() if which == "oldest" else newest()
    if path is None:
        print(f"no Python {'.'.join(map(str, FLOOR))} or newer found on PATH or in {SYSTEM_DIRS}", file=sys.stderr)
        return 1
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
