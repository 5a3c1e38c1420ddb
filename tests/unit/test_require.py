"""``--require NAME==VERSION``: a package besides the matrix's that every cell installs at one version (a report's
environment had numpy 1.26.4, say). It is an axis of one value: the cell's id names it, and the search's probes and
its commit searches carry it. Its values are hostile input: one package, one exact version, never an option."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reprobisect.commands import triage, triage_flow
from reprobisect.commands.run_options import parse_requires
from reprobisect.commands.triage_options import TriageOptions
from reprobisect.errors import ConfigError
from reprobisect.run.matrix_plan import plan_cells, to_cell
from reprobisect.run.matrix_request import MatrixRequest
from reprobisect.run.sandbox import Confinement
from tests.unit.test_run_matrix import BASE, FakeIndex
from tests.unit.test_script_imports import PURE_DEEPSPEED, _config, _script


def test_a_required_package_is_in_every_cell_and_its_id() -> None:
    assert parse_requires(["numpy==1.26.4", " setuptools == 84.2.1 "]) == {"numpy": "1.26.4", "setuptools": "84.2.1"}


def test_every_planned_cell_pins_the_required_package(tmp_path: Path) -> None:
    config = _config(tmp_path, _script(tmp_path, PURE_DEEPSPEED))
    request = MatrixRequest(
        repros=("issue",), backend="cpu", confinement=Confinement(sandbox=False), requires={"numpy": "1.26.4"}
    )
    index = FakeIndex({"deepspeed": ["0.15.4", "0.16.4"], "lightning": ["2.6.6"], "numpy": ["1.26.4", "2.1.0"]})
    cells = plan_cells(config, request, BASE, index)  # type: ignore[arg-type]
    assert [c.pins["numpy"] for c in cells] == ["1.26.4", "1.26.4"]
    made = [to_cell(c, BASE)[0] for c in cells]
    assert all(cell is not None and cell.packages["numpy"] == "1.26.4" and "numpy-1.26.4" in cell.id for cell in made)
    with pytest.raises(ConfigError, match="not a release on the configured index"):
        plan_cells(config, MatrixRequest(repros=("issue",), requires={"numpy": "9.9.9"}), BASE, index)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"is an axis of matrix\.yaml; pin it with --deepspeed"):
        plan_cells(config, MatrixRequest(repros=("issue",), requires={"deepspeed": "0.16.4"}), BASE, index)  # type: ignore[arg-type]


def test_a_held_pin_that_is_the_required_package_is_the_requirement_not_an_axis(tmp_path: Path) -> None:
    """A commit search behind a grid's edge holds the grid's other pins, read from its cells, and those name the
    --require too (numpy 1.26.4 beside torch): the same version is the requirement; another is still refused."""
    config = _config(tmp_path, _script(tmp_path, PURE_DEEPSPEED))
    index = FakeIndex({"deepspeed": ["0.15.4", "0.16.4"], "lightning": ["2.6.6"], "numpy": ["1.26.4", "2.1.0"]})
    held = {"numpy": ("1.26.4",), "deepspeed": ("0.16.4",)}
    request = MatrixRequest(repros=("issue",), axes=held, requires={"numpy": "1.26.4"})
    cells = plan_cells(config, request, BASE, index)  # type: ignore[arg-type]
    assert [(c.pins["numpy"], c.pins["deepspeed"]) for c in cells] == [("1.26.4", "0.16.4")]
    other = MatrixRequest(repros=("issue",), axes={"numpy": ("2.1.0",)}, requires={"numpy": "1.26.4"})
    with pytest.raises(ConfigError, match=r"--numpy: 'numpy' is not an axis of matrix\.yaml"):
        plan_cells(config, other, BASE, index)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("numpy", "give NAME==VERSION"),
        ("numpy>=1.26", "give NAME==VERSION"),
        ("numpy==latest", "give NAME==VERSION"),
        ("numpy==1.26.4; rm -rf /", "give NAME==VERSION"),
        ("--index-url==1.0", "give NAME==VERSION"),
        ("numpy==git+https://x/y", "give NAME==VERSION"),
        ("deepspeed==0.16.4", "pin it with --deepspeed"),
        ("Torch==2.4.0", "pin it with --torch"),
    ],
)
def test_a_hostile_require_is_refused_naming_it(value: str, words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        parse_requires([value])


def test_a_package_required_twice_is_refused() -> None:
    with pytest.raises(ConfigError, match="required twice"):
        parse_requires(["numpy==1.26.4", "NumPy==2.0.0"])


@given(st.text(max_size=60))
def test_any_text_is_a_requirement_or_one_refusal(text: str) -> None:
    try:
        found = parse_requires([text])
    except ConfigError as exc:
        assert str(exc).startswith("--require ")
    else:
        [(name, version)] = found.items()
        assert not name.startswith("-") and version[0].isdigit() and " " not in version and ";" not in version


def test_triage_carries_it_to_the_release_search_and_the_commit_searches() -> None:
    parser = argparse.ArgumentParser()
    triage.setup_arguments(parser.add_subparsers())
    args = parser.parse_args(["triage", "issue.py", "--deepspeed", "0.14.2,0.14.4", "--require", "numpy==1.26.4"])
    options = TriageOptions.from_args(args)
    assert options.run.requires == {"numpy": "1.26.4"}
    request = triage_flow._search_request(
        options, "script-issue", "cpu-deepspeed", "deepspeed", ("0.14.2", "0.14.4"), {}
    )
    assert request.requires == {"numpy": "1.26.4"}
