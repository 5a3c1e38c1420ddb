"""Numbers and options have bounds (issue #50, item 6): every count and duration a person or a file hands the
harness is a finite number inside its range or one line that names the option, the value cut to a readable length
and the range; a matrix that expands past 500 cells needs --max-cells; a python axis value that is no interpreter
is refused before anything runs it; Slurm options that are options in disguise, and Slurm where none is
installed, are one line with their exit code."""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from reprobisect.commands.main import main
from reprobisect.commands.options import number_option
from reprobisect.config.expand import MatrixSpec, expand
from reprobisect.config.interpreters import check_interpreter
from reprobisect.config.load import load_config
from reprobisect.corpus.truth import load_truth
from reprobisect.errors import ConfigError, EngineError
from reprobisect.util.bounds import JOBS, TIMEOUT, Bound, cut
from tests.conftest import ROOT
from tests.unit.test_corpus import GOOD, _entry

TEXT = st.one_of(
    st.text(max_size=300),
    st.sampled_from(["nan", "NaN", "inf", "-inf", "1e999", "-1", "0", "0.0", "1e-300", "7", "1_0", " 3 ", "9" * 5000]),
    st.integers().map(str),
    st.floats().map(str),
)


@pytest.mark.parametrize(("option", "bound"), [("--timeout", TIMEOUT), ("--jobs", JOBS), ("--x", Bound(2, 3))])
@given(text=TEXT)
@settings(max_examples=150, deadline=None)
def test_any_text_is_a_number_in_range_or_one_line_naming_option_and_range(
    option: str, bound: Bound, text: str
) -> None:
    parser = argparse.ArgumentParser(prog="p", exit_on_error=False)
    parser.add_argument(option, type=number_option(option, bound))
    try:
        value = getattr(parser.parse_args([f"{option}={text}"]), option.lstrip("-"))
    except argparse.ArgumentError as exc:
        message = str(exc)
        assert message.startswith(f"argument {option}: ") and message.endswith(bound.describe())
        assert "\n" not in message and len(message) < 80 + len(bound.describe()) + 40
        return
    assert isinstance(value, int if bound.whole else float) and not isinstance(value, bool)
    assert math.isfinite(value) and bound.holds(value)


def test_a_refused_value_is_cut_to_a_readable_length() -> None:
    assert len(cut("x" * 10_000)) == 80 and cut("x" * 10_000).endswith("…")
    assert Bound(1, 100).refusal("--repeat", "9" * 5000).startswith("--repeat '99999")
    assert len(Bound(1, 100).refusal("--repeat", "9" * 5000)) < 140


def _cli(capsys: pytest.CaptureFixture[str], tmp_path: Path, *args: str) -> tuple[int, str]:
    """The real entry point; an argparse refusal is its SystemExit, a harness error its return code."""
    words = [*args, "--config", str(ROOT / "matrix.yaml"), "--out", str(tmp_path / "out")]
    words += ["--envs", str(tmp_path / "cells")]
    try:
        code = main(words)
    except SystemExit as exc:
        code = int(exc.code or 0)
    return code, capsys.readouterr().err


