"""Stopping the children that worker threads wait for, when the user stops the harness.

With ``--jobs`` > 1 the runs and the cell builds wait in worker threads, but a KeyboardInterrupt (Ctrl-C, SIGTERM, a
``timeout``'s SIGINT) reaches the main thread only: each worker would go on waiting for its child's own end, up to its
timeout (seen on the H200: a matrix killed 30 s after its SIGINT; a Ctrl-C during the cell builds went on to build
every queued cell). Inside ``stoppable_children`` an interrupt sets one flag that every waiting loop — a repro run's
(``run.runner``) and a tool's (``util.cmd``) — checks between short slices of its wait.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar

__all__ = ["POLL_SECONDS", "in_parallel", "stop_requested", "stoppable_children"]

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
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=jobs)
    try:
        # on an interrupt: cancel the units not started, wait for the running ones to stop their children
        with stoppable_children(on_interrupt=lambda: pool.shutdown(wait=True, cancel_futures=True)):
            return list(pool.map(run, units))
    finally:
        pool.shutdown(wait=True)
