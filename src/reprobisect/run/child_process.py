"""Run one child process: own process group, explicit environment, timeout, log file.

The runner knows nothing of DeepSpeed: it works for any script. On timeout it escalates SIGINT →
SIGTERM → SIGKILL on the whole process group (SIGINT first, so Python prints where it was stuck),
and after any exit it kills whatever the child left behind in its group.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import IO, BinaryIO

from reprobisect.errors import StorageError
from reprobisect.model.signature import EVENT_MARK
from reprobisect.run.affinity import PinAtFirstStep
from reprobisect.run.events import MAX_EVENT_LINE
from reprobisect.run.oom import KillCause, OomWatch
from reprobisect.run.watch import RunWatch, peak_rss
from reprobisect.util.clock import utc_now
from reprobisect.util.redact import StreamRedactor
from reprobisect.util.stop import POLL_SECONDS, stop_requested

__all__ = ["STATUS_FD", "ChildResult", "ChildSpec", "run_child"]

_KEPT_EVENT_BYTES = 2 * 2**20  # event lines kept from a capped log's dropped middle, at most
_SIGNAL_EXIT_BASE = 128  # bubblewrap (and a shell) report "killed by signal N" as exit status 128 + N
STATUS_FD = "REPROBISECT_STATUS_FD"  # names the waiter's status pipe (run/child/waiter.py)


@dataclasses.dataclass(frozen=True, kw_only=True)
class ChildSpec:
    """Everything needed to start one child; argv is a list, never a shell string."""

    argv: tuple[str, ...]
    env: Mapping[str, str]
    cwd: Path
    log_path: Path
    timeout: float
    grace: float = 5.0
    log_head_bytes: int = 8 * 2**20
    log_tail_bytes: int = 2 * 2**20
    # Called with the seconds elapsed every ``heartbeat_every`` s while the child runs: a long run is never silent.
    heartbeat: Callable[[float], None] | None = None
    heartbeat_every: float = 15.0
    # Cores the child and all it started are pinned to once it reports its first step (run/affinity.py: start-up
    # runs on every core, the timed steps on the run's own); () leaves it to the scheduler. See units.job_cpus.
    cpus: tuple[int, ...] = ()
    # The child is run/child/waiter.py (inside a sandbox): it reports the run's own wait status on a pipe.
    waited: bool = False


@dataclasses.dataclass(frozen=True, kw_only=True)
class ChildResult:
    """What happened: exit status (negative = signal, also inside the sandbox where its waiter measured one),
    whether it timed out, and how long it took."""

    exit_code: int | None
    timed_out: bool
    wall_seconds: float
    started_at: str
    finished_at: str
    log_path: Path
    spawned: float = 0.0  # seconds since the epoch (time.time, the clock a run's own profile uses): started
    exited: float = 0.0  # and waited for (its output read)
    # measured by the harness, never printed by the run: the largest process's peak RSS (os.wait4) and how
    peak_rss_bytes: int | None = None
    rss_source: str | None = None
    gpu_peak_bytes: int | None = None  # the run's processes together, sampled (run/watch.py); None without a GPU
    gpu_source: str | None = None
    kill: KillCause | None = None  # what the kernel says of the OOM killer's part (run/oom.py)
    # the sandbox's private /tmp as the run ended, by its waiter: (bytes left, size); None unconfined or unread
    tmp_space: tuple[int, int] | None = None


def _signal_group(pgid: int, sig: int) -> bool:
    """Send ``sig`` to a process group; False when the group no longer exists."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    except PermissionError:
        return False
    return True


