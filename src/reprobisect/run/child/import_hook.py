"""Run a function on a module the moment it is imported (or at once, when it already is): how the child's
helpers (the Lightning CPU shim, the op cache) change a library without touching its files.

Loaded by path (``runpy.run_path``) from the other child files, inside the cell's interpreter: standard library
only. Idempotent per ``key``: runpy may load a helper twice, and a second finder would patch twice.
"""

import importlib.abc
import sys


class _AfterImport(importlib.abc.MetaPathFinder):
    def __init__(self, key, names, action):
        self.reprobisect_key, self.names, self.action = key, frozenset(names), action

    def find_spec(self, fullname, path, target=None):
        if fullname not in self.names:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        exec_module, action = loader.exec_module, self.action

        def exec_then_act(module):
            exec_module(module)
            action(module)

        loader.exec_module = exec_then_act
        return spec


def after_import(key, names, action):
    """Call ``action(module)`` for each module of ``names``: now for those imported, later for the others."""
    for name in names:
        if name in sys.modules:
            action(sys.modules[name])
    if not any(getattr(f, "reprobisect_key", None) == key for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterImport(key, names, action))
