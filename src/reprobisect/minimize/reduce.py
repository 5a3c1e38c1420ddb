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

import contextlib
import dataclasses
import functools
import importlib
import importlib.metadata
import multiprocessing
import os
import signal
import sys
import threading
import types
from collections.abc import Callable, Iterator
from multiprocessing.managers import BaseManager
from typing import Any

from reprobisect.minimize.groups import Group
from reprobisect.minimize.statements import Script
from reprobisect.minimize.static import undefined_names, unused_definitions
from reprobisect.util.stop import in_parallel

__all__ = ["Reduction", "prune_unused", "reduce_groups", "reduce_statements", "split_for_jobs"]


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


def prune_unused(script: Script, removed: frozenset[int]) -> frozenset[int]:
    """``removed`` and every statement nothing uses once they are gone (an import whose names are all unused, a
    top-level function or class nothing names), again and again while that finds more; a statement whose removal
    would leave a name undefined (one of two imports on a line) stays."""
    while True:
        text, origins = script.text_with_origins(removed)
        lines = {origins[n - 1] for n in unused_definitions(text) if 0 < n <= len(origins)}
        more = sorted(script.starting_at(n for n in lines if n is not None) - removed)
        undefined = undefined_names(text) or frozenset()
        grown = removed
        for unit in more:
            after = undefined_names(script.text(grown | {unit}))
            if after is not None and after <= undefined:
                grown = grown | {unit}
        if grown == removed:
            return removed
        removed = grown


# ``interesting(removed)``: is the script without these statements still interesting? It may be called from forked
# processes (ParallelDD), so it keeps its answers where every process sees them (candidates.Tester does).
Interesting = Callable[[frozenset[int]], bool]


def reduce_statements(
    script: Script,
    interesting: Interesting,
    *,
    jobs: int = 1,
    initial: frozenset[int] = frozenset(),
    pinned: frozenset[int] = frozenset(),
    spent: Callable[[], str | None] = lambda: None,
    on_level: Callable[[int, int, int], None] = lambda depth, units, passes: None,
    groups: Callable[[frozenset[int]], list[Group]] | None = None,
) -> Reduction:
    """Remove statements level by level while the script stays interesting, from ``initial`` (already removed and
    known interesting); ``pinned`` statements are never tried (the lines the original's failure passed through),
    ``spent`` says when the budget is gone (checked by the caller's ``interesting`` too), ``on_level(depth, units,
    pass)`` is told each level (depth -1: the groups). ``groups(removed)``: statements that go together (see
    ``groups``), tried before the levels of each pass."""
    removed = initial
    passes = 0
    while True:
        passes += 1
        before = removed
        if groups is not None:
            on_level(-1, 0, passes)
            removed = reduce_groups(removed, interesting, groups, jobs=jobs, spent=spent)
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


def reduce_groups(
    removed: frozenset[int],
    interesting: Interesting,
    groups: Callable[[frozenset[int]], list[Group]],
    *,
    jobs: int = 1,
    spent: Callable[[], str | None] = lambda: None,
) -> frozenset[int]:
    """Remove whole groups while that stays interesting: ``jobs`` groups asked at a time, all the interesting ones
    kept when they are still interesting together (else the first, in the order ``groups`` gives), the groups
    recomputed on what is left; a group that was not interesting is not asked again in this pass."""
    tried: set[str] = set()
    while spent() is None:
        batch = [g for g in groups(removed) if g.word not in tried][: max(1, jobs)]
        if not batch:
            break
        answers = in_parallel(functools.partial(_group_interesting, interesting, removed), batch, max(1, jobs))
        tried.update(g.word for g, ok in zip(batch, answers, strict=True) if not ok)
        good = [g for g, ok in zip(batch, answers, strict=True) if ok]
        together = removed.union(*(g.units for g in good))
        if len(good) > 1 and interesting(together):  # settings seldom depend on each other: one run keeps them all
            removed = together
            tried.update(g.word for g in good)
        elif good:
            removed = removed | good[0].units
            tried.add(good[0].word)
    return removed


def split_for_jobs(subsets: list[list[int]], *, jobs: int) -> list[list[int]]:
    """ddmin's next granularity, never fewer pieces than ``jobs`` while the units allow it.

    picire's default split halves each piece, so a level starts with 2 pieces (2 candidates at once, then 4): with
    8 runs at a time and a GPU run of 20 s, 6 of 8 slots waited through the first rounds. Starting at ``jobs``
    pieces tries them all at once and skips the rounds that could not fill the slots; after that the pieces double
    as before. Pieces are as equal as the units allow (picire's ZellerSplit arithmetic)."""
    units = [unit for piece in subsets for unit in piece]
    count = min(len(units), max(2 * len(subsets), jobs))
    pieces, start = [], 0
    for i in range(count):
        stop = start + (len(units) - start) // (count - i)
        pieces.append(units[start:stop])
        start = stop
    return pieces