class _Reaper:
    """Waits for the child as ``Popen.wait`` does, but reaps it with ``os.wait4``, whose resource usage
    ``Popen`` throws away: ``ru_maxrss`` is the peak RSS of the largest process of the child's tree that was
    waited for (the run's own accounting, as the kernel keeps it; nothing the run prints)."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self.process = process
        self.maxrss_kib: int | None = None

    def wait(self, timeout: float | None = None) -> None:
        """Return once the child is reaped; ``subprocess.TimeoutExpired`` after ``timeout`` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        delay = 0.0005
        while self.process.returncode is None:
            try:
                pid, status, usage = os.wait4(self.process.pid, os.WNOHANG)
            except ChildProcessError:  # reaped elsewhere: Popen knows how to say so
                self.process.wait()
                return
            if pid:
                self.process.returncode = os.waitstatus_to_exitcode(status)
                self.maxrss_kib = usage.ru_maxrss
                return
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise subprocess.TimeoutExpired(self.process.args, timeout or 0)
            delay = min(delay * 2, 0.05, remaining if remaining is not None else 0.05)
            time.sleep(delay)


def _stop_group(reaper: _Reaper, grace: float) -> None:
    """SIGINT, then SIGTERM, then SIGKILL to the child's whole group, waiting ``grace`` between."""
    process = reaper.process
    for sig in (signal.SIGINT, signal.SIGTERM):
        if not _signal_group(process.pid, sig):
            break
        with contextlib.suppress(subprocess.TimeoutExpired):
            reaper.wait(timeout=grace)
            break
    _signal_group(process.pid, signal.SIGKILL)
    reaper.wait()


class _CappedLog:
    """Copies a child's output into its log: the first ``head`` bytes, then only the last ``tail`` bytes.

    A repro that floods its output cannot fill the disk, and the traceback at the end (what the run is
    classified by) is kept. ``@@repro`` event lines from the dropped middle are kept too, within a budget
    of their own (``MAX_EVENT_LINE`` bytes a line, ``_KEPT_EVENT_BYTES`` in all), so no kind of line escapes
    the cap. Work is linear in the output: a line without a newline is never re-joined past that length.
    """

    def __init__(self, log: BinaryIO, head: int, tail: int) -> None:
        self.log, self.head, self.tail = log, head, tail
        self.written = 0
        self.dropped = 0
        self.kept_events: list[bytes] = []
        self.kept_bytes = 0
        self.dropped_events = 0
        self.buffer = bytearray()
        self.partial = b""
        self.skipping = False  # inside a dropped line longer than any event line: discard up to its newline
        self.write_error = ""

    def feed(self, chunk: bytes) -> None:
        room = self.head - self.written
        if room > 0 and not self.write_error:
            try:
                self.log.write(chunk[:room])
            except OSError as exc:  # disk full: keep draining the pipe so the child never blocks on it
                self.write_error = str(exc)
            self.written += min(room, len(chunk))
            chunk = chunk[room:]
        if not chunk:
            return
        self.buffer += chunk
        if len(self.buffer) > self.tail:
            overflow = bytes(self.buffer[: len(self.buffer) - self.tail])
            del self.buffer[: len(overflow)]
            self.dropped += len(overflow)
            self._scan_dropped(overflow)

    def _scan_dropped(self, overflow: bytes) -> None:
        """Keep the event lines of output that leaves the tail window; bounded work and memory per byte."""
        lines = overflow.split(b"\n")
        last = lines.pop()
        if lines:
            first = lines[0]
            lines[0] = b"" if self.skipping else self.partial + first
            self.partial, self.skipping = b"", False
        else:
            last = b"" if self.skipping else self.partial + last
            self.partial = b""
        for line in lines:
            self._keep(line)
        if len(last) > MAX_EVENT_LINE:
            self.skipping = True  # too long to be an event line: its rest is dropped unread
        else:
            self.partial = last

    def _keep(self, line: bytes) -> None:
        if EVENT_MARK.encode() not in line:
            return
        if len(line) > MAX_EVENT_LINE or self.kept_bytes + len(line) > _KEPT_EVENT_BYTES:
            self.dropped_events += 1
            return
        self.kept_events.append(line)
        self.kept_bytes += len(line) + 1

    def close(self) -> None:
        try:
            self._finish()
        except OSError as exc:
            self.write_error = self.write_error or str(exc)

    def _finish(self) -> None:
        if self.partial and not self.skipping:  # a line cut by the tail window's start: join its two halves
            end = self.buffer.find(b"\n")
            line = self.partial + bytes(self.buffer if end < 0 else self.buffer[:end])
            if len(line) <= MAX_EVENT_LINE:
                self._keep(line)
        if self.dropped:
            note = f"\n[reprobisect: {self.dropped} bytes of output dropped here; log capped"
            if self.dropped_events:
                note += f"; {self.dropped_events} event lines over the events' budget dropped too"
            self.log.write(f"{note}]\n".encode())
            self.log.write(b"\n".join(self.kept_events) + b"\n")
        self.log.write(bytes(self.buffer))
        self.log.flush()

    def pump(self, stream: IO[bytes], watch: Callable[[bytes], None] | None = None) -> None:
        """Copy the child's output until it ends, every secret the user handed over redacted before it is kept
        (so no log, event, signature or report line of the run carries one), across chunk boundaries too."""
        redactor = StreamRedactor()
        for chunk in iter(lambda: os.read(stream.fileno(), 65536), b""):
            self.feed(redactor.feed(chunk))
            if watch is not None:
                watch(chunk)
        self.feed(redactor.finish())


