"""A line when a slow test starts, and one every 15 s while it runs: no part of a test run is silent for long.

pytest prints a test's result after it ends, and a slow test (``pytest.mark.slow``) takes minutes. This
plugin prints ``slow test started: <nodeid>`` before one starts, then ``… <nodeid> still running, 45 s``
every ``heartbeat_interval`` seconds (ini option, default 15; 0 turns it off) until it ends; other tests get
nothing extra.

While a test runs, pytest's capture has fd 1 pointing at a capture file, so a line written to sys.stdout
then would land in the test's captured output. The lines go to a duplicate of fd 1 taken in
``pytest_configure``, when capture is suspended: the terminal or pipe pytest writes to. Each line is one
``os.write``, so a pipe (CI) gets it at once and whole. The thread writes only while a phase of the test
(setup, call, teardown) runs, never while pytest reports, and breaks pytest's current line first when it
is not empty. Under xdist each worker prints for its own tests, ``[gw0] `` first, to its stderr (execnet
sends a worker's fd 1 to /dev/null; its stderr is pytest's).
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Generator
from pathlib import Path

import pytest

INI = "heartbeat_interval"
NAME = "reprobisect-heartbeat"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(INI, "seconds between the 'still running' lines of a slow test (0: none)", default="15")


def pytest_configure(config: pytest.Config) -> None:
    if config.pluginmanager.has_plugin(NAME):
        return
    worker = getattr(config, "workerinput", None)  # an xdist worker: execnet sent its fd 1 to /dev/null
    try:
        interval = float(config.getini(INI))
        fd = os.dup(2 if worker else 1)
    except (ValueError, OSError):
        return
    beat = Heartbeat(config, fd, interval, prefix=f"[{worker['workerid']}] " if worker else "")
    config.pluginmanager.register(beat, NAME)
    config.add_cleanup(beat.close)


class Heartbeat:
    """Hooks and the one writer thread; ``_lock`` orders the thread's writes with the test's phases."""

    def __init__(self, config: pytest.Config, fd: int, interval: float, *, prefix: str = "") -> None:
        self._config = config
        self._fd = fd
        self._prefix = prefix
        self._interval = interval
        self._encoding = getattr(sys.stdout, "encoding", None) or "utf-8"
        self._lock = threading.Condition()
        self._test: tuple[str, float] | None = None  # the slow test running: node id, start (monotonic)
        self._in_phase = False  # inside its setup, call or teardown: the thread may write
        self._resume: Path | str | None = None  # pytest's line, cut by ours, to write again before the result
        self._fresh_line = False  # ours was the last line written: the terminal is at the start of a line
        self._beats = 0
        self._closed = False
        self._thread: threading.Thread | None = None

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Generator[None, object, object]:
        # a test marked skip (a missing system tool, say) does not run: nothing to say about it
        slow = item.get_closest_marker("slow") is not None and item.get_closest_marker("skip") is None
        if slow:
            with self._lock:
                self._test, self._beats = (item.nodeid, time.monotonic()), 0
        try:
            return (yield)
        finally:
            if slow:
                with self._lock:
                    self._test, self._resume = None, None

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logstart(self, nodeid: str) -> None:
        if self._test is None or self._test[0] != nodeid:
            return
        reporter = self._config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            # pytest's line (the file name and earlier results, or this test's location under -v) ends here;
            # it is written again before this test's result, which then follows it as usual
            current = reporter.currentfspath
            if current:
                reporter.ensure_newline()
                self._resume = current if isinstance(current, (str, Path)) else None
            elif self._config.get_terminal_writer().width_of_current_line:  # -q: a line of results, no file name
                self._config.get_terminal_writer().line()
            reporter.flush()
        self._write(f"slow test started: {nodeid}")

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "call" and report.passed:
            return  # a passed setup or teardown prints nothing
        self._fresh_line = False  # pytest writes this report's result
        reporter = self._config.pluginmanager.get_plugin("terminalreporter")
        if self._resume is None or reporter is None:
            return
        line = self._resume
        reporter.write(line if isinstance(line, str) else f"{os.path.relpath(line, reporter.startpath)} ")
        reporter.currentfspath = line
        self._resume = None

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_setup(self) -> Generator[None, object, object]:
        return (yield from self._phase())

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self) -> Generator[None, object, object]:
        return (yield from self._phase())

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_teardown(self) -> Generator[None, object, object]:
        return (yield from self._phase())

    def _phase(self) -> Generator[None, object, object]:
        if self._test is None or self._interval <= 0:
            return (yield)
        with self._lock:
            self._in_phase = True
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=NAME, daemon=True)
                self._thread.start()
            self._lock.notify()
        try:
            return (yield)
        finally:
            with self._lock:  # waits for a line being written: pytest's report comes after it
                self._in_phase = False

    def _run(self) -> None:
        with self._lock:
            while not self._closed:
                if self._test is None or not self._in_phase:
                    self._lock.wait()
                    continue
                nodeid, start = self._test
                due = start + (self._beats + 1) * self._interval
                now = time.monotonic()
                if now < due:
                    self._lock.wait(due - now)
                    continue
                self._beats = int((now - start) // self._interval)
                self._break_line()
                self._write(f"… {nodeid} still running, {self._beats * self._interval:g} s")

    def _break_line(self) -> None:
        """Start on a new line when pytest's current one holds text (a teardown outlasting the result)."""
        reporter = self._config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None or self._resume is not None or self._fresh_line:
            return
        if reporter.currentfspath or self._config.get_terminal_writer().width_of_current_line:
            self._write("")
            reporter.currentfspath = None  # pytest then starts its next output on a new line

    def _write(self, line: str) -> None:
        with contextlib.suppress(OSError):  # a closed terminal or pipe: the run goes on without these lines
            os.write(self._fd, f"{self._prefix if line else ''}{line}\n".encode(self._encoding, errors="replace"))
        self._fresh_line = True

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._lock.notify()
        if self._thread is not None:
            self._thread.join(timeout=5)
        os.close(self._fd)
