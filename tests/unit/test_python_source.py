"""Any text parses to a tree or a SyntaxError, on every supported Python (3.11.2 raised ValueError for NUL bytes)."""

from __future__ import annotations

import ast
import contextlib
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reprobisect.errors import ConfigError
from reprobisect.minimize.original import parse_original
from reprobisect.minimize.static import undefined_names
from reprobisect.run.bytecode import script_modules
from reprobisect.util.python_source import parse_python

NASTY = [
    "x = 1\0\n",  # ValueError on Python < 3.11.4, SyntaxError after
    "import os\nprint('a')\n\0",
    "(" * 100_000 + ")" * 100_000,  # too deep for the parser
    "[" * 5_000 + "]" * 5_000,
    "-" * 200_000 + "1",  # too deep for compile()
    "\ud800 = 1",  # a lone surrogate
]


@pytest.mark.parametrize("text", NASTY, ids=range(len(NASTY)))
def test_nasty_text_is_a_syntax_error_with_a_line(text: str) -> None:
    try:
        tree = parse_python(text, "issue.py")
    except SyntaxError as exc:
        assert exc.filename == "issue.py" and isinstance(exc.lineno, int) and exc.lineno >= 1
    else:
        assert isinstance(tree, ast.Module)


def test_a_nul_byte_is_named_on_its_line() -> None:
    with pytest.raises(SyntaxError) as caught:
        parse_python("a = 1\nb = 2\0\n", "issue.py")
    assert caught.value.lineno == 2


@given(st.text(alphabet=st.characters(codec="utf-8") | st.sampled_from(["\0", "(", ")", "\n", ":", " "]), max_size=300))
def test_any_text_is_a_tree_or_a_syntax_error(text: str) -> None:
    with contextlib.suppress(SyntaxError):
        assert isinstance(parse_python(text), ast.Module)
    # what the harness builds on it answers too, never raises
    assert undefined_names(text) is None or isinstance(undefined_names(text), frozenset)
    assert isinstance(script_modules([text]), tuple)


@pytest.mark.parametrize("text", NASTY[:3], ids=range(3))
def test_minimize_refuses_a_script_that_does_not_parse_in_one_line(tmp_path: Path, text: str) -> None:
    script = tmp_path / "issue.py"
    with pytest.raises(ConfigError) as caught:
        parse_original(script, text)
    message = str(caught.value)
    assert str(script) in message and "\n" not in message and "minimize needs a Python script" in message
