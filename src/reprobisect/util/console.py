"""What every line the harness prints to the terminal shares: the width it fits (``WIDTH``), text cut to a width
with "…" (``cut``), a count with its noun (``plural``), and a heartbeat that keeps a long phase from going silent.

They know nothing of records: the table and legend a session ends with are ``report/terminal.py``'s, the progress
lines of a matrix run ``run/units.py``'s.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator

from reprobisect.util.neutral import printable

__all__ = ["HEARTBEAT_SECONDS", "WIDTH", "cut", "heartbeat", "plural"]

WIDTH = 120
HEARTBEAT_SECONDS = 15.0


@contextlib.contextmanager
def heartbeat(echo: Callable[[str], None], what: str, every: float = HEARTBEAT_SECONDS) -> Iterator[None]:
    """While the block runs, say every ``every`` s that ``what`` is still going: no phase is silent for long."""
    done = threading.Event()
    start = time.perf_counter()

    def beat() -> None:
        while not done.wait(every):
            echo(f"  … {what}, {time.perf_counter() - start:.0f} s")

    thread = threading.Thread(target=beat, daemon=True, name="reprobisect-heartbeat")
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


def cut(text: str, width: int) -> str:
    """``text`` printable on one line, at most ``width`` characters, "…" marking a cut."""
    flat = " ".join(printable(text).split())
    return flat if len(flat) <= width else flat[: max(0, width - 1)] + "…"


def plural(n: int, noun: str) -> str:
    """``1 cell``, ``3 cells``: a count as a progress line says it."""
    return f"{n} {noun}" + ("" if n == 1 else "s")
