"""A wheel of a source tree by one call of its build backend in the base interpreter, without pip.

pip builds a wheel from a tree in two runs of the backend: the metadata, then the wheel. DeepSpeed's ``setup.py``
imports torch and asks every op whether it is compatible each time, so a commit's wheel cost about 17 s on a GPU node
(8 at once) and 15 s on 2 CPU cores, about half of it the metadata run that the wheel's run repeats. The backend's
``build_wheel`` hook alone (PEP 517, as ``python -m build --wheel --no-isolation`` calls it) makes the same wheel in
one run. It serves commits of a clone (commit bisection), where pip was asked for ``--no-build-isolation`` anyway:
the base interpreter's setuptools and torch build it, offline. Whatever this cannot do (no ``tomllib`` before Python
3.11 for a tree with a ``pyproject.toml``, a backend that fails) falls back to pip.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from reprobisect.cells.build_jail import BuildJail
from reprobisect.errors import ToolError
from reprobisect.util.cmd import output_tail, run_tool

__all__ = ["BuildPlace", "backend_wheel"]

# Run by the base interpreter in the tree: the backend pyproject.toml names (setuptools' legacy one without it, as
# pip does), its backend-path first on sys.path, then the hook; the wheel's file name on the last line.
_HOOK = r"""
import importlib, os, sys
source, dest = sys.argv[1], sys.argv[2]
backend, paths = "setuptools.build_meta:__legacy__", []
if os.path.exists(os.path.join(source, "pyproject.toml")):
    import tomllib
    with open(os.path.join(source, "pyproject.toml"), "rb") as f:
        system = tomllib.load(f).get("build-system", {})
    backend = system.get("build-backend", backend)
    paths = [os.path.join(source, p) for p in system.get("backend-path", [])]
sys.path[:0] = paths
os.chdir(source)
module, _, attrs = backend.partition(":")
hooks = importlib.import_module(module)
for attr in filter(None, attrs.split(".")):
    hooks = getattr(hooks, attr)
os.makedirs(dest, exist_ok=True)
print("\nWHEEL=" + hooks.build_wheel(dest), flush=True)
"""


@dataclasses.dataclass(frozen=True)
class BuildPlace:
    """Where one build runs: its jail, its folder (the only one it writes), the environment it is cleared from,
    its timeout, what else it reads (a commit's objects in the user's clone) and what it must not (that clone's
    git configuration, which may hold credentials)."""

    jail: BuildJail
    folder: Path
    environ: Mapping[str, str]
    timeout: float
    readable: Sequence[Path] = ()
    hidden: Sequence[Path] = ()


def backend_wheel(
    python: str, source: Path, dest: Path, *, note: Callable[[str], None], place: BuildPlace
) -> Path | None:
    """The wheel ``build_wheel`` of the tree's backend made in ``dest``, or None (said to ``note``) when it could not:
    the caller then asks pip. It runs in ``place``'s jail without the network (no index: the base's own backend),
    writing only ``place.folder``, which holds ``source`` and ``dest``, and reading ``place.readable`` besides (the
    commit's objects)."""
    start = time.perf_counter()
    argv, env = place.jail.command(
        [python, "-c", _HOOK, str(source), str(dest)],
        python=python,
        folder=place.folder,
        environ=place.environ,
        index=False,
        readable=place.readable,
    )
    try:
        done = run_tool(
            argv, what=f"building a wheel of {source}", timeout=place.timeout, env=env, check=False, cwd=source
        )
    except ToolError as exc:
        note(f"the build backend's hook did not run ({exc}); pip builds it")
        return None
    lines = done.stdout.strip().splitlines()
    name = lines[-1].removeprefix("WHEEL=") if lines and lines[-1].startswith("WHEEL=") else ""
    wheel = dest / name
    seconds = time.perf_counter() - start
    if done.returncode != 0 or not name or "/" in name or not wheel.is_file():
        tail = output_tail(done.stderr or done.stdout)
        note(f"the build backend's hook failed ({seconds:.1f} s), pip builds it: {tail}")
        return None
    note(f"built by the tree's build backend in one run ({seconds:.1f} s): {name}")
    return wheel
