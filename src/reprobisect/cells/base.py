"""The interpreter cells are made from, and what it holds: asked once, in one short subprocess.

Apart from cells/envs.py (which builds cells from it) so that what resolves a cell's companions
(cells/companion_match.py) can name it without importing the builder that imports the companions.
"""

from __future__ import annotations

import dataclasses
import json

from reprobisect.errors import ConfigError
from reprobisect.util.cmd import run_tool

__all__ = ["BaseInterpreter", "base_interpreter"]

_PROBE = r"""
import json, sys, sysconfig, importlib.metadata as m
def version(name):
    try:
        return m.version(name)
    except m.PackageNotFoundError:
        return None
print(json.dumps({
    "executable": sys.executable,
    "version": "%d.%d.%d" % sys.version_info[:3],
    "is_venv": sys.prefix != sys.base_prefix,
    "site_packages": list(dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"],
                                         *(p for p in sys.path if p.endswith(("site-packages", "dist-packages")))])),
    "torch": version("torch"),
    "torchvision": version("torchvision"),
}))
"""


@dataclasses.dataclass(frozen=True, kw_only=True)
class BaseInterpreter:
    """The interpreter cells are made from, and the torch it holds (if any)."""

    executable: str
    version: str
    is_venv: bool
    site_packages: tuple[str, ...]
    torch: str | None
    torchvision: str | None = None  # the base's own, if any: a cell on its torch takes it when made for it


def base_interpreter(executable: str) -> BaseInterpreter:
    """Ask ``executable`` what it is (one short subprocess, torch is not imported)."""
    what = f"--base-python {executable!r}: cannot run it (pass a Python 3 interpreter)"
    out = run_tool([executable, "-c", _PROBE], what=what, timeout=60, error=ConfigError)
    try:
        data = json.loads(out.stdout.strip().splitlines()[-1])
        return BaseInterpreter(
            executable=str(data["executable"]),
            version=str(data["version"]),
            is_venv=bool(data["is_venv"]),
            site_packages=tuple(str(p) for p in data["site_packages"]),
            torch=None if data["torch"] is None else str(data["torch"]),
            torchvision=None if data.get("torchvision") is None else str(data["torchvision"]),
        )
    except (IndexError, ValueError, KeyError, TypeError) as exc:
        msg = f"--base-python {executable!r}: it ran but did not answer as a Python 3 interpreter does ({exc!r:.100})"
        raise ConfigError(msg) from exc
