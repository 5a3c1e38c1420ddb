"""Which releases of a package the configured index lists, for ranges and ``latest``.

Asks pip (``pip index versions``), so the answer comes from whatever index the user's pip
configuration points at; answers are cached for a while in a JSON file so that listing the matrix
(``nox -l``) does not query the index every time.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from pathlib import Path

from packaging.version import Version

from reprobisect.errors import ConfigError
from reprobisect.util.cmd import run_tool
from reprobisect.util.files import write_atomic

__all__ = ["IndexCache", "list_versions"]

_AVAILABLE = re.compile(r"^Available versions:[ \t]*(?P<versions>.*)$", re.MULTILINE)
_PACKAGE_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,98}[A-Za-z0-9])?")  # PEP 508's names, bounded
_CLOCK_SKEW = 300.0  # seconds an entry may lie in the future (another machine's clock) and still count


def list_versions(python: str, package: str, *, prereleases: bool = False) -> list[str]:
    """Every release of ``package`` on the configured index, oldest first."""
    if not _PACKAGE_NAME.fullmatch(package):
        msg = f"{package[:80]!r} is not a package name (letters, digits, '.', '_', '-'); cannot list its releases"
        raise ConfigError(msg)
    cmd = [python, "-m", "pip", "index", "versions", package, "--disable-pip-version-check"]
    if prereleases:
        cmd.append("--pre")
    done = run_tool(cmd, what=f"cannot list releases of {package!r}", timeout=120, error=ConfigError, check=False)
    match = _AVAILABLE.search(done.stdout)
    if done.returncode != 0 or match is None:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        msg = f"cannot list releases of {package!r} on the configured index: {tail[0]}"
        raise ConfigError(msg)
    versions = []
    for raw in match["versions"].split(","):
        try:
            versions.append(Version(raw.strip()))
        except ValueError:  # InvalidVersion, or a number too long for an int
            continue
    return [str(v) for v in sorted(versions)]


class IndexCache:
    """``list_versions`` with answers kept in a JSON file for ``ttl`` seconds."""

    def __init__(self, path: Path, python: str, *, ttl: float = 6 * 3600) -> None:
        wheelhouse = os.environ.get("PIP_FIND_LINKS", "") if os.environ.get("PIP_NO_INDEX") else ""
        if wheelhouse:  # an offline wheelhouse lists other releases than the index: cache it apart
            path = path.with_name(f"{path.stem}-{hashlib.sha256(wheelhouse.encode()).hexdigest()[:8]}{path.suffix}")
        self.path = path
        self.python = python
        self.ttl = ttl

    def _load(self) -> dict[str, dict[str, object]]:
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError, RecursionError):
            return {}
        return data if isinstance(data, dict) else {}

    def versions(self, package: str, *, prereleases: bool = False, refresh: bool = False) -> list[str]:
        """Releases of ``package``, oldest first, from the cache when it is fresh."""
        key = f"{package}{'+pre' if prereleases else ''}"
        data = self._load()
        entry = data.get(key)
        if not refresh and isinstance(entry, dict) and self._fresh(entry.get("at")):
            cached = entry.get("versions")
            if isinstance(cached, list):
                return [str(v) for v in cached]
        versions = list_versions(self.python, package, prereleases=prereleases)
        data[key] = {"at": time.time(), "versions": versions}
        write_atomic(self.path, json.dumps(data, indent=1), what="the index cache")  # concurrent harnesses too
        return versions

    def _fresh(self, at: object) -> bool:
        """Asked less than ``ttl`` seconds ago; a time that is no number, or lies in the future, is stale."""
        if isinstance(at, bool) or not isinstance(at, (int, float)):
            return False
        age = time.time() - at
        return -_CLOCK_SKEW <= age < self.ttl
