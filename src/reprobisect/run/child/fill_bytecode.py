"""Compile a cell's byte code once, where its packages ship none: ``python fill_bytecode.py PREFIX MODULE...``.

Run by the harness (``run/bytecode.py``) with the cell's python, outside any sandbox, before the cell's runs;
standard library only (it is a child file, never imported by the harness). First it looks, without importing
anything, whether the top-level package of any MODULE lacks the byte cache Python would read beside its
``__init__.py`` (an image whose packages were installed without compiling them, under
``PYTHONDONTWRITEBYTECODE=1``: the GPU image's torch, triton and sympy ship 0 of their 3,800 ``.pyc``). If none
lacks it, it prints ``{"needed": false}`` and stops: runs read the packages' own caches, as they always did.
Otherwise it imports every MODULE with ``sys.pycache_prefix`` set to PREFIX and byte-code writing on, so Python
itself compiles what the imports load (packages, their dependencies, the standard library) into PREFIX, and prints
``{"needed": true, "loaded": N, "seconds": S}``. Runs then get ``PYTHONPYCACHEPREFIX=PREFIX``, read-only.

A module that fails to import is skipped (its run will say why); nothing here decides a run's outcome.
"""

import contextlib
import importlib
import importlib.util
import io
import json
import os
import py_compile
import sys
import time


def _lacks_byte_code(name):
    """Whether ``name``'s package has a source whose byte cache is not beside it; False when it is not found, is
    built in, or is no source (an extension module)."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError, AttributeError):
        return False
    origin = getattr(spec, "origin", None) if spec is not None else None
    if not origin or not origin.endswith(".py") or not os.path.isfile(origin):
        return False
    try:
        return not os.path.isfile(importlib.util.cache_from_source(origin))
    except (NotImplementedError, ValueError):
        return False


def _import_all(names):
    """Import each of ``names``, quietly; a failure is the run's to report, not this fill's."""
    for name in names:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            try:
                importlib.import_module(name)
            except BaseException:  # SystemExit and KeyboardInterrupt from a package's import too
                continue


def _compile_loaded():
    """Compile into the prefix what was loaded before it was set (this file's own imports, the standard library's
    first modules): the import system only wrote what it loaded afterwards. Returns how many it compiled."""
    compiled = 0
    for module in list(sys.modules.values()):
        origin = getattr(getattr(module, "__spec__", None), "origin", None)
        if not isinstance(origin, str) or not origin.endswith(".py") or not os.path.isfile(origin):
            continue
        try:
            target = importlib.util.cache_from_source(origin)
            if not os.path.isfile(target):
                py_compile.compile(origin, cfile=target, doraise=True)
                compiled += 1
        except (OSError, ValueError, NotImplementedError, py_compile.PyCompileError):
            continue
    return compiled


def main():
    if len(sys.argv) < 2:
        print("usage: fill_bytecode.py PREFIX MODULE...", file=sys.stderr)
        return 2
    prefix, names = os.path.abspath(sys.argv[1]), sys.argv[2:]
    lacking = [name for name in names if _lacks_byte_code(name)]
    if not lacking:
        print(json.dumps({"needed": False}), flush=True)
        return 0
    start = time.perf_counter()
    os.makedirs(prefix, exist_ok=True)
    sys.pycache_prefix = prefix
    sys.dont_write_bytecode = False
    before = len(sys.modules)
    _import_all(names)
    loaded = len(sys.modules) - before
    _compile_loaded()
    result = {"needed": True, "lacking": lacking, "loaded": loaded, "seconds": round(time.perf_counter() - start, 3)}
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
