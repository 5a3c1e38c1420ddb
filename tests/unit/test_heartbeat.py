"""A long run is never silent: the runner beats every few seconds and says when an op is compiling."""

from __future__ import annotations

import sys
from pathlib import Path

from reprobisect.run.child_process import ChildSpec, run_child
from reprobisect.run.one_run import compiling_ops


def test_the_runner_beats_while_the_child_runs_and_not_after(tmp_path: Path) -> None:
    beats: list[float] = []
    spec = ChildSpec(
        argv=(sys.executable, "-c", "import time; time.sleep(1.2)"),
        env={},
        cwd=tmp_path,
        log_path=tmp_path / "log",
        timeout=30,
        heartbeat=beats.append,
        heartbeat_every=0.25,
    )
    result = run_child(spec)
    assert result.exit_code == 0 and not result.timed_out
    assert 3 <= len(beats) <= 6
    assert beats == sorted(beats) and beats[-1] < result.wall_seconds


def test_a_timeout_still_ends_the_child_when_it_beats(tmp_path: Path) -> None:
    beats: list[float] = []
    spec = ChildSpec(
        argv=(sys.executable, "-c", "import time; time.sleep(60)"),
        env={},
        cwd=tmp_path,
        log_path=tmp_path / "log",
        timeout=1.0,
        grace=0.5,
        heartbeat=beats.append,
        heartbeat_every=0.3,
    )
    result = run_child(spec)
    assert result.timed_out and result.wall_seconds < 10
    assert all(b < 1.0 for b in beats)


def test_compiling_ops_are_the_build_folders_whose_lock_is_held(tmp_path: Path) -> None:
    (tmp_path / "deepspeed_shm_comm").mkdir()
    (tmp_path / "deepspeed_shm_comm" / "lock").touch()
    (tmp_path / "fused_adam").mkdir()  # built before: no lock
    (tmp_path / "fused_adam" / "fused_adam.so").touch()
    assert compiling_ops(tmp_path) == ["deepspeed_shm_comm"]
    assert compiling_ops(tmp_path / "missing") == []
