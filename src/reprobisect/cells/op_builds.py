"""The cache of just-in-time built ops that every cell, patch overlay and bisection probe shares.

Runs fill it through ``run/child/op_cache.py`` (a wrapper of torch's ``load`` keyed on what determines the
binary, never on where the sources lie); the harness only places it, shows finished entries read-only to the
runs that follow, bounds its size and clears it. It lives beside the cells (``<envs>/ops``) unless
``REPROBISECT_OP_CACHE`` names another folder (a node-local disk, a folder several checkouts share).

Layout: ``<name>-<key>/`` holds one op's build (``<name>.so`` once finished) and ``<name>-<key>.flock`` the
lock its builders take and the time it was last used.
"""

from __future__ import annotations

from pathlib import Path

from reprobisect.cells.shared_cache import SharedCache

__all__ = ["DEFAULT_MAX_BYTES", "OPS", "cache_root", "finished"]

DEFAULT_MAX_BYTES = 4 << 30  # a CUDA FusedAdam build is ~20 MB, the CPU comm op ~1 MB: room for hundreds


def _is_op_folder(name: str) -> bool:
    return "-" in name  # ``<name>-<key>``


def _is_finished(folder: Path) -> bool:
    """A build is finished when its ``<name>.so`` is there and torch's own ``lock`` is gone."""
    name = folder.name.rpartition("-")[0]
    return (folder / f"{name}.so").is_file() and not (folder / "lock").exists()


# Pruning takes no lock: a builder holds it for minutes, and a build used within the hour is never pruned.
OPS = SharedCache(
    env_var="REPROBISECT_OP_CACHE",
    folder="ops",
    default_max_bytes=DEFAULT_MAX_BYTES,
    is_entry_name=_is_op_folder,
    is_finished=_is_finished,
)

# Where the op cache of the cells under ``envs_dir`` lives; None when ``REPROBISECT_OP_CACHE=off`` (each cell then
# compiles its ops into its own folder, as torch does by default).
cache_root = OPS.root
# Folders of finished builds: shown read-only to runs, so no run can change an op another run loads.
finished = OPS.finished
