"""Memory a run cannot forge (issue #39): the harness measures peak RSS with os.wait4 and GPU memory from outside
the run; what a run prints about its memory is a claim, and no GPU figure appears where there is no GPU."""

from __future__ import annotations

import dataclasses
import json
import os
import stat
import sys
from pathlib import Path

import pytest

from reprobisect.model.record import Record
from reprobisect.run import watch
from reprobisect.run.child_process import ChildSpec, run_child
from reprobisect.run.one_run import WAITER
from reprobisect.run.watch import RunWatch, process_tree
from tests.conftest import ROOT

FORGER = """\
import json, os
hoard = bytearray(160 * 2**20)  # touched: resident
for i in range(0, len(hoard), 4096):
    hoard[i] = 1
print("@@repro " + json.dumps({"event": "exit", "peak_rss_bytes": 1, "gpu": {"peak_memory_bytes": 80_000_000_000}}))
"""

FAKE_SMI = """\
#!/bin/sh
# a GPU, and every process on this machine holding 300 MiB of it
case "$1" in
  --query-gpu=*) echo "FAKE GPU, 1.0" ;;
  --query-compute-apps=*) for p in /proc/[0-9]*; do echo "${p#/proc/}, 300"; done ;;
esac
"""


def _spec(tmp_path: Path, argv: list[str]) -> ChildSpec:
    env = {"PATH": os.environ.get("PATH", os.defpath)}
    return ChildSpec(argv=tuple(argv), env=env, cwd=tmp_path, log_path=tmp_path / "run.log", timeout=60.0)


def _waited(tmp_path: Path, argv: list[str]) -> ChildSpec:
    return dataclasses.replace(_spec(tmp_path, [sys.executable, "-I", "-S", str(WAITER), *argv]), waited=True)


def test_peak_rss_is_the_harness_measurement_not_the_runs_word(tmp_path: Path) -> None:
    script = tmp_path / "forger.py"
    script.write_text(FORGER)
    result = run_child(_waited(tmp_path, [sys.executable, str(script)]))
    assert result.exit_code == 0
    assert result.peak_rss_bytes is not None and result.peak_rss_bytes >= 160 * 2**20
    assert result.rss_source == "wait4 by the harness's waiter: the run's largest process"
    assert result.gpu_peak_bytes is None and result.gpu_source is None  # this machine shows no GPU to the harness


def test_a_small_run_is_not_measured_at_the_harness_size(tmp_path: Path) -> None:
    """A child's peak counts the process it was forked from: the waiter keeps the harness's size out of it."""
    hoard = bytearray(300 * 2**20)  # the harness (this test) grows well past any small run
    hoard[::4096] = b"\1" * len(hoard[::4096])
    small = run_child(_waited(tmp_path, [sys.executable, "-c", "pass"]))
    direct = run_child(_spec(tmp_path, [sys.executable, "-c", "pass"]))
    del hoard
    assert small.peak_rss_bytes is not None and small.peak_rss_bytes < 100 * 2**20
    assert direct.peak_rss_bytes is not None and direct.peak_rss_bytes > 300 * 2**20  # why the waiter measures
    assert direct.rss_source is not None and "the harness's size included" in direct.rss_source


@pytest.fixture
def fake_gpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tools = tmp_path / "tools"
    tools.mkdir()
    smi = tools / "nvidia-smi"
    smi.write_text(FAKE_SMI)
    smi.chmod(smi.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tools}{os.pathsep}{os.environ['PATH']}")
    watch.machine_gpus.cache_clear()
    yield
    watch.machine_gpus.cache_clear()


@pytest.mark.usefixtures("fake_gpu")
def test_gpu_memory_is_sampled_for_the_runs_processes_only(tmp_path: Path) -> None:
    script = tmp_path / "child.py"
    script.write_text(
        "import subprocess, sys, time\nsubprocess.run([sys.executable, '-c', 'import time; time.sleep(2)'])\n"
    )
    result = run_child(_waited(tmp_path, [sys.executable, str(script)]))
    assert result.exit_code == 0
    # the run's three processes (the waiter, the script, its child) at 300 MiB each, never the harness's or others'
    assert result.gpu_peak_bytes == 900 * 2**20
    assert result.gpu_source is not None and result.gpu_source.startswith("nvidia-smi, sampled by the harness")


def test_the_process_tree_holds_descendants_and_the_group(tmp_path: Path) -> None:
    assert process_tree(os.getpid()) >= {os.getpid()}
    proc = tmp_path / "proc"
    for pid, parent, group in ((10, 1, 10), (11, 10, 10), (12, 11, 12), (13, 1, 10), (14, 1, 14)):
        (proc / str(pid)).mkdir(parents=True)
        (proc / str(pid) / "stat").write_text(f"{pid} (a) b) S {parent} {group} 0 0\n")
    (proc / "15").mkdir()
    (proc / "15" / "stat").write_text("garbage")
    assert process_tree(10, proc) == {10, 11, 12, 13}  # 12 left the group (a child), 13 left the tree (the group)


def test_a_watch_without_a_gpu_or_a_kernel_log_starts_no_thread() -> None:
    idle = RunWatch(os.getpid(), gpu=False, pids=False)
    assert idle.stop().gpu_peak_bytes is None and not idle._thread.is_alive()


def test_a_record_of_an_older_harness_loads_its_memory_figures_as_claims() -> None:
    """Records written before the harness measured memory took their figures from the run's exit event."""
    old = ROOT / "tests/resources/records/current/records/gan"
    path = old / "torch-2.13.0+cpu_deepspeed-0.16.4_lightning-2.6.6/cpu-deepspeed__single-engine__r1.json"
    assert "claimed_memory" not in json.loads(path.read_text())
    record = Record.load(path)
    assert (record.peak_rss_bytes, record.peak_gpu_memory_bytes, record.peak_rss_source) == (None, None, None)
    assert record.claimed_memory == {"peak_rss_bytes": 396513280}
    again = Record.parse(record.to_json().encode(), source=path)  # written again: measured stays unmeasured
    assert again == record


def test_a_stop_of_the_harness_ends_the_watch_quietly(monkeypatch: pytest.MonkeyPatch) -> None:
    """On the H100 a `timeout -s INT` of a triage printed a KeyboardInterrupt traceback from a watch thread whose
    nvidia-smi was cut short; the main thread says "interrupted", the watch just ends."""
    looks: list[int] = []

    def interrupted(self: RunWatch) -> None:
        looks.append(1)
        raise KeyboardInterrupt

    monkeypatch.setattr(RunWatch, "sample", interrupted)
    watcher = RunWatch(os.getpid(), every=0.01, gpu=False, pids=False)
    watcher._run()  # returns instead of raising
    assert looks == [1]
