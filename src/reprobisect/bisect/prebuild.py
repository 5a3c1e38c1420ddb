"""Wheels of the commits a commit search may probe next, built while a round runs.

Each round of a commit search builds its probes' cells before it runs them: on an H100 a round's cell build (the
commit's wheel, then the venv) took 20-22 s before runs of 27-32 s, three rounds a search
(reports/gpu/2026-12-05-run-cost, calls 4 and 5). Whatever a round finds, the next one probes the points of one of
the segments it leaves open (``search.first_bad``'s ``prepare``); their wheels are built in the background while
the round's runs go on, into the kept wheels (cells/built_wheels.py, locked per commit: a cell that needs a wheel
being built waits for that build and takes it). Only with cores to spare beside the runs: where the runs take the
machine's cores (2 cores, 2 jobs) nothing is built ahead, so no run's timing pays for it.
"""

from __future__ import annotations

import concurrent.futures
import os
import threading
from collections.abc import Sequence
from pathlib import Path

from reprobisect.cells import built_wheels
from reprobisect.cells.base import BaseInterpreter
from reprobisect.cells.build_jail import BuildJail

__all__ = ["WheelPrebuilder", "spare_builders"]

MAX_BUILDERS = 4


def spare_builders(cores: int, jobs: int) -> int:
    """How many wheels may build beside ``jobs`` runs on ``cores`` cores: half the cores the runs leave, at most
    ``MAX_BUILDERS`` (a build is one process importing torch, mostly one core)."""
    return max(0, min(MAX_BUILDERS, (cores - jobs) // 2))


def usable_cores() -> int:
    """The cores this process may run on (its affinity, as a Slurm job or a pinned harness has it)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        return os.cpu_count() or 1


class WheelPrebuilder:
    """Builds commits' wheels in the background, each once, the first asked for first."""

    def __init__(
        self,
        *,
        root: Path,
        package: str,
        clone: Path,
        base: BaseInterpreter,
        log: Path,
        workers: int,
        jail: BuildJail | None = None,
    ) -> None:
        self.root, self.package, self.clone, self.base, self.log = root, package, clone, base, log
        self.jail = jail or BuildJail()  # confined as the search's probes are (cells/build_jail.py)
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="prebuild")
        self._asked: set[str] = set()
        self._lock = threading.Lock()
        self.built: list[str] = []  # commits whose wheel is kept now (built here or found kept)

    def submit(self, shas: Sequence[str]) -> None:
        """Queue the wheels of ``shas`` not asked for before; returns at once."""
        with self._lock:
            fresh = [sha for sha in dict.fromkeys(shas) if sha not in self._asked]
            self._asked.update(fresh)
        for sha in fresh:
            try:
                self._pool.submit(self._build, sha)
            except RuntimeError:  # closed meanwhile: the search is over
                return

    def _build(self, sha: str) -> None:
        how = built_wheels.BuildWith(
            python=self.base.executable, python_version=self.base.version, log=self.log, jail=self.jail
        )
        wheel, _ = built_wheels.build_commit(self.root, self.package, self.clone, sha, how)
        if wheel is not None:  # a commit that does not build is said by its probe's cell, if it is probed
            with self._lock:
                self.built.append(sha)

    def close(self, *, wait: bool = False) -> None:
        """Drop what has not started; a build under way finishes on its own (it holds its commit's lock), or is
        waited for with ``wait``."""
        self._pool.shutdown(wait=wait, cancel_futures=not wait)


def prebuilder_for(
    clone: Path | None,
    package: str,
    *,
    base: BaseInterpreter,
    envs_dir: Path,
    log: Path,
    jobs: int,
    jail: BuildJail | None = None,
) -> WheelPrebuilder | None:
    """A prebuilder for a commit search run here, or None: not commits of a clone, the kept wheels turned off
    (``REPROBISECT_WHEEL_CACHE=off``), or no cores to spare beside ``jobs`` runs."""
    workers = spare_builders(usable_cores(), jobs)
    root = built_wheels.WHEELS.root(envs_dir)
    if clone is None or root is None or workers < 1:
        return None
    return WheelPrebuilder(root=root, package=package, clone=clone, base=base, log=log, workers=workers, jail=jail)
