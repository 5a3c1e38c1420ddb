"""Hierarchical delta debugging over a script's statements, with picire doing each level's delta debugging.

picire (Hodován and Kiss's ddmin, maintained at renatahodovan/picire) finds a 1-minimal subset of a list for an
"is it still interesting" test, and its ParallelDD tests up to ``jobs`` subsets or complements of one split at a
time, each in a forked process, keeping the first that is interesting. What it reduces here is one level of the
statement tree (``statements.Script``): first the top-level statements, then the statements inside the compound
statements that are left, and so on down; then again from the top while a pass still removes something, as
HDD* does. A level's test is "the script without the statements of this level that are not in the subset (and
without everything removed before) is interesting".

The reducer stops on its own when a whole pass removes nothing, when the budget (seconds or runs) is spent (the
test then answers "not interesting" for every candidate it has not seen, so picire ends at once with the best it
has), or on Ctrl-C (the caller takes the best verdict on disk).
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.metadata
import sys
import time
import types
from collections.abc import Callable
from typing import Any

from reprobisect.minimize.statements import Script

__all__ = ["Budget", "Reduction", "reduce_statements"]


@dataclasses.dataclass(frozen=True)
class Budget:
    """When to stop: after ``seconds`` of reducing or ``runs`` executed runs (None: no limit)."""

    seconds: float | None = None
    runs: int | None = None

    def spent(self, started: float, runs: int) -> str | None:
        """Why the budget is spent, or None."""
        if self.seconds is not None and time.monotonic() - started >= self.seconds:
            return f"the time budget ({self.seconds:g} s)"
        if self.runs is not None and runs >= self.runs:
            return f"the run budget ({self.runs} runs)"
        return None


@dataclasses.dataclass(frozen=True)
class Reduction:
    """What the reducer kept: the removed statements, the passes it made and why it stopped."""

    removed: frozenset[int]
    passes: int
    stopped: str


def _picire() -> Any:
    """The picire package. Its newest release (21.8) reads its own version with ``pkg_resources``, which setuptools
    81 removed: where that module is gone, a stand-in answering that one call from ``importlib.metadata`` is in
    ``sys.modules`` while picire imports, and only then."""
    try:
        return importlib.import_module("picire")
    except ModuleNotFoundError as exc:
        if exc.name != "pkg_resources":
            raise
    stand_in = types.ModuleType("pkg_resources")
    stand_in.get_distribution = lambda name: types.SimpleNamespace(version=importlib.metadata.version(name))  # type: ignore[attr-defined]
    sys.modules["pkg_resources"] = stand_in
    try:
        return importlib.import_module("picire")
    finally:
        del sys.modules["pkg_resources"]


# ``interesting(removed)``: is the script without these statements still interesting? It may be called from forked
# processes (ParallelDD), so it keeps its answers where every process sees them (candidates.Tester does).
Interesting = Callable[[frozenset[int]], bool]


def reduce_statements(
    script: Script,
    interesting: Interesting,
    *,
    jobs: int = 1,
    pinned: frozenset[int] = frozenset(),
    spent: Callable[[], str | None] = lambda: None,
    on_level: Callable[[int, int, int], None] = lambda depth, units, passes: None,
) -> Reduction:
    """Remove statements level by level while the script stays interesting; ``pinned`` statements are never tried
    (the lines the original's failure passed through), ``spent`` says when the budget is gone (checked by the
    caller's ``interesting`` too), ``on_level(depth, units, pass)`` is told each level."""
    removed: frozenset[int] = frozenset()
    passes = 0
    while True:
        passes += 1
        before = removed
        for depth in range(script.depth + 1):
            level = script.level(depth, removed, pinned)
            if not level:
                continue
            on_level(depth, len(level), passes)
            removed = _reduce_level(level, removed, interesting, jobs)
            why = spent()
            if why:
                return Reduction(removed=removed, passes=passes, stopped=why)
        if removed == before:
            return Reduction(removed=removed, passes=passes, stopped="a whole pass removed nothing more")


def _reduce_level(level: list[int], removed: frozenset[int], interesting: Interesting, jobs: int) -> frozenset[int]:
    """One level's ddmin: the statements of ``level`` it keeps; the rest join ``removed``."""
    if len(level) < 2:  # ddmin keeps a single unit by definition; try removing it outright
        return removed | frozenset(level) if interesting(removed | frozenset(level)) else removed

    picire = _picire()

    def test(config: list[int], config_id: tuple[str, ...]) -> Any:
        without = removed | (frozenset(level) - frozenset(config))
        return picire.Outcome.FAIL if interesting(without) else picire.Outcome.PASS

    dd = picire.ParallelDD(test, proc_num=jobs) if jobs > 1 else picire.DD(test, cache=picire.ConfigCache())
    kept = list(dd(list(level)))
    if len(kept) == 1 and interesting(removed | frozenset(level)):
        kept = []  # ddmin never tries the empty subset: one statement left may be one too many
    return removed | (frozenset(level) - frozenset(kept))
