"""Corpus entries side by side, each in a process of its own, and a crashed entry as a row, not the end of the run.

Why a process per entry (started with ``spawn``, nothing inherited but what is passed): an entry's triage prints its
progress, tables and answer to stdout, pins its runs to cores by the cores the process may use, and counts its own
work (``util/tally.py``); in a process of its own each of those is the entry's alone — its lines go to its own log
(``<out>/<entry>/corpus-entry.log``) when several run at once, its cores are a share of the machine's
(``os.sched_setaffinity``), its tally is its own — and whatever kills it (an exception out of its triage, a
segfault, the OOM killer) ends that entry only: the row says so and the other entries go on. The caches entries
share (cells, ops, kept wheels, byte code, the harness's clones) are each built once under a ``flock``, whoever
comes first.

A performance entry (``[slowdown]``) times its steps, so it runs alone, after the others, with every core: a
neighbour's runs would be its noise.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import multiprocessing
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection
from pathlib import Path

from reprobisect.corpus.scoring import ColumnVerdict, Row
from reprobisect.corpus.table import Ran
from reprobisect.corpus.truth_model import Truth
from reprobisect.util import tally
from reprobisect.util.console import heartbeat, neutral_terminal, redacted_terminal

__all__ = ["LOG", "default_entry_jobs", "failed_row", "run_entries"]

LOG = "corpus-entry.log"
_STOP_GRACE = 30.0  # seconds an entry's process gets to stop its runs after SIGTERM, before SIGKILL

RunOne = Callable[[Truth], Row]
Done = Callable[[str, Ran], None]  # told each entry's row as it comes (the partial table: commands/corpus.py)


def default_entry_jobs(entries: int, cores: int | None = None) -> int:
    """Half the cores, at most one per entry, at least one: each entry then has two cores, which one DeepSpeed op
    compile or one run with its gloo threads keeps busy (docs/development.md: two probes at a time on two cores
    gained 15 %, not half); more entries than that would only share cores, and their op builds slow each other."""
    have = cores if cores is not None else len(os.sched_getaffinity(0))
    return max(1, min(have // 2, entries))


def failed_row(name: str, why: str, seconds: float) -> Row:
    """A triage that did not answer is a wrong row, saying why (never a hidden one): every verdict column wrong."""
    wrong = ColumnVerdict(ok=False, truth="an answer", found=why[:400])
    return Row(
        entry=name,
        seconds=seconds,
        ranges=wrong,
        introduced=wrong,
        fixed=wrong,
        signature=wrong,
        changed=wrong,
        rule=wrong,  # an interaction's columns too
        edges=wrong,
    )


def _stop(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # SIGTERM from the corpus: the path of Ctrl-C, the entry's runs stopped


def _child(
    truth: Truth, run_one: RunOne, send: Connection, log: Path | None, cpus: Sequence[int], argv: list[str]
) -> None:
    """An entry's process: its cores, its log, its own tally; the row (or the crash) goes back through ``send``."""
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    if cpus:
        os.sched_setaffinity(0, cpus)
    if log is not None:
        log.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o666)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
    tally.reset()
    with redacted_terminal(), neutral_terminal():
        # imported here: the corpus command imports this module, and options imports the rest of the harness
        from reprobisect.commands.options import register_argv_secrets

        register_argv_secrets(argv)
        start = time.monotonic()
        try:
            send.send(("row", run_one(truth), dict(tally.snapshot())))
        except KeyboardInterrupt:
            sys.exit(130)
        except Exception as exc:  # any exception out of a triage is the entry's crash, said in its row
            traceback.print_exc()
            why = f"{type(exc).__name__}: {str(exc)[:300]}"
            send.send(("crashed", failed_row(truth.name, f"crashed: {why}", time.monotonic() - start), why))


@dataclasses.dataclass
class _Entries:
    """The live processes and the progress of one corpus run: what the heartbeat says, what an interrupt stops."""

    total: int
    done: int = 0
    running: dict[str, float] = dataclasses.field(default_factory=dict)  # entry → start (monotonic)
    processes: list[multiprocessing.process.BaseProcess] = dataclasses.field(default_factory=list)
    lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)

    def said(self) -> str:
        with self.lock:
            now = time.monotonic()
            running = ", ".join(f"{name} ({now - t:.0f} s)" for name, t in self.running.items())
        return f"corpus: {self.done} of {self.total} entries done; running {running or 'none'}"

    def stop(self) -> None:
        """SIGTERM to every live entry (its runs stop, its records stay), SIGKILL after a grace."""
        with self.lock:
            alive = [p for p in self.processes if p.is_alive()]
        for process in alive:
            process.terminate()
        deadline = time.monotonic() + _STOP_GRACE
        for process in alive:
            process.join(max(0.0, deadline - time.monotonic()))
            if process.is_alive():
                process.kill()