class _LevelCacheServer(BaseManager):
    """The server of one level's shared outcome cache: the level's own, started and stopped with it."""


@contextlib.contextmanager
def _parallel_level(picire: Any) -> Iterator[Any]:
    """A shared outcome cache for one parallel level, and no worker left once the level is done.

    Left to itself, ParallelDD shares one cache server per process, started once and never again: after a Ctrl-C
    ends every child of the harness (the server is one), the next reduction in that process (a nightly's second
    minimization, the test suite) dies on the server's socket. The workers still finishing when picire returns
    are waited for here, so none outlives its level."""
    shared = importlib.import_module("picire.shared_cache")
    if not hasattr(_LevelCacheServer, "ConfigCache"):
        constructor = shared.SharedCacheConstructor(picire.ConfigCache)
        _LevelCacheServer.register("ConfigCache", constructor, None, shared.SharedCacheConstructor._exposed)
    parent = os.getpid()
    before = set(multiprocessing.active_children())
    _FORKING_LEVEL.append(parent)
    try:
        with _LevelCacheServer() as server:
            try:
                yield server.ConfigCache()  # type: ignore[attr-defined]
            finally:
                if os.getpid() == parent:
                    for worker in set(multiprocessing.active_children()) - before - {server._process}:  # type: ignore[attr-defined]
                        worker.join(timeout=30)
    finally:
        _FORKING_LEVEL.remove(parent)


# The processes inside a parallel level (pids), for the fork hook below.
_FORKING_LEVEL: list[int] = []


_MASK = threading.local()  # the forking thread's signal mask before a level's fork, restored after it


def _block_sigterm_for_a_levels_fork() -> None:
    """Before a fork inside a parallel level: SIGTERM waits, so the child cannot receive it before it has given
    up the parent's handler (below)."""
    if os.getpid() in _FORKING_LEVEL:
        _MASK.previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})


def _restore_mask_in_the_level() -> None:
    if os.getpid() in _FORKING_LEVEL:
        signal.pthread_sigmask(signal.SIG_SETMASK, _MASK.previous)


def _plain_sigterm_in_a_levels_child() -> None:
    """A process forked inside a parallel level ends on SIGTERM as a plain process does, until its own code says
    otherwise (a candidate's run installs its handler when it starts).

    picire stops a worker with SIGTERM, which may come before the worker is past the fork; the harness's own
    handler, inherited, raised KeyboardInterrupt there instead, and the child unwound the copy of its parent's stack
    (the test suite's: a second pytest ran on in the child). SIGTERM is blocked across the fork: one that came
    during the other after-fork hooks (random's) ran that handler there, where the exception is dropped, and the
    stopped worker went on as if never told. Here it is delivered once the default action is back."""
    if os.getppid() in _FORKING_LEVEL:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, _MASK.previous)


os.register_at_fork(
    before=_block_sigterm_for_a_levels_fork,
    after_in_parent=_restore_mask_in_the_level,
    after_in_child=_plain_sigterm_in_a_levels_child,
)


def _group_interesting(interesting: Interesting, removed: frozenset[int], group: Group) -> bool:
    return interesting(removed | group.units)


def _reduce_level(level: list[int], removed: frozenset[int], interesting: Interesting, jobs: int) -> frozenset[int]:
    """One level's ddmin: the statements of ``level`` it keeps; the rest join ``removed``."""
    if len(level) < 2:  # ddmin keeps a single unit by definition; try removing it outright
        return removed | frozenset(level) if interesting(removed | frozenset(level)) else removed

    picire = _picire()

    def test(config: list[int], config_id: tuple[str, ...]) -> Any:
        without = removed | (frozenset(level) - frozenset(config))
        return picire.Outcome.FAIL if interesting(without) else picire.Outcome.PASS

    if jobs > 1:
        with _parallel_level(picire) as cache:
            dd = picire.ParallelDD(test, proc_num=jobs, cache=cache, split=functools.partial(split_for_jobs, jobs=jobs))
            kept = list(dd(list(level)))
    else:
        kept = list(picire.DD(test, cache=picire.ConfigCache())(list(level)))
    if len(kept) == 1 and interesting(removed | frozenset(level)):
        kept = []  # ddmin never tries the empty subset: one statement left may be one too many
    return removed | (frozenset(level) - frozenset(kept))
