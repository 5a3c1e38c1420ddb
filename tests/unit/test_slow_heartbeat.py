"""Slow tests say when they start and, while they run, that they still do: live, one whole line at a time."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.slow_heartbeat import NAME

DEMO = """
import sys, time
import pytest

def test_fast():
    print("fast output")

@pytest.mark.slow
def test_slow():
    print("captured slow output")
    time.sleep(1.3)

@pytest.mark.slow
def test_slow_fails():
    print("captured before the failure")
    time.sleep(0.7)
    assert False

def test_fast_after():
    pass
"""


def _run(tmp_path: Path, *args: str) -> list[tuple[float, str]]:
    """pytest with only this plugin over DEMO, stdout a pipe; each line with the time it arrived."""
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    slow: slow\nheartbeat_interval = 0.5\n")
    (tmp_path / "test_demo.py").write_text(DEMO)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "80"}  # pytest pads result lines to it
    cmd = [sys.executable, "-m", "pytest", "-p", "tests.slow_heartbeat", "-p", "no:cacheprovider", *args]
    with subprocess.Popen(
        cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    ) as proc:
        assert proc.stdout is not None
        start = time.monotonic()
        lines = [(time.monotonic() - start, line.rstrip("\n")) for line in proc.stdout]
        assert proc.wait(timeout=60) == 1, lines  # test_slow_fails
    return lines


@pytest.mark.parametrize("verbosity", ["", "-v", "-q"])
def test_slow_tests_print_a_start_line_and_a_line_a_second_live_fast_ones_nothing(
    tmp_path: Path, verbosity: str
) -> None:
    lines = _run(tmp_path, *filter(None, [verbosity]))
    text = [line for _, line in lines]
    ours = [line for line in text if "slow test started" in line or "still running" in line]
    # a line every 0.5 s (more may come on a loaded machine), each on a line of its own
    assert re.fullmatch(
        r"slow test started: test_demo.py::test_slow\n"
        r"… test_demo.py::test_slow still running, 0.5 s\n… test_demo.py::test_slow still running, 1 s\n"
        r"(… test_demo.py::test_slow still running, \d+(\.5)? s\n)*"
        r"slow test started: test_demo.py::test_slow_fails\n"
        r"… test_demo.py::test_slow_fails still running, 0.5 s\n"
        r"(… test_demo.py::test_slow_fails still running, \d+(\.5)? s\n)*",
        "".join(f"{line}\n" for line in ours),
    ), ours
    # they arrive while the test runs, not with the results at the end (over a second later)
    arrived = {line: at for at, line in lines}
    assert arrived["… test_demo.py::test_slow still running, 0.5 s"] < lines[-1][0] - 0.5
    # pytest's own lines are whole: results follow the file name (or the test's location) as usual
    if verbosity == "":
        assert [line for line in text if line.startswith("test_demo.py")][:3] == [
            "test_demo.py .",
            "test_demo.py .",
            "test_demo.py F.                                                          [100%]",
        ]
    if verbosity == "-v":
        assert "test_demo.py::test_slow PASSED                                           [ 50%]" in text
    # capturing is unchanged: a passing test's output is not shown, a failing one's has no heartbeat in it
    assert not any("captured slow output" in line or "fast output" in line for line in text)
    captured = text[text.index(next(line for line in text if "Captured stdout call" in line)) + 1]
    assert captured == "captured before the failure"


def test_the_suite_has_the_heartbeat(request: pytest.FixtureRequest) -> None:
    assert request.config.pluginmanager.has_plugin(NAME)
    assert re.fullmatch(r"\d+(\.\d+)?", request.config.getini("heartbeat_interval"))
