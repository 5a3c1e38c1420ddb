"""Every pattern the harness runs over a run's output costs time in proportion to the output (issue #30 item 1).

A run prints what it likes: a base64 blob, a hex dump, a million digits without a newline. A pattern that
restarts its scan inside such a run (``[A-Za-z][A-Za-z0-9+.-]*://`` did) is quadratic, and one log line then
hangs the report, the summary and the nightly issue. Each function below is given adversarial text built from
long runs of one character class, nested near-URLs and near-escapes, with a time bound proportional to its size.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reprobisect.model.signature import exit_signature, normalize_message, signature_from_log
from reprobisect.report.logs import traceback_text
from reprobisect.run.events import parse_events
from reprobisect.util.neutral import html_text, md_document, md_safe, printable
from reprobisect.util.redact import redact

# Units repeated into a long run: each character class the patterns scan, and the near-misses they backtrack on.
UNITS = (
    "a",
    "Z",
    "7",
    "f0",
    "a+",
    "a.",
    "a-",
    "0x",
    "1.",
    "1e",
    "/a",
    "\\a",
    "C:",
    " ",
    "\t",
    "a:",
    "a:/",
    "a://",
    "a://b",
    "https://u:",
    "@",
    "a@",
    "\x1b[",
    "\x1b[0",
    "\x1b]",
    "\x1b",
    "<",
    "|",
    "@@repro ",
    'File "',
    "rank0: ",
    "Traceback (most recent call last):\n",
    '  File "/x/torch/a.py", line 1, in f\n',
)
FUNCTIONS: dict[str, Callable[[str], object]] = {
    "redact": redact,
    "normalize_message": normalize_message,
    "signature_from_log": signature_from_log,
    "exit_signature": lambda text: exit_signature(1, text),
    "printable": printable,
    "md_safe": md_safe,
    "parse_events": lambda text: list(parse_events(text)),
    "traceback_text": traceback_text,
    "md_document": md_document,
    "html_text": html_text,
}
SIZE = 200_000  # a quadratic scan takes tens of seconds here; a linear one milliseconds
SECONDS_PER_CHAR = 2e-6  # 0.4 s for SIZE: generous for a shared machine, far below any quadratic scan


@st.composite
def adversarial(draw: st.DrawFn) -> str:
    """One or two long runs of units, with a short prefix and suffix that make the scan fail or succeed late."""
    runs = draw(st.lists(st.sampled_from(UNITS), min_size=1, max_size=2))
    edge = st.sampled_from(["", "a", "!", "://", "@", "\n", "\x07", "x://u:t@h/"])
    body = "".join(unit * (SIZE // len(runs) // len(unit)) for unit in runs)
    return draw(edge) + body + draw(edge)


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(text=adversarial())
def test_every_pattern_over_run_output_is_linear(name: str, text: str) -> None:
    start = time.perf_counter()
    FUNCTIONS[name](text)
    took = time.perf_counter() - start
    assert took < SECONDS_PER_CHAR * len(text) + 0.05, f"{name}: {took:.2f} s for {len(text)} characters"


def test_ten_mib_of_letters_is_redacted_in_a_second() -> None:
    """The issue's case: a repro printing 10 MiB without a newline; the old pattern ran for minutes."""
    text = "A" * 10 * 2**20 + " https://user:TOKEN@host/x"
    start = time.perf_counter()
    shown = redact(text)
    assert time.perf_counter() - start < 2
    assert shown.endswith("https://***@host/x")


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("xhttps://u:t@h", "xhttps://***@h"),  # a scheme may start anywhere a scheme character does not precede it
        ("=https://u:t@h", "=https://***@h"),
        ("git+https://u:t@github.com/o/r@main", "git+https://***@github.com/o/r@main"),
        ("a://b://u:t@h", "a://b://***@h"),
    ],
)
def test_the_anchored_scheme_still_finds_every_url(raw: str, shown: str) -> None:
    assert redact(raw) == shown
