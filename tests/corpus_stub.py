"""What a corpus entry's process does in tests/unit/test_corpus_jobs.py, in a module of its own: a spawned process
imports it by name, and a test module would bring the test suite's imports into every entry's start."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

from reprobisect.corpus.scoring import ColumnVerdict, Row
from reprobisect.corpus.truth_model import Truth
from reprobisect.util import tally


def _meet(name: str, notes: Path, meet: tuple[str, ...]) -> bool:
    """Say this entry started, then wait (up to a minute) until every entry of ``meet`` has: whether they all ran at
    once, whatever the machine's load does to their starts."""
    (notes / f"{name}.started").touch()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if all((notes / f"{other}.started").exists() for other in meet):
            return True
        time.sleep(0.05)
    return False


def answer(truth: Truth, *, notes: Path, meet: tuple[str, ...] = ()) -> Row:
    """Print a line, then: raise (entry ``raises``), die by SIGKILL (``killed``), or count two runs and a probe,
    note when it ran, on which cores and (an entry of ``meet``) whether it met the others, and answer a row."""
    start = time.time()
    met = _meet(truth.name, notes, meet) if truth.name in meet else None
    print(f"triaging {truth.name}", flush=True)
    if truth.name == "raises":
        raise KeyError("states")
    if truth.name == "killed":
        os.kill(os.getpid(), signal.SIGKILL)
    tally.add(tally.RUNS, 2.0)
    tally.add(tally.PROBES, 1.0)
    time.sleep(0.4)
    note = {"start": start, "end": time.time(), "cpus": sorted(os.sched_getaffinity(0)), "met": met}
    (notes / f"{truth.name}.json").write_text(json.dumps(note))
    right = ColumnVerdict(ok=True, truth="t", found="t")
    return Row(entry=truth.name, ranges=right, introduced=right, fixed=right, signature=right, seconds=0.4)
