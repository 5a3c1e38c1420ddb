"""What every line the harness prints to the terminal shares: the width it fits (``WIDTH``), text cut to a width
with "…" (``cut``), a count with its noun (``plural``), a heartbeat that keeps a long phase from going silent, and
the terminal itself made inert (``neutral_terminal``): whatever a line holds, no escape sequence reaches it.

They know nothing of records: the table and legend a session ends with are ``report/terminal.py``'s, the progress
lines of a matrix run ``run/matrix_units.py``'s.
"""

from __future__ import annotations

import contextlib
import io
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TextIO

from reprobisect.util.neutral import printable
from reprobisect.util.redact import redact

__all__ = [
    "HEARTBEAT_SECONDS",
    "WIDTH",
    "NeutralStream",
    "cut",
    "heartbeat",
    "neutral_terminal",
    "plural",
    "redacted_terminal",
]

WIDTH = 120
HEARTBEAT_SECONDS = 15.0


@contextlib.contextmanager
def heartbeat(
    echo: Callable[[str], None], what: str | Callable[[], str], every: float = HEARTBEAT_SECONDS
) -> Iterator[None]:
    """While the block runs, say every ``every`` s that ``what`` is still going: no phase is silent for long.
    ``what`` may be a function, asked at each beat, for a phase whose state changes (the corpus's entries)."""
    done = threading.Event()
    start = time.perf_counter()

    def beat() -> None:
        while not done.wait(every):
            echo(f"  … {what() if callable(what) else what}, {time.perf_counter() - start:.0f} s")

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


class _RedactedStream:
    """A terminal stream that redacts (``util.redact``) every line before it passes it on. Text is held until its
    line ends or the stream is flushed, so a secret printed in pieces (``print(a, end="")``, then ``print(b)``) is
    seen whole; a line held longer than ``_HELD_CHARS`` goes out as it is."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.held = ""
        self.lock = threading.Lock()

    def write(self, text: str) -> int:
        with self.lock:
            self.held += text
            end = self.held.rfind("\n") + 1 if len(self.held) <= _HELD_CHARS else len(self.held)
            if end:
                ready, self.held = self.held[:end], self.held[end:]
                self.stream.write(redact(ready))
        return len(text)

    def flush(self) -> None:
        with self.lock:
            ready, self.held = self.held, ""
            if ready:
                self.stream.write(redact(ready))
        self.stream.flush()

    def __getattr__(self, name: str) -> Any:  # isatty, fileno, encoding, ...: the terminal's own
        return getattr(self.stream, name)


_HELD_CHARS = 1 << 16


@contextlib.contextmanager
def redacted_terminal() -> Iterator[None]:
    """While the block runs, every line on stdout and stderr is redacted of the user's secrets (and credentials
    in URLs), whoever prints it: the harness, a worker thread, a forked worker process."""
    saved = sys.stdout, sys.stderr
    shown = _RedactedStream(saved[0]), _RedactedStream(saved[1])
    sys.stdout, sys.stderr = shown
    try:
        yield
    finally:
        for stream in shown:
            with contextlib.suppress(OSError, ValueError):
                stream.flush()


class NeutralStream(io.TextIOBase):
    """A text stream that writes through ``util.neutral.printable``: escape sequences removed, other control
    characters shown as ``?``, newline and tab kept.

    Why one wrapper around stdout and stderr rather than trust in each line: text from outside reaches the terminal
    by many paths (a commit subject in a culprit line, a tag name, a script's argument in a Re-run line, a warning
    naming a file of a merged folder, a record's signature), and one path that forgets to neutralise would let an
    OSC sequence set the window title or write the clipboard (OSC 52), or a CSI clear the screen. The harness
    prints no colour of its own, so nothing it means to show is lost. An escape split over two writes loses its
    ESC byte as a control character: no ESC byte ever reaches the stream below.
    """

    def __init__(self, raw: TextIO) -> None:
        super().__init__()
        self._raw = raw

    @property
    def raw(self) -> TextIO:
        """The stream written to."""
        return self._raw

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self._raw.write(printable(text))
        return len(text)

    def flush(self) -> None:
        self._raw.flush()

    def isatty(self) -> bool:
        return self._raw.isatty()

    def fileno(self) -> int:
        return self._raw.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]  # io.TextIOBase's is a read-only attribute
        return getattr(self._raw, "encoding", None) or "utf-8"


@contextlib.contextmanager
def neutral_terminal() -> Iterator[None]:
    """While the block runs, ``sys.stdout`` and ``sys.stderr`` are :class:`NeutralStream` s over what they were;
    restored after, whatever ends the block (an error, ``SystemExit`` from argparse, Ctrl-C)."""
    saved = sys.stdout, sys.stderr
    sys.stdout = NeutralStream(saved[0]) if not isinstance(saved[0], NeutralStream) else saved[0]
    sys.stderr = NeutralStream(saved[1]) if not isinstance(saved[1], NeutralStream) else saved[1]
    try:
        yield
    finally:
        with contextlib.suppress(OSError, ValueError):
            sys.stdout.flush()
            sys.stderr.flush()
        sys.stdout, sys.stderr = saved