LONG = "9" * 10_000


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("matrix", "--repeat", "-1"), "argument --repeat: '-1': must be a whole number from 1 to 100"),
        (("matrix", "--repeat=0"), "argument --repeat: '0'"),
        (("matrix", "--repeat", LONG), "argument --repeat: '99999"),
        (("matrix", "--timeout", "nan"), "argument --timeout: 'nan': must be a number of seconds above 0"),
        (("matrix", "--timeout", "inf"), "argument --timeout: 'inf'"),
        (("matrix", "--timeout", "0"), "argument --timeout: '0'"),
        (("matrix", "--timeout", "1e12"), "at most 604800"),
        (("matrix", "--jobs", "0"), "argument --jobs: '0': must be a whole number from 1 to 256"),
        (("matrix", "--jobs", "100000"), "argument --jobs"),
        (("matrix", "--cpus-per-run", "-1"), "argument --cpus-per-run"),
        (("matrix", "--max-cells", "0"), "argument --max-cells"),
        (("repro", "gan", "--repeat", "nan"), "argument --repeat"),
        (("bisect", "--repro", "gan", "--good", "1", "--bad", "2", "--max-repeats", "0"), "argument --max-repeats"),
        (("bisect", "--repro", "gan", "--good", "1", "--bad", "2", "--min-repeats", "1"), "from 2 to 100"),
        (("bisect", "--repro", "gan", "--good", "1", "--bad", "2", "--slower-than", "nan"), "argument --slower-than"),
        (("bisect", "--repro", "gan", "--good", "1", "--bad", "2", "--slower-than", "-5"), "above 0"),
        (("bisect", "--repro", "gan", "--good", "1", "--bad", "2", "--slower-than", "0"), "percent above 0"),
        (("bisect", "--repro", "gan", "--good", "1", "--bad", "2", "--jobs", "-3"), "argument --jobs"),
        (("nightly", "--max-releases", "0"), "argument --max-releases"),
        (("nightly", "--max-bisects", "-1"), "argument --max-bisects"),
        (("matrix", "--executor", "slurm", "--slurm-time", "0"), "argument --slurm-time"),
    ],
)
def test_a_number_out_of_bounds_is_one_line_naming_option_value_and_range(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, args: tuple[str, ...], needle: str
) -> None:
    code, err = _cli(capsys, tmp_path, *args)
    assert code == 2, err
    [line] = [ln for ln in err.splitlines() if "error:" in ln]
    assert needle in line and len(line) < 250 and "Traceback" not in err
    assert not (tmp_path / "out").exists() and not (tmp_path / "cells").exists()


@pytest.mark.parametrize(
    ("old", "new", "words"),
    [
        ('precision = "bf16"', 'precision = "bf16"\ntimeout = -1', ("timeout = -1", "from 1 to 604800")),
        ('precision = "bf16"', 'precision = "bf16"\ntimeout = 1000000000000000000', ("timeout",)),
        ('precision = "bf16"', 'precision = "bf16"\nseconds = nan', ("seconds = nan", "a number of seconds")),
        ('precision = "bf16"', 'precision = "bf16"\nseconds = inf', ("seconds = inf",)),
        ("seconds = 9.0 }", "seconds = -inf }", ("runs.0.16.4.seconds", "-inf")),
    ],
)
def test_a_corpus_entry_timeout_or_seconds_out_of_bounds_is_refused(
    tmp_path: Path, old: str, new: str, words: tuple[str, ...]
) -> None:
    assert old in GOOD
    with pytest.raises(ConfigError) as info:
        load_truth(_entry(tmp_path, GOOD.replace(old, new, 1)))
    for word in words:
        assert word in str(info.value), str(info.value)


@pytest.mark.parametrize("timeout", [float("nan"), float("inf"), 10**12, True])
def test_a_repro_timeout_in_matrix_yaml_is_bounded(tmp_path: Path, timeout: object) -> None:
    data = yaml.safe_load((ROOT / "matrix.yaml").read_text())
    next(iter(data["repros"].values()))["timeout"] = timeout
    path = tmp_path / "matrix.yaml"
    path.write_text(yaml.safe_dump(data))
    for name in ("repros",):  # the repros' scripts are found beside the file
        (tmp_path / name).symlink_to(ROOT / name)
    with pytest.raises(ConfigError, match=r"repros\.gan\.timeout: .*must be a number of seconds above 0"):
        load_config(path)


def _spec(**axes: list[str]) -> MatrixSpec:
    return MatrixSpec(axes={name: tuple(values) for name, values in axes.items()})


RELEASES = [f"0.{i // 100}.{i % 100}" for i in range(600)]


def test_a_matrix_of_600_cells_needs_max_cells() -> None:
    spec = _spec(deepspeed=RELEASES)
    with pytest.raises(ConfigError, match=r"expands to 600 cells \(600 deepspeed\), more than 500.*--max-cells 600"):
        expand(spec, lambda axis: RELEASES)
    assert len(expand(spec, lambda axis: RELEASES, max_cells=600)) == 600


def test_a_huge_product_is_refused_without_being_made() -> None:
    axes = {f"a{i}": [f"1.{j}" for j in range(10)] for i in range(12)}  # 10^12 combinations
    start = time.monotonic()
    with pytest.raises(ConfigError, match="expands to 1000000000000 cells"):
        expand(_spec(**axes), lambda axis: [f"1.{j}" for j in range(10)])
    assert time.monotonic() - start < 5


