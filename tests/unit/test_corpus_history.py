"""The corpus's history (issue #52): each whole run appends one line, and the file is read as hostile input — a
line the harness did not write is skipped and counted, a file that is not a plain file under its folder is refused,
never a traceback and never a point on the chart."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from reprobisect.corpus.run_history import MAX_BYTES, Point, append_point, read_history

POINT = Point(date="2026-12-07 05:00 UTC", commit="0123abcd", k=9, n=12, wall_seconds=5400.5, backend="cpu")


def test_points_are_appended_one_line_each_and_read_back_in_order(tmp_path: Path) -> None:
    path = tmp_path / "corpus" / "history.jsonl"
    assert read_history(path).points == []  # no file yet: no points, nothing skipped
    append_point(path, POINT)
    append_point(path, Point(**{**POINT.__dict__, "k": 10, "commit": "4567+dirty"}))
    assert len(path.read_text().splitlines()) == 2
    history = read_history(path)
    assert [p.k for p in history.points] == [9, 10] and history.skipped == 0 and history.points[0] == POINT


def test_a_line_cut_short_before_does_not_swallow_the_next(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    path.write_text('{"date": "2026-12-0')  # a run killed mid-write, a full disk
    append_point(path, POINT)
    history = read_history(path)
    assert history.points == [POINT] and history.skipped == 1 and "history.jsonl:1" in history.why


@pytest.mark.parametrize(
    "line",
    [
        "garbage",
        "[]",
        '"a string"',
        "{}",
        '{"date": "d", "commit": "c", "k": 3, "n": 2, "wall_seconds": 1, "backend": "cpu"}',  # k > n
        '{"date": "d", "commit": "c", "k": true, "n": 2, "wall_seconds": 1, "backend": "cpu"}',
        '{"date": "d", "commit": "c", "k": 1.5, "n": 2, "wall_seconds": 1, "backend": "cpu"}',
        '{"date": "d", "commit": "c", "k": -1, "n": 2, "wall_seconds": 1, "backend": "cpu"}',
        '{"date": "d", "commit": "c", "k": 1, "n": 2, "wall_seconds": NaN, "backend": "cpu"}',
        '{"date": "d", "commit": "c", "k": 1, "n": 2, "wall_seconds": -5, "backend": "cpu"}',
        '{"date": "d", "commit": "c", "k": 1, "n": 2, "wall_seconds": "10", "backend": "cpu"}',
        '{"date": "", "commit": "c", "k": 1, "n": 2, "wall_seconds": 1, "backend": "cpu"}',
        '{"date": ["d"], "commit": "c", "k": 1, "n": 2, "wall_seconds": 1, "backend": "cpu"}',
        '{"date": "d", "commit": "c", "k": 1, "n": ' + "9" * 5000 + ', "wall_seconds": 1, "backend": "cpu"}',
        '{"date": "' + "x" * 300 + '", "commit": "c", "k": 1, "n": 2, "wall_seconds": 1, "backend": "cpu"}',
        "[" * 100_000 + "]" * 100_000,
        "\udcff not utf-8",
    ],
)
def test_a_line_the_harness_did_not_write_is_skipped_and_counted(tmp_path: Path, line: str) -> None:
    path = tmp_path / "history.jsonl"
    append_point(path, POINT)
    with path.open("ab") as handle:
        handle.write(line.encode("utf-8", "surrogateescape") + b"\n")
    append_point(path, POINT)
    history = read_history(path)
    assert history.points == [POINT, POINT] and history.skipped == 1 and "history.jsonl:2" in history.why


def test_a_history_that_is_not_a_plain_file_in_its_folder_gives_no_points_and_says_why(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo" / "history.jsonl"
    fifo.parent.mkdir()
    os.mkfifo(fifo)
    assert read_history(fifo).points == [] and "FIFO" in read_history(fifo).why  # no hang on open
    outside = tmp_path / "secret.jsonl"
    append_point(outside, POINT)
    link = tmp_path / "linked" / "history.jsonl"
    link.parent.mkdir()
    link.symlink_to(outside)
    assert read_history(link).points == [] and "outside" in read_history(link).why
    big = tmp_path / "big" / "history.jsonl"
    big.parent.mkdir()
    big.write_bytes(b" " * (MAX_BYTES + 1))
    assert read_history(big).points == [] and "larger than" in read_history(big).why


def test_appending_never_writes_through_a_link(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.txt"
    target.write_text("keep\n")
    (tmp_path / "history.jsonl").symlink_to(target)
    with pytest.raises(OSError):
        append_point(tmp_path / "history.jsonl", POINT)
    assert target.read_text() == "keep\n"
