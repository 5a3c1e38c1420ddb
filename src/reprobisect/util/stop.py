"""Stopping the children that worker threads wait for, when the user stops the harness.

With ``--jobs`` > 1 the runs and the cell builds wait in worker threads, but a KeyboardInterrupt (Ctrl-C, SIGTERM, a
``timeout``'s SIGINT) reaches the main thread only: each worker would go on waiting for its child's own end, up to its
timeout (seen on the H200: a matrix killed 30 s after its SIGINT; a Ctrl-C during the cell builds went on to build
every queued cell). Inside ``stoppable_children`` an interrupt sets one flag that every waiting loop — a repro run's
(``run.child_process``) and a tool's (``util.cmd``) — checks between short slices of its wait.
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar

__all__ = ["POLL_SECONDS", "in_parallel", "in_parallel_growing", "stop_requested", "stoppable_children"]

_T = TypeVar("_T")
_R = TypeVar("_R")

POLL_SECONDS = 0.25  # how soon a child waited for in another thread hears the stop

_STOP = threading.Event()


def stop_requested() -> bool:
    """True while an interrupt inside ``stoppable_children`` is being handled: stop the child, raise the interrupt."""
    return _STOP.is_set()


@contextlib.contextmanager
def stoppable_children(on_interrupt: Callable[[], None] = lambda: None) -> Iterator[None]:
    """An interrupt inside this block makes every child waited for in another thread stop at once (its process
    group killed) and raise the interrupt there too (no record is made for a stopped run); ``on_interrupt`` waits
    for those threads (and cancels queued work) before the interrupt propagates. Outside the block, children are
    never stopped this way."""
    _STOP.clear()
    try:
        yield
    except KeyboardInterrupt:
        _STOP.set()
        on_interrupt()
        raise
    finally:
        _STOP.clear()


def in_parallel(run: Callable[[_T], _R], units: Sequence[_T], jobs: int) -> list[_R]:
    """``run`` over ``units`` (runs, cell builds), ``jobs`` at a time, in order; on an interrupt every running
    child is stopped and no further unit starts (see ``stoppable_children``)."""
    with _stoppable_pool(jobs) as pool:
        return list(pool.map(run, units))


@contextlib.contextmanager
def _stoppable_pool(jobs: int) -> Iterator[concurrent.futures.ThreadPoolExecutor]:
    """A pool of ``jobs`` threads inside ``stoppable_children``: on an interrupt the units not started are
    cancelled and the running ones stop their children; the pool is always waited for."""
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=jobs)
    try:
        with stoppable_children(on_interrupt=lambda: pool.shutdown(wait=True, cancel_futures=True)):
            yield pool
    finally:
        pool.shutdown(wait=True)


def in_parallel_growing(
    run: Callable[[_T], _R], first: Sequence[_T], jobs: int, then: Callable[[_T, _R], Sequence[_T]]
) -> list[tuple[_T, _R]]:
    """``run`` over ``first`` and over the units ``then(unit, result)`` adds as each one finishes, ``jobs`` at a
    time; each unit with its result, in the order they finished. ``then`` is called in the calling thread, one
    finished unit at a time. What it adds starts before the units of ``first`` not started yet: it waited for
    the unit that released it (a patched run for its unpatched ones) and must not wait for the whole list too.
    Interrupts as ``in_parallel``.

    Why: patched runs used to start only after every unpatched run of the matrix; on two cores the last one then
    ran alone, one core idle for its 7 s (a newcomer's first ``nox -s repro_gan``)."""
    queue: collections.deque[_T] = collections.deque(first)
    finished: list[tuple[_T, _R]] = []
    if jobs <= 1:
        while queue:
            unit = queue.popleft()
            result = run(unit)
            finished.append((unit, result))
            queue.extendleft(reversed(then(unit, result)))
        return finished
    running: dict[concurrent.futures.Future[_R], _T] = {}
    with _stoppable_pool(jobs) as pool:
        while queue or running:
            while queue and len(running) < jobs:
                unit = queue.popleft()
                running[pool.submit(run, unit)] = unit
            done, _ = concurrent.futures.wait(running, return_when=concurrent.futures.FIRST_COMPLETED)
            for future in done:
                unit = running.pop(future)
                result = future.result()
                finished.append((unit, result))
                queue.extendleft(reversed(then(unit, result)))
    return finished