def _script_named(tmp_path: Path, name: str) -> Path:
    marker = tmp_path / "ran"
    path = tmp_path / "bin" / name
    path.parent.mkdir(exist_ok=True)
    path.write_text(f"#!/bin/sh\ntouch {marker}\n")
    path.chmod(0o755)
    return path


def test_a_python_axis_value_that_is_no_interpreter_is_refused_before_it_runs(tmp_path: Path) -> None:
    script = _script_named(tmp_path, "python3.11")
    link = tmp_path / "bin" / "python3"
    link.symlink_to("/bin/sh")
    for value, words in [
        ("/bin/sh", "is named 'sh'"),
        (str(script), "is a script"),
        (str(link), "leads to"),
        ("3.11; touch x", "neither a version nor an absolute path"),
        ("../python3", "neither a version nor an absolute path"),
        (str(tmp_path / "bin" / "python3.12"), "does not exist"),
    ]:
        with pytest.raises(ConfigError, match="python axis") as info:
            expand(_spec(python=[value]), lambda axis: [])
        assert words in str(info.value) and "give 'system', a version" in str(info.value)
    assert not (tmp_path / "ran").exists()


def test_a_python_axis_value_that_is_an_interpreter_or_a_version_is_kept() -> None:
    real = os.path.realpath(sys.executable)
    for value in ("system", "3", "3.11", "3.11.2", real):
        assert check_interpreter(value, "x") == value


def test_an_include_entry_with_a_script_for_python_is_refused(tmp_path: Path) -> None:
    spec = MatrixSpec(axes={"python": ("system",)}, include=({"python": "/bin/sh"},))
    with pytest.raises(ConfigError, match=r"include .*python '/bin/sh' is named 'sh'"):
        expand(spec, lambda axis: [])


def test_the_python_option_naming_a_script_is_refused_by_the_cli(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    script = _script_named(tmp_path, "python3")
    code, err = _cli(capsys, tmp_path, "matrix", "--repro", "gan", "--python", str(script), "--list")
    assert code == 2 and "is a script (#!), not an interpreter" in err and "Traceback" not in err
    assert not (tmp_path / "ran").exists()


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("--slurm-arg", "wrap=curl x | sh"), "sbatch's --wrap runs something other"),
        (("--slurm-arg=--wrap=id",), "without dashes"),
        (("--slurm-arg=-w",), "without dashes"),
        (("--slurm-partition=-pwned",), "--slurm-partition '-pwned': must be a Slurm name"),
        (("--slurm-account", "a\n#SBATCH --wrap=id"), "--slurm-account"),
    ],
)
def test_a_slurm_option_in_disguise_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, args: tuple[str, ...], needle: str
) -> None:
    code, err = _cli(capsys, tmp_path, "matrix", "--repro", "gan", "--executor", "slurm", *args)
    assert code == ConfigError.return_code and needle in err and "Traceback" not in err


def test_slurm_where_none_is_installed_is_one_line_and_its_code(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = tmp_path / "no-slurm"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    code, err = _cli(capsys, tmp_path, "matrix", "--repro", "gan", "--executor", "slurm")
    assert code == EngineError.return_code, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert lines == [
        "reprobisect: error: --executor slurm: sbatch and sacct not found on PATH; Slurm is not installed here"
    ]


@pytest.mark.parametrize("budget", ["99999999999999999999h", "1e30s", "99999999999runs", "0runs", "-5m", "nanm"])
def test_a_minimization_budget_out_of_bounds_is_one_line(budget: str) -> None:
    from reprobisect.minimize.request import parse_budget

    with pytest.raises(ConfigError) as caught:
        parse_budget([budget])
    assert "--budget" in str(caught.value) and "\n" not in str(caught.value)


def test_a_minimization_budget_in_bounds_is_kept() -> None:
    from reprobisect.minimize.request import parse_budget

    budget = parse_budget(["720h", "200runs"])
    assert budget.seconds == 720 * 3600 and budget.runs == 200
