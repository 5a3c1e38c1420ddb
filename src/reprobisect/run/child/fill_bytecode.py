"""Compile a cell's byte code once, where its packages ship none: ``python fill_bytecode.py PREFIX MODULE...``.

Run by the harness (``run/bytecode.py``) with the cell's python, outside any sandbox, before the cell's runs;
standard library only (it is a child file, never imported by the harness). First it looks, without importing
anything, whether the top-level package of any MODULE lacks the byte cache Python would read beside its
``__init__.py`` (an image whose packages were installed without compiling them, under
``PYTHONDONTWRITEBYTECODE=1``: the GPU image's torch, triton and sympy ship 0 of their 3,800 ``.pyc``). If none
lacks it, it prints ``{"needed": false}`` and stops: runs read the packages' own caches, as they always did.
Otherwise, with ``sys.pycache_prefix`` set to PREFIX: it compiles the lacking packages whole, on every core
(torch's 2,141 files), then imports every MODULE with byte-code writing on, so Python itself
compiles into PREFIX what else the imports load and lacks a cache (sympy, triton), while a cache a package does
ship is copied into PREFIX as it is found (with a prefix Python reads no other, and compiling the 2,800 modules
that shipped theirs took most of a first, 21 s fill on the GPU node). It prints ``{"needed": true, "loaded": N,
"seconds": S}``. Runs then get ``PYTHONPYCACHEPREFIX=PREFIX``, read-only.

A module that fails to import is skipped (its run will say why); nothing here decides a run's outcome.
"""

import contextlib
import fcntl
import importlib
import importlib.machinery
import importlib.util
import io
import json
import os
import py_compile
import sys
import time


def _spec(name):
    """``name``'s module spec, or None (not found, or its finder failed)."""
    try:
        return importlib.util.find_spec(name)
    except (ImportError, ValueError, AttributeError):
        return None


def _lacks_byte_code(name):
    """Whether ``name``'s package has a source whose byte cache is not beside it; False when it is not found, is
    built in, or is no source (an extension module)."""
    origin = getattr(_spec(name), "origin", None)
    if not origin or not origin.endswith(".py") or not os.path.isfile(origin):
        return False
    try:
        return not os.path.isfile(importlib.util.cache_from_source(origin))
    except (NotImplementedError, ValueError):
        return False


def _package_folder(name):
    """The folder of ``name``'s package, or None (a single module, not found)."""
    locations = list(getattr(_spec(name), "submodule_search_locations", None) or ())
    return locations[0] if locations and os.path.isdir(locations[0]) else None


def _compile_one(pair):
    """Compile one source to its named target (a worker's task)."""
    source, target = pair
    try:
        py_compile.compile(source, cfile=target, doraise=True)
    except (OSError, ValueError, py_compile.PyCompileError):
        return False
    return True


def _compile_packages(names):
    """Compile the packages ``names`` whole into the prefix, one worker a core. Each target is named here, in this
    process: compileall's own workers (Python 3.12 and later) are started by a fork server with this child's ``-I``,
    which ignores ``PYTHONPYCACHEPREFIX``, so they wrote into the package itself, the user's interpreter. Forked
    workers, before anything heavy is imported."""
    pairs = []
    for name in names:
        folder = _package_folder(name)
        for root, dirs, files in os.walk(folder) if folder is not None else ():
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            for filename in files:
                if filename.endswith(".py"):
                    source = os.path.join(root, filename)
                    target = importlib.util.cache_from_source(source)
                    if not os.path.isfile(target):
                        pairs.append((source, target))
    workers = min(os.cpu_count() or 1, 16)
    if workers < 2 or len(pairs) < 64:
        for pair in pairs:
            _compile_one(pair)
        return
    import multiprocessing

    with multiprocessing.get_context("fork").Pool(workers) as pool:
        pool.map(_compile_one, pairs, chunksize=32)


def _shipped_cache(origin):
    """The byte cache Python would read beside ``origin`` without a prefix."""
    folder, filename = os.path.split(origin)
    return os.path.join(folder, "__pycache__", f"{filename[:-3]}.{sys.implementation.cache_tag}.pyc")


class CopyShippedCaches:
    """A finder that finds nothing: as each module is looked up, it copies the cache its package shipped into the
    prefix, where the loader then finds it (and checks it against its source, as any cache: a stale one is
    compiled again)."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        try:
            spec = importlib.machinery.PathFinder.find_spec(name, path)
        except (ImportError, ValueError, AttributeError):
            return None
        origin = getattr(spec, "origin", None) if spec is not None else None
        if isinstance(origin, str) and origin.endswith(".py"):
            _copy_shipped(origin)
        return None


def _copy_shipped(origin):
    try:
        shipped, target = _shipped_cache(origin), importlib.util.cache_from_source(origin)
        if os.path.isfile(target) or not os.path.isfile(shipped):
            return
        os.makedirs(os.path.dirname(target), exist_ok=True)
        partial = f"{target}.{os.getpid()}.part"
        with open(shipped, "rb") as source, open(partial, "wb") as copy:
            copy.write(source.read())
        os.replace(partial, target)
    except (OSError, ValueError, NotImplementedError):
        return


def _import_all(names):
    """Import each of ``names``, quietly; a failure is the run's to report, not this fill's."""
    for name in names:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            try:
                importlib.import_module(name)
            except BaseException:  # SystemExit and KeyboardInterrupt from a package's import too
                continue


def _compile_loaded():
    """Copy or compile into the prefix what was loaded before it was set (this file's own imports, the standard
    library's first modules): the import system only wrote what it loaded afterwards."""
    for module in list(sys.modules.values()):
        origin = getattr(getattr(module, "__spec__", None), "origin", None)
        if not isinstance(origin, str) or not origin.endswith(".py") or not os.path.isfile(origin):
            continue
        _copy_shipped(origin)
        try:
            target = importlib.util.cache_from_source(origin)
        except (ValueError, NotImplementedError):
            continue
        if not os.path.isfile(target):
            _compile_one((origin, target))


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
    # cells prepared at once share the prefix: the first compiles torch whole, the others find it compiled
    with open(f"{prefix}.flock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        _compile_packages(lacking)
    sys.meta_path.insert(0, CopyShippedCaches)
    before = len(sys.modules)
    _import_all(names)
    sys.meta_path.remove(CopyShippedCaches)
    loaded = len(sys.modules) - before
    _compile_loaded()
    result = {"needed": True, "lacking": lacking, "loaded": loaded, "seconds": round(time.perf_counter() - start, 3)}
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
