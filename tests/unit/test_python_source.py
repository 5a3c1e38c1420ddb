"""Any text parses to a tree or a SyntaxError, on every supported Python (3.11.2 raised ValueError for NUL bytes)."""

from __future__ import annotations

import ast
import contextlib
import sys
import threading
from collections.abc import Callable
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


def _deeper(levels: int, call: Callable[[], object]) -> object:
    """``call()`` from ``levels`` frames further down: the tree builder starts its count from the caller's depth."""
    return call() if levels == 0 else _deeper(levels - 1, call)


def _parse_while_another_thread_parses(parse: Callable[[str], object]) -> list[str]:
    """The SystemError, if any, of one parse during which, half built, another thread parses the same text from a
    deeper stack: what a garbage collection whose finalizer hands the GIL over does at random in a busy process,
    here made certain by a Python ``__setattr__`` that the tree builder calls on each function node it builds."""
    source = "def f(x):\n    return [y for y in x if (y and (y or x))]\n"
    go, done = threading.Event(), threading.Event()
    first = threading.get_ident()

    def other() -> None:
        go.wait(10)
        _deeper(10, lambda: parse(source))
        done.set()

    def hand_over(node: ast.AST, name: str, value: object) -> None:
        object.__setattr__(node, name, value)
        if threading.get_ident() == first and not go.is_set():
            go.set()
            done.wait(1)  # a parse that waits for ours (parse_python's lock) is not done before this times out

    thread = threading.Thread(target=other)
    thread.start()
    ast.FunctionDef.__setattr__ = hand_over  # type: ignore[method-assign,assignment]
    try:
        parse(source)
    except SystemError as exc:
        return [str(exc)]
    finally:
        del ast.FunctionDef.__setattr__
        go.set()
        thread.join()
    return []


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="the shared depth counter is a Python 3.11 tree builder's")
def test_two_threads_parsing_at_once_break_python_3_11_s_tree_builder() -> None:
    """The control: what parse_python guards against is real on the interpreters we support first."""
    errors = _parse_while_another_thread_parses(ast.parse)
    assert errors and "recursion depth mismatch" in errors[0]


def test_parse_python_is_not_broken_by_another_thread_s_parse() -> None:
    """The minimizer reads a script's imports in the bad and the good cell's threads at once: CI saw the
    SystemError there on 3.11.2 before parses were held one at a time."""
    assert _parse_while_another_thread_parses(parse_python) == []
