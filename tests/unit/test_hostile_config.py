"""Hostile matrix.yaml and command lines (issue #16): a ConfigError that names the file, key and value,
never a raw traceback, a memory blow-up, a file outside --out, or an option slipped to pip, uv or git."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from reprobisect.commands.main import main
from reprobisect.config.load import load_config
from reprobisect.errors import ConfigError
from reprobisect.nightly.targets import Target, pinned_ref
from tests.conftest import ROOT

MINIMAL = """\
version: 1
repros:
  gan:
    title: t
    forms:
      cpu-deepspeed: {script: repro.py, precision: bf16}
    fixes:
      none: {}
"""


def _write(tmp_path: Path, text: str) -> Path:
    (tmp_path / "repro.py").write_text("print('hi')\n")
    path = tmp_path / "matrix.yaml"
    path.write_text(text)
    return path


def test_the_minimal_file_loads(tmp_path: Path) -> None:
    assert set(load_config(_write(tmp_path, MINIMAL)).repros) == {"gan"}


def test_a_key_given_twice_is_an_error_not_the_last_one_winning(tmp_path: Path) -> None:
    text = MINIMAL.replace("    title: t\n", "    title: t\n    title: u\n")
    with pytest.raises(ConfigError, match=r"matrix\.yaml: not valid YAML: .*key 'title' given twice"):
        load_config(_write(tmp_path, text))


def test_a_billion_laughs_is_refused_at_once(tmp_path: Path) -> None:
    lol = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lol += [f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}" + f",*{chr(97 + i)}" * 8 + "]" for i in range(8)]
    start = time.perf_counter()
    with pytest.raises(ConfigError, match="aliases"):
        load_config(_write(tmp_path, "\n".join(lol) + "\n" + MINIMAL.replace("version: 1\n", "")))
    assert time.perf_counter() - start < 5


def test_deep_nesting_is_a_config_error_not_a_recursion_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="nested deeper than"):
        load_config(_write(tmp_path, MINIMAL + "matrix: " + "[" * 5000 + "]" * 5000 + "\n"))


@pytest.mark.parametrize(
    ("old", "new", "needle"),
    [
        ("  gan:\n", "  ../../escape:\n", "repro name '../../escape' is not allowed"),
        ("  gan:\n", '  "a\\nb":\n', "repro name 'a\\nb' is not allowed"),
        ("      none: {}\n", "      none: {}\n      ../x: {}\n", "fix name '../x' is not allowed"),
        ("      none: {}\n", "      none: {}\n      a/b: {}\n", "fix name 'a/b' is not allowed"),
        (
            "version: 1\n",
            "version: 1\nmatrix: {axes: {deepspeed: ['--index-url=http://evil']}}\n",
            "starts with '-', which pip, uv or git would read as an option",
        ),
        ("version: 1\n", 'version: 1\ndefault_cell: {deepspeed: "0.16.4\\n--pre"}\n', "control character"),
        ("      none: {}\n", "      none: {}\n      o: {override: {deepspeed: '-e/tmp/x'}}\n", "starts with '-'"),
    ],
)
def test_names_and_values_that_would_escape_are_refused(tmp_path: Path, old: str, new: str, needle: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(_write(tmp_path, MINIMAL.replace(old, new)))
    assert needle in str(caught.value) and "matrix.yaml" in str(caught.value)


@pytest.mark.parametrize(
    "args",
    [
        ("repro", "gan", "--deepspeed=--upload-pack=touch /tmp/pwned"),
        ("bisect", "--repro", "gan", "--good=--output=/tmp/x", "--bad", "0.19.8"),
        ("nightly", "--deepspeed", "main", "--repo=--upload-pack=x"),
    ],
)
def test_an_option_in_disguise_never_reaches_a_tool(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, args: tuple[str, ...]
) -> None:
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
    assert code == 2
    assert "starts with '-'" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_a_git_url_that_is_an_option_is_refused_before_git_runs(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    target = Target(kind="ref", name="x", spec=f"git+--upload-pack=touch {marker}@main")
    with pytest.raises(ConfigError, match="is not a repository URL"):
        pinned_ref(target)
    assert not marker.exists()


yaml_scalars = st.none() | st.booleans() | st.integers() | st.text(max_size=20)
yaml_trees = st.recursive(
    yaml_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=12), inner, max_size=3),
    max_leaves=15,
)


@settings(max_examples=200, deadline=None)
@given(section=st.sampled_from(["matrix", "default_cell", "nightly", "repros", "version", "other"]), value=yaml_trees)
def test_any_yaml_gives_a_config_or_a_config_error(
    tmp_path_factory: pytest.TempPathFactory, section: str, value: object
) -> None:
    data = yaml.safe_load(MINIMAL)
    data[section] = value
    path = _write(tmp_path_factory.mktemp("fuzz"), yaml.safe_dump(data))
    try:
        load_config(path)
    except ConfigError as exc:
        assert "matrix.yaml" in str(exc) or "--" in str(exc)


PLACES = [
    ("repros", "gan", "title"),
    ("repros", "gan", "forms"),
    ("repros", "gan", "fixes"),
    ("repros", "gan", "timeout"),
    ("repros", "gan", "expected_signature"),
    ("repros", "gan", "fixes", "none"),
    ("repros", "gan", "fixes", "extra"),
    ("repros", "gan", "forms", "cpu-deepspeed"),
    ("repros", "gan", "forms", "cpu-deepspeed", "env"),
    ("repros", "gan", "forms", "cpu-deepspeed", "args"),
    ("repros", "gan", "forms", "cpu-deepspeed", "precision"),
    ("repros", "gan", "forms", "cpu-deepspeed", "distributed_env"),
]


@settings(max_examples=300, deadline=None)
@given(place=st.sampled_from(PLACES), value=yaml_trees)
def test_any_value_inside_a_repro_gives_a_config_or_a_config_error(
    tmp_path_factory: pytest.TempPathFactory, place: tuple[str, ...], value: object
) -> None:
    data = yaml.safe_load(MINIMAL)
    node = data
    for key in place[:-1]:
        node = node[key]
    node[place[-1]] = value
    path = _write(tmp_path_factory.mktemp("fuzz"), yaml.safe_dump(data))
    try:
        load_config(path)
    except ConfigError as exc:
        assert "matrix.yaml" in str(exc)


def test_a_broken_night_leaves_no_exit_status_for_the_workflow(tmp_path: Path) -> None:
    """nox turns every failure into exit 1; nightly.yml reads --out/exit-status: 1 there is a regression, no
    file is a harness error (and bad input writes nothing, a stale file from an earlier night included)."""
    bad = _write(tmp_path, MINIMAL.replace("    title: t\n", "    title: t\n    title: u\n"))
    out = tmp_path / "out"
    out.mkdir()
    (out / "exit-status").write_text("1\n")
    assert main(["nightly", "--config", str(bad), "--out", str(out), "--envs", str(tmp_path / "cells")]) == 2
    assert not (out / "exit-status").exists()