def _open_log(path: Path) -> BinaryIO:
    """The run's log, unbuffered (a full disk fails a write, never the close); a StorageError when it cannot be."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        return path.open("wb", buffering=0)
    except OSError as exc:
        msg = f"{path}: cannot create the run's log ({exc.strerror or exc}); nothing was started"
        raise StorageError(msg) from exc


def _start(spec: ChildSpec, status_write: int) -> subprocess.Popen[bytes]:
    """The child in a process group of its own, its output on one pipe, the waiter's status descriptor passed."""
    return subprocess.Popen(
        list(spec.argv),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**spec.env, **({STATUS_FD: str(status_write)} if spec.waited else {})},
        cwd=spec.cwd,
        start_new_session=True,
        pass_fds=(status_write,) if spec.waited else (),
    )


def run_child(spec: ChildSpec) -> ChildResult:
    """Start the child, wait for it (or its timeout), and leave no process of its group behind.

    If the harness itself is interrupted (KeyboardInterrupt), the child's group is stopped before the
    interrupt propagates, so Ctrl-C never leaves a training process running.
    """
    log_file = _open_log(spec.log_path)
    started_at = utc_now()
    start = time.perf_counter()
    spawned = time.time()
    timed_out = False
    oom = OomWatch()  # before the child starts: the kernel's OOM counters and log from here on
    with log_file as log, _status_pipe(spec.waited) as (status_read, status_write), contextlib.closing(oom):
        process = _start(spec, status_write)
        assert process.stdout is not None
        capped = _CappedLog(log, spec.log_head_bytes, spec.log_tail_bytes)
        pin = PinAtFirstStep(process.pid, spec.cpus)
        reader = threading.Thread(target=capped.pump, args=(process.stdout, pin), daemon=True)
        reader.start()
        watch = RunWatch(process.pid, pids=oom.kmsg is not None)
        reaper = _Reaper(process)
        try:
            _wait(reaper, spec, start)
        except subprocess.TimeoutExpired:
            timed_out = True
            _stop_group(reaper, spec.grace)
        except BaseException:
            _stop_group(reaper, min(spec.grace, 2.0))
            raise
        finally:
            seen = watch.stop()
            _signal_group(process.pid, signal.SIGKILL)  # grandchildren left in the group
            reader.join(timeout=10)  # a grandchild that left the group may hold the pipe: do not wait for it
            capped.close()
            process.stdout.close()
        status = _waiter_status(status_read)
        exit_code = None if timed_out else _measured(process.returncode, status)
        kill = oom.finish(seen.pids | _run_pid(status, process.pid))
    rss, rss_source = peak_rss(reaper.maxrss_kib, status, waited=spec.waited)
    wall = time.perf_counter() - start
    return ChildResult(
        exit_code=exit_code,
        timed_out=timed_out,
        wall_seconds=wall,
        started_at=started_at,
        finished_at=utc_now(),
        log_path=spec.log_path,
        spawned=spawned,
        exited=spawned + wall,
        peak_rss_bytes=rss,
        rss_source=rss_source,
        gpu_peak_bytes=seen.gpu_peak_bytes,
        gpu_source=seen.gpu_source,
        kill=kill,
        tmp_space=_tmp_space(status),
    )


