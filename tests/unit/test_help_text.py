"""``--help`` is read by people in a terminal: no reStructuredText markup, and it says where the cells go."""

from __future__ import annotations

import contextlib
import io
import re

import pytest

from reprobisect.commands.main import COMMANDS, main
from reprobisect.util.invocation import default_cells_dir, rerun_words
from reprobisect.util.neutral import command_line

RST = re.compile(r"``|:(func|class|meth|mod|attr|data|ref):`")


def _help(*words: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        main([*words, "--help"])
    return out.getvalue()


@pytest.mark.parametrize("command", ["", *COMMANDS])
def test_no_help_shows_raw_rest(command: str) -> None:
    text = _help(*([command] if command else []))
    assert not RST.search(text), RST.search(text)


def test_the_help_of_a_cell_building_command_says_where_the_cells_go() -> None:
    text = " ".join(_help("triage").split())
    assert f"default here: {default_cells_dir()}" in text


def test_cells_go_to_the_checkout_under_nox_and_to_the_cache_folder_installed(tmp_path: object) -> None:
    assert str(default_cells_dir({"NOX_CURRENT_SESSION": "tests"})) == ".cells"
    installed = default_cells_dir({"XDG_CACHE_HOME": "/var/cache/me"})
    assert str(installed) == "/var/cache/me/reprobisect/cells"
    assert str(default_cells_dir({"XDG_CACHE_HOME": "relative"})).endswith(".cache/reprobisect/cells")
    assert str(default_cells_dir({"REPROBISECT_ENVS": "/x", "NOX_CURRENT_SESSION": "t"})) == "/x"


def test_a_command_line_is_the_one_that_runs_where_the_harness_runs() -> None:
    nox, installed = {"NOX_CURRENT_SESSION": "triage"}, {}
    assert command_line(rerun_words("triage", ["triage"], ["a b.py", "--deepspeed", ">=0.16"], nox)) == (
        "nox -s triage -- 'a b.py' --deepspeed '>=0.16'"
    )
    assert command_line(rerun_words("triage", ["triage"], ["x.py"], installed)) == "reprobisect triage x.py"
    assert command_line(rerun_words("repro_gan", ["repro", "gan"], [], nox)) == "nox -s repro_gan"
    assert command_line(rerun_words("repro_gan", ["repro", "gan"], [], installed)) == "reprobisect repro gan"