def _run_in_process(truth: Truth, run_one: RunOne, entries: _Entries, log: Path | None, cpus: Sequence[int]) -> Ran:
    """One entry in its own process; a process that ends without a row is a crashed row naming how it ended."""
    spawn = multiprocessing.get_context("spawn")
    receive, send = spawn.Pipe(duplex=False)
    start = time.monotonic()
    with entries.lock:
        entries.running[truth.name] = start
    try:
        process = spawn.Process(
            target=_child, args=(truth, run_one, send, log, list(cpus), sys.argv[1:]), name=f"corpus {truth.name}"
        )
        with entries.lock:
            entries.processes.append(process)
        process.start()
        send.close()
        try:
            kind, row, extra = receive.recv()
        except EOFError:
            process.join()
            why = f"its process ended with {_ended(process.exitcode)} before it answered"
            return Ran(row=failed_row(truth.name, why, time.monotonic() - start), crashed=why)
        process.join()
    finally:
        receive.close()
        with entries.lock:
            entries.running.pop(truth.name, None)
            entries.done += 1
    if kind == "crashed":
        return Ran(row=row, crashed=str(extra))
    return Ran(row=row, spent=extra)


def _ended(code: int | None) -> str:
    if code is None:
        return "no exit status"
    return f"signal {-code}" if code < 0 else f"exit {code}"


def _slots(jobs: int) -> list[list[int]]:
    """The cores of each of ``jobs`` slots: the cores this process may use, cut in equal shares."""
    allowed = sorted(os.sched_getaffinity(0))
    jobs = max(1, min(jobs, len(allowed)))
    share = len(allowed) // jobs
    return [allowed[i * share : (i + 1) * share] for i in range(jobs)]


def _wave(
    truths: Sequence[Truth], run_one: RunOne, entries: _Entries, jobs: int, out: Path, done: Done
) -> dict[str, Ran]:
    """``truths``, ``jobs`` at a time, each on its share of the cores; with one at a time its lines reach the
    terminal as they come, with more each entry's go to its log. ``done`` hears each row as it comes."""
    free = _slots(jobs)
    jobs = len(free)
    lock = threading.Lock()

    def one(truth: Truth) -> Ran:
        with lock:
            cpus = free.pop()
        log = out / truth.name / LOG if jobs > 1 else None
        if log is not None:
            print(f"== corpus entry {truth.name}: started; its lines go to {log}", flush=True)
        try:
            ran = _run_in_process(truth, run_one, entries, log, cpus)
        finally:
            with lock:
                free.append(cpus)
        verdict = "crashed" if ran.crashed else "exact" if ran.exact else "wrong"
        print(f"== corpus entry {truth.name}: {verdict}, {ran.row.seconds:.0f} s", flush=True)
        done(truth.name, ran)
        return ran

    pool = concurrent.futures.ThreadPoolExecutor(max_workers=jobs)
    try:
        return dict(zip([t.name for t in truths], pool.map(one, truths), strict=True))
    except KeyboardInterrupt:
        entries.stop()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _nothing(_name: str, _ran: Ran) -> None:
    return None


def run_entries(
    truths: Sequence[Truth], run_one: RunOne, *, entry_jobs: int, out: Path, done: Done = _nothing
) -> list[Ran]:
    """Every entry, in the order given: the others ``entry_jobs`` at a time, then each performance entry alone; a
    line at least every 15 s while they run (``util.console.heartbeat``); ``done`` hears each row as it comes."""
    entries = _Entries(total=len(truths))
    ordinary = [t for t in truths if t.slowdown is None]
    timed = [t for t in truths if t.slowdown is not None]
    with heartbeat(lambda line: print(line, flush=True), entries.said):
        ran = _wave(ordinary, run_one, entries, entry_jobs, out, done)
        for truth in timed:
            ran |= _wave([truth], run_one, entries, 1, out, done)
    return [ran[t.name] for t in truths]
