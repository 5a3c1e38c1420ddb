"""The one neutraliser (util/neutral.py): what each reader of a run's text gets (issue #30, item 3)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from reprobisect.util.neutral import html_text, md_document, md_safe, printable

HOSTILE = "\x1b]0;title\x07\x1b[2J\x1b]52;c;cm0=\x07\x1b[8mhidden\x1b[0m\x00 cc @maintainer <!-- <script>"


def test_each_reader_gets_the_text_without_what_acts() -> None:
    assert printable(HOSTILE) == "hidden? cc @maintainer <!-- <script>"
    assert md_safe(HOSTILE) == "hidden  cc @\u200bmaintainer &lt;!-- &lt;script>"  # sequences gone whole
    assert md_document("a\x1b[31mb\x00c\n\td") == "abc\n\td"
    shown = html_text(HOSTILE)
    assert shown.startswith("\u241b]0;title\u2407\u241b[2J") and "\u2400" in shown and "@\u200bmaintainer" in shown


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_no_control_character_passes_any_reader(text: str) -> None:
    for shown in (printable(text), md_safe(text), md_document(text), html_text(text)):
        assert not any((ord(c) < 0x20 and c not in "\n\t") or 0x7F <= ord(c) <= 0x9F for c in shown)
