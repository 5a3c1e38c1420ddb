"""``in_parallel_growing``: units that others release start as soon as a slot is free, ahead of queued ones."""

from __future__ import annotations

import threading
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reprobisect.util.stop import in_parallel_growing


def _followers(tree: dict[str, list[str]]):
    return lambda unit, result: tree.get(unit, [])


@given(
    jobs=st.integers(1, 4),
    first=st.lists(st.sampled_from("abcdef"), min_size=0, max_size=6, unique=True),
    fanout=st.integers(0, 3),
)
@settings(deadline=None, max_examples=40)
def test_every_unit_and_every_released_unit_runs_once_with_its_own_result(
    jobs: int, first: list[str], fanout: int
) -> None:
    tree = {unit: [f"{unit}{i}" for i in range(fanout)] for unit in first}
    done = in_parallel_growing(str.upper, first, jobs, _followers(tree))
    expected = set(first) | {f for fs in tree.values() for f in fs}
    assert sorted(unit for unit, _ in done) == sorted(expected)
    assert all(result == unit.upper() for unit, result in done)


def test_sequentially_a_released_unit_runs_next_before_the_queued_ones() -> None:
    order: list[str] = []

    def run(unit: str) -> str:
        order.append(unit)
        return unit

    in_parallel_growing(run, ["a", "b", "c"], 1, _followers({"a": ["a1", "a2"]}))
    assert order == ["a", "a1", "a2", "b", "c"]


def test_in_parallel_a_released_unit_takes_the_next_free_slot_before_queued_units() -> None:
    started: list[str] = []
    lock = threading.Lock()

    def run(unit: str) -> str:
        with lock:
            started.append(unit)
        time.sleep({"a": 0.05, "b": 0.3}.get(unit, 0.01))
        return unit

    in_parallel_growing(run, ["a", "b", "c", "d"], 2, _followers({"a": ["patched-a"]}))
    assert started[:2] in (["a", "b"], ["b", "a"])
    assert started[2] == "patched-a"  # "a" ended first; what it released went ahead of "c" and "d"


@pytest.mark.parametrize("jobs", [1, 3])
def test_a_failing_unit_raises_and_no_queued_unit_starts_after_it(jobs: int) -> None:
    started: list[str] = []

    def run(unit: str) -> str:
        started.append(unit)
        if unit == "bad":
            raise ValueError(unit)
        time.sleep(0.02)
        return unit

    with pytest.raises(ValueError, match="bad"):
        in_parallel_growing(run, ["bad", *[f"u{i}" for i in range(20)]], jobs, _followers({}))
    assert len(started) <= jobs + 1