def _tmp_space(status: dict[str, object]) -> tuple[int, int] | None:
    """The waiter's reading of the sandbox's /tmp: (bytes left, size), or None where it gave none that makes sense."""
    free, size = status.get("tmp_free"), status.get("tmp_size")
    if type(free) is int and type(size) is int and 0 <= free <= size:
        return free, size
    return None


def _run_pid(status: dict[str, object], child: int) -> set[int]:
    """The run's pid as its waiter gave it, where the waiter shares the harness's pid namespace (it is the
    harness's own child, not one inside a sandbox), so the kernel log's pids are the same numbers."""
    pid, waiter = status.get("pid"), status.get("waiter")
    return {pid} if type(pid) is int and pid > 1 and waiter == child else set()


@contextlib.contextmanager
def _status_pipe(waited: bool) -> Iterator[tuple[int, int]]:
    """A pipe for the waiter's report (read end, write end), or (-1, -1) when the run has no waiter."""
    if not waited:
        yield -1, -1
        return
    read, write = os.pipe()  # not inheritable: only the waiter gets the write end (pass_fds)
    try:
        yield read, write
    finally:
        os.close(read)
        os.close(write)


def _waiter_status(status_read: int) -> dict[str, object]:
    """What the sandbox's waiter wrote on its status pipe (run/child/waiter.py), {} when nothing readable."""
    if status_read < 0:
        return {}
    os.set_blocking(status_read, False)  # the waiter wrote before it exited (or never will): never wait for it
    try:
        text = os.read(status_read, 256)
        status = json.loads(text) if text else None
    except (OSError, ValueError, RecursionError):
        return {}
    return status if isinstance(status, dict) else {}


def _measured(returncode: int, status: dict[str, object]) -> int:
    """The child's status, with a death by signal as -N also inside the sandbox.

    bubblewrap reports a run killed by signal N as exit status 128+N. The waiter (run/child/waiter.py) reads the
    run's own wait status and writes it to the status pipe; it is believed only where it agrees with that status,
    so nothing the run writes there can turn a failure into a PASS or one code into another.
    """
    if returncode <= _SIGNAL_EXIT_BASE:
        return returncode
    signal_number = status.get("signal")
    if type(signal_number) is int and returncode == _SIGNAL_EXIT_BASE + signal_number:
        return -signal_number
    return returncode


def _wait(reaper: _Reaper, spec: ChildSpec, start: float) -> None:
    """Wait for the child until ``spec.timeout``, calling the heartbeat between slices of the wait; a stop of
    ``util.stop.stoppable_children`` in another thread is an interrupt here."""
    deadline = start + spec.timeout
    last_beat = start
    while True:
        if stop_requested():
            raise KeyboardInterrupt
        now = time.perf_counter()
        remaining = deadline - now
        if remaining <= 0:
            raise subprocess.TimeoutExpired(reaper.process.args, spec.timeout)
        try:
            reaper.wait(timeout=min(remaining, POLL_SECONDS, spec.heartbeat_every))
        except subprocess.TimeoutExpired:
            now = time.perf_counter()
            if spec.heartbeat is not None and now < deadline and now - last_beat >= spec.heartbeat_every:
                last_beat = now
                spec.heartbeat(now - start)
            continue
        return
