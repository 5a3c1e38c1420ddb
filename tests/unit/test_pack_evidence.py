"""tools/pack_evidence.py packs an evidence folder whole (issue #53): what a reader opens on GitHub stays loose (the
README, scripts, small summaries, a file the README links to), the rest goes into the records.tar.xz of its nearest
records root, deterministically, and nothing is removed unless the archive reads back whole."""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

import pytest

from reprobisect.report.archive import ARCHIVE, read_members
from tests.unit.test_repository_shape import load_tool

TOOL = load_tool()


def _write(path: Path, data: bytes | str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode() if isinstance(data, str) else data)


def _folder(root: Path) -> Path:
    ev = root / "2026-12-07-x"
    _write(ev / "README.md", "# X\n\n[the grid](grid.png), ![huge](huge.png) and [a site](https://example.org/a.png)\n")
    _write(ev / "run.sh", "echo run\n")
    _write(ev / "fix.diff", "--- a\n+++ b\n")
    _write(ev / "summary.json", '{"runs": 3}\n')
    _write(ev / "table.md", "| a |\n" * 6000)  # 36 KB: more than a summary's 20 KiB
    _write(ev / "grid.png", b"\x89PNG" + b"\x00" * 5000)  # linked, small: a reader looks at it
    _write(ev / "huge.png", b"\x89PNG" + os.urandom(TOOL.LINKED_MAX_BYTES))  # linked, but over 1 MiB
    _write(ev / "run.log.gz", b"\x1f\x8b" + b"log" * 100)
    _write(ev / "top.log", "a run's output\n")
    _write(ev / "records" / "gan" / "c" / "r.json", '{"outcome": "PASS"}\n')
    _write(ev / "logs" / "gan" / "c" / "r.log", "step 1\n")
    _write(ev / "sub" / "notes.txt.gz", b"\x1f\x8bnotes")
    _write(ev / "call-1" / "records" / "gan" / "c" / "q.json", '{"outcome": "PASS"}\n')  # a records root of its own
    _write(ev / "call-1" / "figures.log.gz", b"\x1f\x8bfigures")
    _write(ev / "call-1" / "gpu.txt", "H100\n")
    _write(ev / "other" / "README.md", "# another evidence folder\n")
    _write(ev / "other" / "x.log.gz", b"\x1f\x8bx")
    return ev


def _files(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}


def test_a_folder_keeps_loose_what_a_reader_opens_and_packs_the_rest(tmp_path: Path) -> None:
    ev = _folder(tmp_path)
    assert TOOL.main([str(ev)]) == 0
    assert _files(ev) == {
        "README.md", "run.sh", "fix.diff", "summary.json", "grid.png", ARCHIVE,
        "call-1/gpu.txt", f"call-1/{ARCHIVE}", "other/README.md", "other/x.log.gz",
    }  # fmt: skip
    assert set(read_members(ev / ARCHIVE)) == {
        "table.md",
        "huge.png",
        "run.log.gz",
        "top.log",
        "records/gan/c/r.json",
        "logs/gan/c/r.log",
        "sub/notes.txt.gz",
    }
    assert set(read_members(ev / "call-1" / ARCHIVE)) == {"records/gan/c/q.json", "figures.log.gz"}
    assert not (ev / "sub").exists() and not (ev / "records").exists()  # the folders it emptied


def test_packing_the_same_files_gives_the_same_bytes(tmp_path: Path) -> None:
    first, second = _folder(tmp_path / "a"), _folder(tmp_path / "b")
    (second / "huge.png").write_bytes((first / "huge.png").read_bytes())  # the one random file, made equal
    os.utime(second / "table.md", (0, 0))  # another mtime: not part of the archive
    assert TOOL.main([str(first)]) == 0 and TOOL.main([str(second)]) == 0
    assert (first / ARCHIVE).read_bytes() == (second / ARCHIVE).read_bytes()
    before = (first / ARCHIVE).read_bytes()
    assert TOOL.main([str(first)]) == 0  # nothing left to pack: the archive is left as it is
    assert (first / ARCHIVE).read_bytes() == before


def test_check_lists_what_would_move_and_changes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ev = _folder(tmp_path)
    before = _files(ev)
    assert TOOL.main(["--check", str(ev)]) == 1
    assert _files(ev) == before
    assert f"{ev / 'table.md'}: would move into {ev / ARCHIVE}" in capsys.readouterr().out
    assert TOOL.main([str(ev)]) == 0 and TOOL.main(["--check", str(ev)]) == 0


def test_a_link_in_the_folder_is_refused_and_nothing_moves(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ev = _folder(tmp_path)
    (ev / "elsewhere.log.gz").symlink_to(tmp_path / "outside")
    before = _files(ev)
    assert TOOL.main([str(ev)]) == 1
    assert "elsewhere.log.gz: a link or special file" in capsys.readouterr().err
    assert _files(ev) == before and not (ev / ARCHIVE).exists()


@pytest.mark.parametrize(
    ("name", "size", "linked", "loose"),
    [
        ("README.md", 10**7, False, True),
        ("gpu_run.sh", 10**6, False, True),
        ("records.tar.xz", 10**7, False, True),
        ("summary-matrix.md", 20 * 1024, False, True),
        ("summary-matrix.md", 20 * 1024 + 1, False, False),
        ("report.html", 100, False, False),
        ("plot.png", 1024 * 1024, True, True),
        ("plot.png", 1024 * 1024 + 1, True, False),
        ("run.log.gz", 10, False, False),
    ],
)
def test_what_stays_loose(name: str, size: int, linked: bool, loose: bool) -> None:
    assert TOOL.kept(PurePosixPath("reports/gpu/x") / name, size, linked) is loose
