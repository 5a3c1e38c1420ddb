"""Text from runs and records, shown in Markdown that a workflow posts as a GitHub issue (issue #16)."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reprobisect.model.signature import Signature
from reprobisect.report.frame import load_records, records_frame
from reprobisect.report.markdown import fit_limit, report_markdown
from reprobisect.report.views import ReportData
from reprobisect.util.neutral import md_safe

BASELINE = Path(__file__).parents[1] / "resources" / "records" / "baseline"


@pytest.mark.parametrize(
    ("raw", "safe"),
    [
        ("ping @octocat and @org/team", "ping @\u200boctocat and @\u200borg/team"),
        ("git+https://host/o/r.git@v0.16.4 user@example.org", "git+https://host/o/r.git@v0.16.4 user@example.org"),
        ("boom\n<!-- the rest is hidden", "boom &lt;!-- the rest is hidden"),
        ("a | b", "a \\| b"),
        ("<img src=x onerror=alert(1)>", "&lt;img src=x onerror=alert(1)>"),
    ],
)
def test_md_safe(raw: str, safe: str) -> None:
    assert md_safe(raw) == safe


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_md_safe_never_leaves_a_line_break_a_tag_or_a_mention(text: str) -> None:
    safe = md_safe(text)
    assert "\n" not in safe and "\r" not in safe and "<" not in safe
    # GitHub links @name (ASCII letters, digits, '-', '_') when no word character or '/' stands before it
    assert re.search(r"(?<![\w/.+-])@[A-Za-z0-9_-]", safe) is None


def _data_with_hostile_signature(text: str) -> ReportData:
    loaded = load_records([BASELINE])
    first = loaded[0]
    signature = Signature(exception="RuntimeError", message=text)  # a forged record's message can be anything
    hostile = dataclasses.replace(first.record, signature=signature, known_signature=None, run_id="hostile")
    items = [dataclasses.replace(first, record=hostile), *loaded[1:]]
    return ReportData(frame=records_frame(items), sources=[BASELINE])


def test_a_hostile_signature_cannot_ping_hide_or_break_the_report() -> None:
    markdown = report_markdown(_data_with_hostile_signature("cc @maintainer\n<!-- hide everything | x"))
    assert "@maintainer" not in markdown and "@\u200bmaintainer" in markdown
    assert "<!--" not in markdown and "&lt;!--" in markdown


def test_the_report_fits_githubs_limit_whatever_it_holds() -> None:
    data = _data_with_hostile_signature("x" * 200_000)
    assert len(report_markdown(data, limit=60_000)) <= 60_000
    assert len(report_markdown(data, limit=5_000)) <= 5_000


def test_fit_limit_cuts_at_a_line_end_and_says_so() -> None:
    text = "\n".join(f"line {i}" for i in range(10_000))
    cut = fit_limit(text, 1_000)
    assert len(cut) <= 1_000 and "Cut here to fit GitHub's limit" in cut
    assert fit_limit("short", 1_000) == "short"
