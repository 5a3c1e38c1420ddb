"""A minimization's progress line every ``PROGRESS_EVERY`` seconds, read from the progress log every process
appends to (the reducer forks workers: the line comes from a process of its own).
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import signal
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

from reprobisect.minimize.candidates import read_log
from reprobisect.minimize.statements import Size
from reprobisect.util.echo import Echo

__all__ = ["PROGRESS_EVERY", "progress_lines", "progress_summary", "runs_executed"]

PROGRESS_EVERY = 15.0  # seconds between progress lines


def runs_executed(log: Path) -> int:
    """Runs executed so far, by every process (from the progress log)."""
    return sum(entry.runs for entry in read_log(log))


def progress_summary(log: Path, original: Size, runs_before: int, elapsed: float, level: Mapping[str, int]) -> str:
    """One progress line: the best size so far, runs and their rate, candidates, the level being reduced."""
    entries = read_log(log)
    best = min((e.size for e in entries if e.interesting), key=lambda size: size.tokens, default=original)
    best = best if best.tokens < original.tokens else original
    candidates, refused = len(entries), sum(1 for e in entries if not e.ran)
    runs = sum(e.runs for e in entries) - runs_before
    rate = runs / (elapsed / 60) if elapsed > 0 else 0.0
    where = ""
    if level and level.get("depth", 0) < 0:
        where = f" · settings and what uses them, pass {level['pass']}"
    elif level:
        where = f" · level {level['depth']} ({level['units']} statements), pass {level['pass']}"
    return (
        f"  {_clock(elapsed)}: best {best} (from {original.lines} lines, {original.tokens} tokens) · "
        f"{runs} runs, {rate:.1f} a minute · {candidates} candidates, {refused} refused unrun{where}"
    )


def _clock(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}m{secs:02d}s"


@contextlib.contextmanager
def progress_lines(log: Path, level_file: Path, original: Size, runs_before: int, echo: Echo) -> Iterator[None]:
    """A line every PROGRESS_EVERY seconds while the block runs, from a process of its own: the reducer forks
    workers, and a thread printing in the parent could hold a lock across a fork."""
    printer = multiprocessing.Process(
        target=_print_progress, args=(log, level_file, original, runs_before, echo), daemon=True
    )
    printer.start()
    try:
        yield
    finally:
        printer.terminate()
        printer.join(timeout=5)


def _print_progress(log: Path, level_file: Path, original: Size, runs_before: int, echo: Echo) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # the parent ends it with SIGTERM: no traceback, no KeyboardInterrupt
    started = time.monotonic()
    while True:
        time.sleep(PROGRESS_EVERY)
        level: dict[str, int] = {}
        with contextlib.suppress(OSError, ValueError):
            level = json.loads(level_file.read_text(encoding="utf-8"))
        echo(progress_summary(log, original, runs_before, time.monotonic() - started, level))
        sys.stdout.flush()  # a pipe buffers: the line is for now
