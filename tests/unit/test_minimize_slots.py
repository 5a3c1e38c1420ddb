"""minimize's run slots: a candidate runs in both cells at once only while two slots stand free (issue #41)."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reprobisect.minimize import candidates
from reprobisect.minimize.candidates import CellRun, Cells, FailureTarget
from reprobisect.minimize.slots import RunSlots

TARGET = FailureTarget(outcome="OTHER_FAILURE", signature="abc", text="AssertionError: x")


def _run(cell: str, outcome: str, signature: str | None = None) -> CellRun:
    return CellRun(
        cell=cell, outcome=outcome, signature=signature, signature_text=signature, seconds=1.0, reused=False, record="r"
    )


@given(jobs=st.integers(1, 6), wants=st.lists(st.integers(0, 3), max_size=6))
@settings(deadline=None, max_examples=40)
def test_held_slots_never_exceed_jobs_and_come_back_when_released(
    tmp_path_factory: Any, jobs: int, wants: list[int]
) -> None:
    slots = RunSlots(tmp_path_factory.mktemp("slots"), jobs)
    got: list[int] = []
    with contextlib.ExitStack() as stack:
        for wanted in wants:
            got.append(stack.enter_context(slots.taken(wanted)))
            assert sum(got) <= jobs and got[-1] <= wanted
        assert sum(got) == min(jobs, sum(wants))
    with slots.taken(jobs) as again:
        assert again == jobs


def test_a_slot_held_by_another_process_is_not_free_until_that_process_dies(tmp_path: Path) -> None:
    slots = RunSlots(tmp_path / "slots", 2)
    ready, go = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child holds one slot until it is killed, as picire kills a losing worker
        with slots.taken(1):
            os.write(go, b"x")
            time.sleep(60)
        os._exit(0)
    try:
        assert os.read(ready, 1) == b"x"
        with slots.taken(2) as free:
            assert free == 1
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    with slots.taken(2) as free:
        assert free == 2  # the kernel released the dead worker's lock


def test_an_unwritable_slot_folder_means_no_slot_not_an_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with RunSlots(blocker / "slots", 4).taken(2) as free:
        assert free == 0


def _tester(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, jobs: int, bad: CellRun
) -> tuple[candidates.Tester, list[str]]:
    cells = Cells(
        config=None,  # type: ignore[arg-type]  # run_in is replaced below: no matrix run happens
        name="issue",
        filename="issue.py",
        bad={"deepspeed": "0.16.5"},
        good={"deepspeed": "0.16.4"},
        backend="cpu",
        form="cpu",
        jobs=jobs,
        ctx=None,  # type: ignore[arg-type]
    )
    tester = candidates.Tester(cells, TARGET, tmp_path, frozenset())
    started: list[str] = []
    lock = threading.Lock()

    def run_in(script: Path, pins: Mapping[str, str], key: str, *, traced: bool = False) -> CellRun:
        with lock:
            started.append(pins["deepspeed"])
        time.sleep(0.05)
        return bad if pins["deepspeed"] == "0.16.5" else _run("good", "PASS")

    monkeypatch.setattr(tester, "run_in", run_in)
    return tester, started


def test_with_two_slots_free_a_candidate_runs_in_both_cells_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tester, started = _tester(tmp_path, monkeypatch, 8, _run("bad", "PASS"))
    verdict = tester.run("print(1)\n")
    assert sorted(started) == ["0.16.4", "0.16.5"]  # the good run went too, though the bad cell said no
    assert not verdict.interesting and verdict.executed == 2


def test_without_a_second_free_slot_the_good_cell_waits_for_the_bad_ones_verdict(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tester, started = _tester(tmp_path, monkeypatch, 2, _run("bad", "PASS"))
    with tester.slots.taken(1):  # another candidate is running
        verdict = tester.run("print(1)\n")
    assert started == ["0.16.5"] and not verdict.interesting
    tester, started = _tester(tmp_path / "again", monkeypatch, 2, _run("bad", "OTHER_FAILURE", "abc"))
    with tester.slots.taken(1):
        verdict = tester.run("print(2)\n")
    assert started == ["0.16.5", "0.16.4"] and verdict.interesting


def test_one_job_never_runs_two_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tester, started = _tester(tmp_path, monkeypatch, 1, _run("bad", "PASS"))
    tester.run("print(1)\n")
    assert started == ["0.16.5"]


def test_free_counts_the_slots_no_one_holds_and_holds_none_itself(tmp_path: Path) -> None:
    slots = RunSlots(tmp_path / "slots", 4)
    assert slots.free() == 4
    with slots.taken(3):
        assert slots.free() == 1
        assert slots.free() == 1  # asking did not keep one
    assert slots.free() == 4


def test_runnable_says_what_refused_would_without_keeping_a_verdict(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tester, _ = _tester(tmp_path, monkeypatch, 8, _run("bad", "PASS"))
    assert not tester.runnable("print(x)\n") and tester.runnable("x = 1\nprint(x)\n")
    assert not tester.log.exists() and tester.known("print(x)\n") is None
    assert tester.refused("print(x)\n") is not None and tester.log.exists()  # refused() keeps its verdict
