"""Bad command-line input: each gives one clear message, its own exit code, and changes nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from reprobisect.cli import main
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
        (("matrix", "--script", __file__, "--repro", "gan"), 2, "--script and --repro contradict each other"),
        (("matrix", "--expect-signature", "abc"), 2, "--expect-signature goes with --script"),
        (("matrix", "--jobs", "0"), 2, "--jobs 0"),
        (("repro", "gan", "--fix", "freeze-dd"), 2, "--fix 'freeze-dd': repro 'gan' has fixes none, freeze-d"),
        (("repro", "gna"), 2, "unknown 'gna'"),
        (
            ("bisect", "--repro", "gan", "--script", __file__, "--good", "0.16.0", "--bad", "0.19.8"),
            2,
            "exactly one of --repro NAME or --script PATH",
        ),
        (
            ("bisect", "--repro", "gan", "--good", "0.16.0", "--bad", "0.19.8", "--signature", "x", "--any-failure"),
            2,
            "--signature and --any-failure contradict each other",
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
