"""Text from outside is inert everywhere, the terminal included (issue #50, item 5): commit subjects, file names of a
merged folder and script arguments with escape sequences (OSC title, OSC 52 clipboard, CSI clear) or newlines reach
no terminal as they are, and a Reproduce / Re-run line is one line that re-runs exactly what ran, or says it cannot.
"""

from __future__ import annotations

import io
import shlex
import shutil
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reprobisect.commands.bisect import _print_report
from reprobisect.commands.main import main
from reprobisect.model.bisect_report import BisectReport
from reprobisect.model.culprit import Commit, Culprit, SearchTarget
from reprobisect.report.summary import markdown_summary
from reprobisect.util.console import NeutralStream, neutral_terminal
from reprobisect.util.neutral import command_line, md_code
from tests.bisect_reports import bisect_report, transition

HOSTILE = "Fix it\x1b]0;pwned\x07\x1b[2J\x1b]52;c;cm0gLXJmIH4=\x07\nrm -rf ~ (#7)"
BASELINE = Path(__file__).parents[1] / "resources" / "records" / "baseline"


def _report_with_culprit(subject: str) -> BisectReport:
    side = {"outcome": "FAIL", "signature_id": "abc", "signature": "AssertionError: x"}
    culprit = Culprit(
        last="0.16.4",
        first="0.16.5",
        kind="introduced",
        target=SearchTarget(outcome="FAIL", signature_id="abc"),
        commit=Commit(sha="a" * 40, subject=subject, pull_request="o/r#7"),
    )
    return bisect_report(transitions=[transition("0.16.4", "0.16.5", side, side)], culprits=(culprit,), runs=3)


def test_a_culprit_subject_reaches_the_terminal_inert_and_on_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    with neutral_terminal():
        _print_report(_report_with_culprit(HOSTILE), tmp_path / "bisect.json", all_transitions=False)
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out
    [line] = [line for line in out.splitlines() if "introduced by" in line]
    assert line.endswith("Fix it rm -rf ~ (#7) (o/r#7)")  # the subject's newline did not start a line of its own


def test_the_culprit_line_is_inert_even_printed_without_the_wrapper(capsys: pytest.CaptureFixture[str]) -> None:
    _print_report(_report_with_culprit(HOSTILE), Path("bisect.json"), all_transitions=False)
    assert "\x1b" not in capsys.readouterr().out


def test_every_command_prints_through_the_neutral_terminal(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A file name of a merged folder is printed in a warning: an OSC sequence in it must not set the title."""
    out, merged = tmp_path / "out", tmp_path / "b"
    shutil.copytree(BASELINE, out)
    planted = merged / "records" / "gan" / "cell" / "x\x1b]0;pwned\x07\x1b[2J__none__r0.json"
    planted.parent.mkdir(parents=True)
    planted.write_text("{")
    assert main(["report", "--out", str(out), "--merge", str(merged), "--dest", str(tmp_path / "r")]) == 0
    captured = capsys.readouterr()
    assert "\x1b" not in captured.err + captured.out
    assert "/cell/x__none__r0.json: not a readable JSON record" in captured.err  # named, as a terminal can show it
    assert sys.stdout is not None and not isinstance(sys.stdout, NeutralStream)  # restored after the command


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_no_escape_byte_passes_the_neutral_stream(text: str) -> None:
    raw = io.StringIO()
    stream = NeutralStream(raw)
    for part in (text[: len(text) // 2], text[len(text) // 2 :]):  # an escape split over two writes too
        stream.write(part)
    assert "\x1b" not in raw.getvalue() and "\x9b" not in raw.getvalue()


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(max_size=30), min_size=1, max_size=8))
def test_a_command_line_is_one_line_that_runs_exactly_those_words_or_says_it_cannot(words: list[str]) -> None:
    line = command_line(words)
    assert "\n" not in line and "\r" not in line and "\x1b" not in line
    if line.startswith("# the command cannot be shown as one line: argument "):
        assert any(not word.isprintable() for word in words)
    else:
        assert shlex.split(line) == words


@pytest.mark.parametrize(
    ("words", "why"),
    [
        (["nox", "-s", "triage", "--", "issue\n.py"], "argument 4 holds a line break"),
        (["nox", "-s", "triage", "--", "x.py", "--", "--lr=\x1b]0;t\x07"], "argument 6 holds an escape sequence"),
        (["reprobisect", "triage", "x.py", "--", "a\x00b"], "argument 4 holds a control character"),
    ],
)
def test_a_command_with_an_unshowable_argument_says_which(words: list[str], why: str) -> None:
    assert command_line(words) == f"# the command cannot be shown as one line: {why}"


@given(st.text(alphabet="ab` ", max_size=20))
def test_a_code_span_holds_any_backticks(text: str) -> None:
    span = md_code(text)
    fence = len(span) - len(span.lstrip("`"))
    assert span.endswith("`" * fence) and "`" * fence not in span[fence:-fence]


def test_the_summary_shows_a_command_with_backticks_as_one_code_span() -> None:
    command = command_line(["nox", "-s", "triage", "--", "x.py", "--name=`id`"])
    text = markdown_summary([], title="t", command=command)
    assert f"Reproduce: ``{command}``" in text
