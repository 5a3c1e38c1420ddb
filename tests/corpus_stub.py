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


def answer(truth: Truth, *, notes: Path) -> Row:
    """Print a line, then: raise (entry ``raises``), die by SIGKILL (``killed``), or count two runs and a probe,
    note when it ran and on which cores, and answer a row."""
    start = time.time()
    print(f"triaging {truth.name}", flush=True)
    if truth.name == "raises":
        raise KeyError("states")
    if truth.name == "killed":
        os.kill(os.getpid(), signal.SIGKILL)
    tally.add(tally.RUNS, 2.0)
    tally.add(tally.PROBES, 1.0)
    time.sleep(0.4)
    note = {"start": start, "end": time.time(), "cpus": sorted(os.sched_getaffinity(0))}
    (notes / f"{truth.name}.json").write_text(json.dumps(note))
    right = ColumnVerdict(ok=True, truth="t", found="t")
    return Row(entry=truth.name, ranges=right, introduced=right, fixed=right, signature=right, seconds=0.4)
