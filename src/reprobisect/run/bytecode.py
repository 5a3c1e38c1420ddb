"""Byte code compiled once per node for packages that ship none, instead of in every run (#41).

The GPU image's torch, triton and sympy carry no ``.pyc`` files (installed without compiling them) and its
environment sets ``PYTHONDONTWRITEBYTECODE=1``, so every interpreter compiled them again: ``import torch`` took
2.8 s there and 1.3 s once its byte code was kept (``reports/gpu/2026-12-06-bytecode/``). A run cannot keep it
itself: its sandbox shows the cell read-only, and a cache that runs write to would let one pasted script plant
code that the next one imports. So while a cell is prepared, before its runs, the harness asks the cell's python
(``run/child/fill_bytecode.py``) whether the packages the cell's scripts import lack their byte caches; only then
does that child compile them, whole and on every core (under a lock: cells prepared at once share the folder), and
import them with ``sys.pycache_prefix`` on a folder of this cache, and the cell's runs get ``PYTHONPYCACHEPREFIX``
on it, read-only. Where the packages ship their byte code (cells the harness builds
compile theirs) nothing changes and the check costs one interpreter start per cell and set of modules.

What a run sees is the same code: Python compiles the same sources and checks each cache against its source's
time and size, so an edited or replaced file is compiled afresh; only ``__cached__`` names the other folder.
Patched overlays are never on the fill's path, so their modules are compiled in the run, as before.

The cache is one folder per base interpreter under ``<envs>/bytecode`` (``REPROBISECT_BYTECODE_CACHE`` moves it,
``off`` turns it off), bounded like the op cache; each cell notes what was checked in ``reprobisect-bytecode.json``.
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import json
import os
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from reprobisect.cells.envs import BYTECODE_MARKER, CellEnv
from reprobisect.cells.shared_cache import SharedCache
from reprobisect.errors import ToolError
from reprobisect.run.child_env import cell_environ
from reprobisect.util.cmd import run_tool
from reprobisect.util.files import write_atomic
from reprobisect.util.python_source import parse_python

__all__ = [
    "BYTECODE",
    "PREFIX_ENV",
    "BytecodeFill",
    "bytecode_prefix",
    "fill_bytecode",
    "prefix_environ",
    "script_modules",
]

FILL = Path(__file__).parent / "child" / "fill_bytecode.py"
PREFIX_ENV = "PYTHONPYCACHEPREFIX"
DEFAULT_MAX_BYTES = 2 << 30  # torch, DeepSpeed, Lightning and what they import: about 60 MB an interpreter
_TIMEOUT = 600.0  # importing torch and DeepSpeed on a slow node: a minute at most; a hang is not waited for
_MAX_MODULES = 64  # a script names a handful; a file of thousands of imports is not worth one fill each
BYTECODE = SharedCache(env_var="REPROBISECT_BYTECODE_CACHE", folder="bytecode", default_max_bytes=DEFAULT_MAX_BYTES)
_STDLIB = frozenset(getattr(sys, "stdlib_module_names", ())) | {"__main__", "__future__"}


@dataclasses.dataclass(frozen=True, kw_only=True)
class BytecodeFill:
    """What checking a cell's byte code did: the modules whose packages lacked byte code (none: nothing compiled),
    how many modules the fill loaded, how long it took and whether an earlier check answered."""

    lacking: tuple[str, ...]
    loaded: int
    seconds: float
    reused: bool
    failure: str | None = None


def script_modules(texts: Iterable[str]) -> tuple[str, ...]:
    """The top-level, non-standard-library modules ``texts`` import by statement (absolute imports only; names in
    strings and relative imports are not imported by the fill), sorted; a text that does not parse adds none."""
    names: set[str] = set()
    for text in texts:
        try:
            tree = parse_python(text)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                names.add(node.module.split(".")[0])
    kept = sorted(name for name in names if name.isidentifier() and name.isascii() and name not in _STDLIB)
    return tuple(kept[:_MAX_MODULES])


def _entry_name(env: CellEnv) -> str:
    """The cache entry of the cell's base interpreter: its version and where it lives (byte code names its
    interpreter's tag itself, so this only keeps one interpreter's files together for the size bound)."""
    base = Path(os.path.realpath(env.python)).parents[1]
    return f"py{env.cell.python}-{hashlib.sha256(str(base).encode()).hexdigest()[:12]}"


def _read_marker(env: CellEnv) -> dict[str, object]:
    """The cell's note of what was checked, {} when there is none or it is not one (a hand-edited, cut file)."""
    try:
        data = json.loads((env.path / BYTECODE_MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def bytecode_prefix(env: CellEnv) -> Path | None:
    """The folder the cell's runs read byte code from (``PYTHONPYCACHEPREFIX``), or None: its packages ship their
    own, it was never checked, or the folder is gone (pruned or cleared: the runs compile, as before)."""
    prefix = _read_marker(env).get("prefix")
    if not isinstance(prefix, str) or not Path(prefix).is_absolute():
        return None
    path = Path(prefix)
    return path if path.is_dir() else None


def _checked(marker: Mapping[str, object]) -> set[str]:
    checked = marker.get("checked")
    return {name for name in checked if isinstance(name, str)} if isinstance(checked, list) else set()


def _fill_environ(env: CellEnv, form_env: Mapping[str, str], environ: Mapping[str, str]) -> dict[str, str]:
    """What the fill's imports run with: a run's scrubbed variables and its form's (DeepSpeed imports other modules
    on its CPU accelerator), the cell first on PATH; never a prefix or a no-write flag of the caller's."""
    child = cell_environ(env, environ) | dict(form_env)
    for name in (PREFIX_ENV, "PYTHONDONTWRITEBYTECODE", "PYTHONPATH"):
        child.pop(name, None)
    return child


def fill_bytecode(
    env: CellEnv,
    modules: Sequence[str],
    form_env: Mapping[str, str],
    environ: Mapping[str, str],
    envs_dir: Path,
) -> BytecodeFill | None:
    """Check, and where needed compile, the byte code of ``modules`` for ``env``'s runs; None when there is nothing
    to check (no modules, the cache turned off)."""
    root = BYTECODE.root(envs_dir, environ)
    if root is None or not modules:
        return None
    name, marker = _entry_name(env), _read_marker(env)
    checked = _checked(marker)
    to_check = _to_check(modules, checked, marker)
    BYTECODE.touch(root, name)
    if not to_check:
        return BytecodeFill(lacking=(), loaded=0, seconds=0.0, reused=True)
    start = time.perf_counter()
    try:
        done = run_tool(
            [env.python, "-I", FILL, root / name, *to_check],
            what=f"compiling the byte code of cell {env.cell.id}",
            timeout=_TIMEOUT,
            env=_fill_environ(env, form_env, environ),
            cwd=env.path,
        )
        answer = _answer(done.stdout)
    except ToolError as exc:
        failure = str(exc).splitlines()[0] if str(exc) else "no answer"
        seconds = time.perf_counter() - start
        return BytecodeFill(lacking=(), loaded=0, seconds=seconds, reused=False, failure=failure)
    had = marker.get("prefix")
    prefix = str(root / name) if answer.get("needed") is True else had if isinstance(had, str) else None
    note = {"checked": sorted(checked | set(to_check)), "prefix": prefix}
    write_atomic(env.path / BYTECODE_MARKER, json.dumps(note, indent=1) + "\n", what="the cell's byte-code note")
    lacking, loaded = answer.get("lacking", ()), answer.get("loaded", 0)
    return BytecodeFill(
        lacking=tuple(m for m in lacking if isinstance(m, str)) if isinstance(lacking, list) else (),
        loaded=loaded if isinstance(loaded, int) else 0,
        seconds=time.perf_counter() - start,
        reused=False,
    )


def _to_check(modules: Sequence[str], checked: set[str], marker: Mapping[str, object]) -> list[str]:
    """The modules the fill must see: all of them unless the cell already reads a prefix that is still there (then
    only those never checked). A "ships its own" answer is never kept: the check costs one interpreter start, and the
    packages can lose their byte code since (another tool cleaned them; an image restored)."""
    prefix = marker.get("prefix")
    if not isinstance(prefix, str) or not Path(prefix).is_dir():
        return list(modules)
    return [module for module in modules if module not in checked]


def _answer(stdout: str) -> dict[str, object]:
    """The fill's last line, a JSON object; a package that printed at import time comes before it."""
    for line in reversed(stdout.strip().splitlines()):
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if isinstance(data, dict):
            return data
    raise ToolError(f"the byte-code fill printed no answer; its output ends: {stdout.strip()[-200:]!r}")


def prefix_environ(env: CellEnv) -> dict[str, str]:
    """The variable a run of ``env`` gets for its byte code: the prefix when its packages lacked theirs, else none."""
    prefix = bytecode_prefix(env)
    return {PREFIX_ENV: str(prefix)} if prefix is not None else {}
