"""The trend of the corpus's whole runs (issue #52): an inline SVG with no script, drawn for no point, one point and
many, its text escaped (the labels come from corpus/history.jsonl, a file people edit), and the page beside
corpus.md that shows it with the table."""

from __future__ import annotations

import dataclasses
import re
import xml.etree.ElementTree as ET
from pathlib import Path

from reprobisect.corpus.page import page_html, trend, write_page
from reprobisect.corpus.run_history import History, Point
from reprobisect.corpus.scoring import score
from reprobisect.corpus.table import Header, Ran, Table
from reprobisect.report.trend import Series, trend_svg
from tests.unit.test_corpus import _found, _truth
from tests.unit.test_corpus_table import RowWithRule

SVG = "{http://www.w3.org/2000/svg}"


def _points(count: int) -> list[Point]:
    return [
        Point(date=f"2026-12-{i + 1:02d}", commit=f"{i:040x}", k=i % 5, n=4 + i % 2, wall_seconds=600.0 + 90 * i,
              backend="cpu")
        for i in range(count)
    ]  # fmt: skip


def _circles(svg: str) -> list[ET.Element]:
    return list(ET.fromstring(svg).iter(f"{SVG}circle"))


def test_no_point_says_so_and_draws_nothing() -> None:
    svg = trend(History(points=[]))
    assert "no whole corpus run recorded yet" in svg and not _circles(svg) and "<script" not in svg


def test_one_point_is_drawn_in_the_middle_of_each_panel() -> None:
    svg = trend(History(points=_points(1)))
    circles = _circles(svg)
    assert len(circles) == 2 and "polyline" not in svg  # one panel for k of n, one for the wall time
    assert {c.get("cx") for c in circles} == {"340.0"}
    assert "2026-12-01 000000000000 cpu: 0 of 4: 0 %" in svg


def test_many_points_are_drawn_oldest_left_within_the_frame() -> None:
    svg = trend(History(points=_points(30)))
    root = ET.fromstring(svg)
    circles = _circles(svg)
    assert len(circles) == 60 and len(list(root.iter(f"{SVG}polyline"))) == 2
    xs = [float(c.get("cx") or 0) for c in circles[:30]]
    assert xs == sorted(xs) and xs[0] >= 56 and xs[-1] <= 640 - 16
    ys = [float(c.get("cy") or 0) for c in circles]
    assert all(0 <= y <= float(root.get("height") or 0) for y in ys)
    assert "43 min" in svg  # the longest run, on the wall time's axis


def test_text_from_the_history_is_escaped() -> None:
    hostile = Point(date='<script>alert(1)</script>"', commit="&x\x1b[2J", k=1, n=2, wall_seconds=1.0, backend="<b>")
    svg = trend(History(points=[hostile]))
    ET.fromstring(svg)  # well-formed: nothing broke out of its element or attribute
    assert "<script" not in svg and "&lt;script&gt;" in svg and "\x1b" not in svg and "&amp;x␛[2J" in svg
    plain = trend_svg([Series(title="a & <b>", top=0.0, values=[0.0], tips=["t"], shown=str)])
    assert "a &amp; &lt;b&gt;" in plain and ET.fromstring(plain) is not None  # a top of 0 draws, no division by 0


def test_the_page_beside_corpus_md_shows_the_table_the_header_and_the_trend(tmp_path: Path) -> None:
    truth = _truth(tmp_path)
    header = Header(commit="abc+dirty", date="2026-12-07 05:00 UTC", backend="cpu", entry_jobs=1, wall_seconds=60.0)
    row = score(truth, _found())
    rows = [Ran(row=RowWithRule(**{f.name: getattr(row, f.name) for f in dataclasses.fields(row)}))]
    table = Table(rows=rows, not_run=[], command="reprobisect corpus <x>", header=header)
    page = write_page(table, History(points=_points(3), skipped=1, why="history.jsonl:4: garbage"), tmp_path)
    text = page.read_text()
    assert page.name == "corpus.html" and "abc+dirty" in text and "1 of 1 exact" in text
    assert "interaction rule?" in text and "<svg" in text and "Trend over whole runs (3)" in text
    assert "1 line(s) of the history skipped" in text and "reprobisect corpus &lt;x&gt;" in text
    assert not re.search(r"<script|https?://(?!www\.w3\.org/2000/svg)", page_html(table, History(points=[])))
