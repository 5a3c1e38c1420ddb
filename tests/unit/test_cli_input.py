"""Bad command-line input: each gives one clear message, its own exit code, and changes nothing. Also the
entry point's one exit path: harness errors, Ctrl-C and SIGTERM end in one line, never a traceback."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from reprobisect.commands import env, matrix
from reprobisect.commands.main import main
from reprobisect.errors import INTERRUPTED_EXIT, ToolError
from tests.conftest import ROOT


def _run(capsys: pytest.CaptureFixture[str], tmp_path: Path, *args: str) -> tuple[int, str]:
    code = main(
        [
            *args,
            "--config",
            str(ROOT / "matrix.yaml"),
            "--out",
            str(tmp_path / "out"),
            "--envs",
            str(tmp_path / "cells"),
        ]
    )
    return code, capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "code", "needle"),
    [
        (("matrix", "--script", "no/such/repro.py"), 2, "--script no/such/repro.py: no such file"),
        (("matrix", "--script", __file__, "--repro", "gan"), 2, "--script/--pytest and --repro contradict each other"),
        (("matrix", "--expect-signature", "abc"), 2, "go with a script"),
        (("repro", "gan", "--fix", "freeze-dd"), 2, "--fix 'freeze-dd': repro 'gan' has fixes none, freeze-d"),
        (("repro", "gna"), 2, "unknown 'gna'"),
        (
            ("bisect", "--repro", "gan", "--script", __file__, "--good", "0.16.0", "--bad", "0.19.8"),
            2,
            "exactly one of --repro NAME, --script PATH or --pytest",
        ),
        (
            ("bisect", "--repro", "gan", "--good", "0.16.0", "--bad", "0.19.8", "--signature", "x", "--any-failure"),
            2,
            "--any-failure contradicts --signature",
        ),
    ],
)
def test_bad_flags(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, args: tuple[str, ...], code: int, needle: str
) -> None:
    got, err = _run(capsys, tmp_path, *args)
    assert got == code
    assert needle in err
    assert "Traceback" not in err
    assert not (tmp_path / "out").exists()
    assert not (tmp_path / "cells").exists()


def test_an_unknown_option_names_its_command(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["report", "--bogus"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: reprobisect report ")
    assert "reprobisect report: error: unrecognized arguments: --bogus" in err


def test_report_errors_speak_as_report(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["report", "--out", str(tmp_path / "nowhere")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("reprobisect report: error: ") and err.count("\n") == 1


def test_nightly_says_what_its_deepspeed_option_means(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["nightly", "--help"])
    assert "a git ref of DeepSpeed such as main" in " ".join(capsys.readouterr().out.split())


def test_ctrl_c_is_one_line_and_exit_130(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(matrix, "listed_cells", interrupted)
    assert _run(capsys, tmp_path, "matrix", "--list") == (INTERRUPTED_EXIT, "reprobisect: interrupted\n")


DRIVER = """
import sys, time
import reprobisect.commands.bench as bench
from reprobisect.commands.main import main

def hang(args, **kwargs):
    print("ready", flush=True)
    time.sleep(120)

bench.prepare = hang
sys.exit(main(["bench"]))
"""


def test_sigterm_takes_the_path_of_ctrl_c(tmp_path: Path) -> None:
    """The nightly workflow's timeout and a CI cancel send SIGTERM: one line and 130, not a traceback."""
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER)
    proc = subprocess.Popen(
        [sys.executable, str(driver)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT
    )
    assert proc.stdout is not None
    try:
        assert proc.stdout.readline() == "ready\n"
        time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == INTERRUPTED_EXIT
    assert err == "reprobisect: interrupted\n"


def test_env_tools_end_in_one_error_when_they_hang_or_cannot_start(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(env, "TOOL_TIMEOUT", 0.2)
    with pytest.raises(ToolError, match=r"collect_env: `sleep 30` did not finish in 0.2 s"):
        env._stream(["sleep", "30"], what="collect_env")
    with pytest.raises(ToolError, match=r"ds_report: '/no/such/ds_report': no such program; install it with deepspeed"):
        env._stream(["/no/such/ds_report"], what="ds_report")


def test_nothing_outside_commands_imports_them() -> None:
    """The command line sits on top of the library: no library module may depend on it."""
    src = ROOT / "src" / "reprobisect"
    offenders = [
        str(path.relative_to(src))
        for path in src.rglob("*.py")
        if "commands" not in path.relative_to(src).parts
        and path.name != "__main__.py"
        and re.search(r"^\s*(from|import)\s+reprobisect\.commands\b", path.read_text(), re.MULTILINE)
    ]
    assert offenders == []
