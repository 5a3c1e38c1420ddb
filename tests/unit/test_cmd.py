"""util.cmd, the one way the harness runs a tool: a timeout or a stop kills everything the tool started, a stop
from another thread is heard within a slice, and input and output survive the sliced wait."""

from __future__ import annotations

import concurrent.futures
import sys
import time
from pathlib import Path

import pytest

from reprobisect.errors import EnvBuildError, ToolError
from reprobisect.util.cmd import run_logged, run_tool
from tests.conftest import SCRIPTS
from tests.unit.test_runner import _gone, interrupt_and_stop

PY = sys.executable
GRANDCHILD = str(SCRIPTS / "sleeps_with_grandchild.py")


def _wait_for_pid(path: Path) -> int:
    deadline = time.monotonic() + 20
    while not (path.is_file() and path.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    return int(path.read_text())


def test_a_tool_past_its_timeout_is_killed_with_everything_it_started(tmp_path: Path) -> None:
    """A build backend's compiler that ignores SIGINT and SIGTERM outlived subprocess.run's kill of the tool alone."""
    pid_file = tmp_path / "grandchild.pid"
    start = time.monotonic()
    with pytest.raises(ToolError, match="did not finish in 3 s"):
        run_tool([PY, GRANDCHILD, str(pid_file)], what="a slow tool", timeout=3)
    assert time.monotonic() - start < 15
    assert _gone(_wait_for_pid(pid_file))


@pytest.mark.parametrize("runner", ["run_tool", "run_logged"])
def test_a_stop_kills_the_tools_that_worker_threads_wait_for(tmp_path: Path, runner: str) -> None:
    """Ctrl-C during the cell builds of --jobs > 1: it reached the main thread only, and each worker went on
    waiting for its uv install (up to an hour's timeout) while the pool started every queued build."""
    pids = [tmp_path / f"grandchild-{i}.pid" for i in range(2)]

    def tool(pid: Path) -> None:
        argv = [PY, GRANDCHILD, str(pid)]
        if runner == "run_tool":
            run_tool(argv, what="a slow tool", timeout=600)
        else:
            run_logged(argv, log=tmp_path / f"{pid.stem}.log", what="a slow build", timeout=600, error=EnvBuildError)

    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        futures = [pool.submit(tool, pid) for pid in pids]
        grandchildren = [_wait_for_pid(pid) for pid in pids]
        assert interrupt_and_stop(futures) < 10
    assert all(_gone(pid) for pid in grandchildren)
    # the stop does not outlive its block
    assert run_tool([PY, "-c", "import time; time.sleep(0.6); print('ok')"], what="after", timeout=30).stdout == "ok\n"


def test_input_and_output_survive_a_wait_of_many_slices(tmp_path: Path) -> None:
    """communicate() takes the input once: the sliced wait must not pass it again (ValueError) or lose output."""
    code = "import sys, time; time.sleep(1.2); data = sys.stdin.read(); print(data.upper()); print('x' * 200000)"
    done = run_tool([PY, "-c", code], what="a slow echo", timeout=60, stdin="to upper\n" * 1000)
    lines = done.stdout.splitlines()
    assert lines[:1000] == ["TO UPPER"] * 1000 and lines[-1] == "x" * 200000


def test_run_logged_appends_the_command_and_its_output_and_names_the_log_on_failure(tmp_path: Path) -> None:
    log = tmp_path / "build.log"
    run_logged([PY, "-c", "print('first')"], log=log, what="step one", timeout=60)
    with pytest.raises(EnvBuildError, match=r"step two failed \(exit 3\); see .*build\.log:\n") as failed:
        code = "import sys; print('boom'); sys.exit(3)"
        run_logged([PY, "-c", code], log=log, what="step two", timeout=60, error=EnvBuildError)
    assert str(failed.value).endswith("\nboom")  # the log's last lines
    text = log.read_text()
    assert text.startswith("$ ") and "first\n" in text and text.rstrip().endswith("boom")


@pytest.mark.parametrize("program", ["uv", "git", "some-tool"])
def test_a_tool_missing_from_path_is_named_with_how_to_get_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, program: str
) -> None:
    """`reprobisect wheelhouse` without uv on PATH said only "cannot start (No such file or directory)" (#53)."""
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty folder: no program is found
    with pytest.raises(EnvBuildError) as caught:
        run_tool([program, "--version"], what="building the wheelhouse", timeout=10, error=EnvBuildError)
    message = str(caught.value)
    assert message.startswith(f"building the wheelhouse: {program!r}: not found on PATH; install it with ")
    assert "No such file" not in message and "\n" not in message
    assert ("pip install uv" in message) == (program == "uv")
    with pytest.raises(ToolError, match=f"{program!r}: not found on PATH; install it with"):
        run_logged([program], log=tmp_path / "build.log", what="a build", timeout=10)


def test_a_missing_program_given_by_path_is_no_such_program(tmp_path: Path) -> None:
    with pytest.raises(ToolError, match=r"'/nowhere/bin/uv': no such program; install it with pip install uv"):
        run_tool(["/nowhere/bin/uv", "sync"], what="syncing", timeout=10)


def test_a_missing_working_folder_is_not_taken_for_a_missing_program(tmp_path: Path) -> None:
    """Popen's FileNotFoundError names the folder then: the message must not blame the tool."""
    with pytest.raises(ToolError) as caught:
        run_tool([PY, "-c", "pass"], what="probing", timeout=10, cwd=tmp_path / "gone")
    assert "cannot start (No such file or directory)" in str(caught.value) and "not found on PATH" not in str(
        caught.value
    )
