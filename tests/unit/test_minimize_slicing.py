"""The failure's slice (minimize/slicing.py): what the failing line needs stays, the rest goes, and what acts on a
needed object (a method called for its effect, an item assigned) counts as needed."""

from __future__ import annotations

import ast
import textwrap

from hypothesis import given, settings
from hypothesis import strategies as st

from reprobisect.minimize.slicing import failure_slice
from reprobisect.minimize.static import undefined_names
from tests.unit.test_minimize import SOURCES

FLAT = textwrap.dedent(
    """
    import logging
    import time
    import torch

    LOG = logging.getLogger("x")
    started = time.time()
    data = [1, 2, 3]
    model = torch.nn.Linear(2, 1)
    model.weight.data.fill_(1.0)
    settings = {}
    settings["lr"] = 0.1
    history = []
    for step, item in enumerate(data):
        history.append(item)
        x = torch.ones(1, 2) * settings["lr"]
        y = model(x)
        LOG.info("step %d took %.1f s", step, time.time() - started)
        assert y.item() < 0, f"positive: {y.item()}"
    print(history)
    """
)


def _line(source: str, text: str) -> int:
    return next(i for i, line in enumerate(source.splitlines(), start=1) if text in line)


def test_the_slice_keeps_what_the_failing_line_needs_and_what_acts_on_it() -> None:
    sliced = failure_slice(FLAT, [_line(FLAT, "assert y.item()")])
    assert sliced is not None
    for kept in (
        "model.weight.data.fill_(1.0)",
        'settings["lr"] = 0.1',
        "settings = {}",
        "for step, item",
        "y = model(x)",
    ):
        assert kept in sliced, kept
    for gone in ("LOG.info", "history.append", "print(history)", "started = "):
        assert gone not in sliced, gone
    ast.parse(sliced)


def test_unwrapping_the_loop_lets_what_only_the_loop_needed_go() -> None:
    sliced = failure_slice(FLAT, [_line(FLAT, "assert y.item()")], unwrap=True)
    assert sliced is not None
    assert "for step" not in sliced and "data = " not in sliced
    assert "\nassert y.item() < 0" in sliced and "\ny = model(x)" in sliced  # one indent less
    ast.parse(sliced)


def test_nothing_to_cut_or_no_line_is_none() -> None:
    assert failure_slice("x = 1\nassert x == 2\n", [2]) is None
    assert failure_slice(FLAT, []) is None
    assert failure_slice("def broken(:\n", [1]) is None


def test_a_loop_with_else_or_a_string_across_lines_is_not_unwrapped() -> None:
    source = 'for i in range(2):\n    s = """a\nb"""\n    assert not s\n'
    assert failure_slice(source, [4], unwrap=True) is None
    source = "for i in range(2):\n    assert i\nelse:\n    pass\n"
    assert failure_slice(source, [2], unwrap=True) is None


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(SOURCES), st.data())
def test_any_slice_of_a_real_script_parses_and_defines_what_it_reads(source: str, data: st.DataObject) -> None:
    """From any of its lines as the failing one, the slice (unwrapped or not) parses, and it reads no name it
    does not define that the script defined (when it compiles at all: an unwrapped ``break`` does not)."""
    count = source.count("\n") + 1
    line = data.draw(st.integers(1, count))
    before = undefined_names(source) or frozenset()
    for unwrap in (False, True):
        sliced = failure_slice(source, [line], unwrap=unwrap)
        if sliced is None:
            continue
        after = undefined_names(sliced)
        if after is not None:
            assert after <= before, (line, unwrap, after - before)


def test_a_loop_whose_body_reads_its_target_is_not_unwrapped() -> None:
    source = "total = 0\nfor i in range(3):\n    total += i\n    assert total < 2\n"
    assert failure_slice(source, [4], unwrap=True) is None
