"""Where a process's time went (util/tally.py, issue #52): what each kind of work adds, from any thread, and what a
run's record says of the ops it built itself."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from reprobisect.util import tally


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    tally.reset()
    yield
    tally.reset()


def test_work_adds_up_by_kind_from_many_threads() -> None:
    threads = [threading.Thread(target=lambda: [tally.add(tally.CELLS, 0.5) for _ in range(100)]) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert tally.snapshot()[tally.CELLS] == tally.Spent(800, 400.0)
    tally.add(tally.COMMIT_WHEELS, -3.0)  # a clock that stepped back counts the work, not negative time
    assert tally.snapshot()[tally.COMMIT_WHEELS] == tally.Spent(1, 0.0)


def test_a_run_counts_as_a_cell_run_or_a_probe_and_the_ops_it_built_as_op_builds() -> None:
    ops = [
        {"name": "shm_comm", "built": True, "seconds": 29.0},
        {"name": "fused_adam", "built": False, "seconds": 0.01},  # taken from the cache: no build
        {"name": "x", "built": "yes", "seconds": 5.0},  # not what the harness writes: not counted
        {"name": "y", "built": True, "seconds": "5"},
        "not a mapping",
    ]
    tally.add_run(36.0, ops, probe=False)  # type: ignore[arg-type]
    tally.add_run(7.0, [], probe=True)
    spent = tally.snapshot()
    assert spent[tally.RUNS] == tally.Spent(1, 36.0) and spent[tally.PROBES] == tally.Spent(1, 7.0)
    assert spent[tally.OP_BUILDS] == tally.Spent(1, 29.0)
