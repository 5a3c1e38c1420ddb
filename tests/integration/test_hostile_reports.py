"""What a hostile run leaves in the files the harness writes from it (issue #30): a matrix session's summary,
``reprobisect report``'s files and the nightly issue, through the real runner, store, report and nightly writers.

Every file a person opens or GitHub renders holds no escape sequence, NUL, ``@mention``, ``<!--`` or
``<script``; the data files (CSV, JSON) hold no raw control character; one 10 MiB log line costs seconds.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reprobisect.cells.envs import CellEnv
from reprobisect.commands.main import main as reprobisect
from reprobisect.model.outcome import Outcome
from reprobisect.model.record import Record
from reprobisect.model.store import Store
from reprobisect.nightly.regressions import masked
from reprobisect.nightly.release_night import _write_outputs
from reprobisect.nightly.release_text import MARKER
from reprobisect.report.frame import load_records, records_frame
from reprobisect.report.summary import markdown_summary
from reprobisect.report.terminal import runs_table, signature_legend
from reprobisect.report.views import ReportData
from reprobisect.run.one_run import RunSpec, execute
from reprobisect.util.files import write_atomic
from tests.conftest import make_repro, night_news

READ_BY_PEOPLE = (".md", ".html", ".txt")  # and the terminal
DATA = (".csv", ".json")
_MENTION = re.compile(r"(?<![\w/.+-])@[A-Za-z0-9_-]")


def session(env: CellEnv, tmp_path: Path, script: str, **kwargs: object) -> tuple[Record, list[Path], str]:
    """One run through what a matrix session, ``reprobisect report`` and a nightly write from it: the record,
    every file written (logs and records aside) and everything printed to the terminal."""
    repro = make_repro(f"hostile/{script}", expected=None, **kwargs)  # type: ignore[arg-type]
    root = tmp_path / "reports"
    spec = RunSpec(repro=repro, form=repro.forms["cpu-deepspeed"], fix=repro.fixes["none"], env=env)
    record = execute(spec, Store(root), environ=os.environ)
    summary = markdown_summary([record], title="Matrix", command="reprobisect matrix")
    written = [write_atomic(root / "summary-matrix.md", summary, what="the summary")]
    terminal = runs_table([record]) + "\n".join(signature_legend([record]))
    assert reprobisect(["report", "--out", str(root), "--dest", str(tmp_path / "report"), "--markdown"]) == 0
    data = ReportData(frame=records_frame(load_records([root])), sources=[root])
    after = masked(data.frame)
    before = after.assign(outcome=Outcome.PASS.value, signature_id="")
    _write_outputs(tmp_path / "nightly", night_news(before, after, baseline="0.1", release="0.2"), data)
    written += [p for folder in ("report", "nightly") for p in (tmp_path / folder).rglob("*") if p.is_file()]
    return record, written, terminal


def unsafe(text: str, *, own_marker: bool = False) -> list[str]:
    """What a file a person reads must not hold; the nightly issue's own hidden marker aside."""
    if own_marker:
        text = text.replace(MARKER.format(backend="cpu"), "")
    found = [name for name in ("\x1b", "\x00", "<!--", "<script") if name in text]
    return found + (["@mention"] if _MENTION.search(text) else [])


def test_escapes_mentions_and_markup_reach_no_file_a_person_opens(
    plain_env: CellEnv, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    record, written, terminal = session(plain_env, tmp_path, "escapes_everywhere.py")
    assert record.outcome == Outcome.OTHER_FAILURE.value
    names = {p.name for p in written}
    assert {"summary-matrix.md", "report.md", "report.html", "nightly.md", "runs.csv", "nightly.json"} <= names
    printed = terminal + capsys.readouterr().out
    assert "\x1b" not in printed and "\x00" not in printed
    for path in written:
        text = path.read_text(encoding="utf-8", errors="replace") if path.suffix in (*READ_BY_PEOPLE, *DATA) else ""
        if path.suffix in READ_BY_PEOPLE:
            if path.suffix == ".html":  # the page's own script (report.html.j2) is inlined: no other may appear
                text = text.replace("<script>", "", 1)
            assert unsafe(text, own_marker=path.name == "nightly.md") == [], path
        assert "\x1b" not in text and "\x00" not in text, path
    html = (tmp_path / "report" / "report.html").read_text(encoding="utf-8")
    assert "\u241b]52;c;" in html and "\u2400" in html  # shown as symbols, not passed on


FRAGMENTS = (
    b"\x1b]52;c;cm0gLXJmIH4=\x07",
    b"\x1b[2J\x1b]0;title\x07",
    b"\x00",
    b"@maintainer ",
    b"<!-- ",
    b"<script>",
    b"\n",
    b"Traceback (most recent call last):\n",
    b'@@repro {"event": "exit", "python": "3.99", "platform": "FAKE-OS"}\n',
    b'@@repro {"event": "step", "step": 0, "seconds": 0.1, "ok": true}\n',
)
OUTPUT = st.lists(st.sampled_from(FRAGMENTS) | st.binary(max_size=64), max_size=30).map(b"".join)


@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(output=OUTPUT, status=st.sampled_from([0, 1, 2, 139, -11]))
def test_random_bytes_as_a_runs_output(
    plain_env: CellEnv, tmp_path_factory: pytest.TempPathFactory, output: bytes, status: int
) -> None:
    """Whatever a run prints: the harness ends in bounded time, writes no file a person reads with a byte or
    markup that acts, and says PASS only of a run whose exit status was 0."""
    tmp = tmp_path_factory.mktemp("fuzz")
    (tmp / "output.bin").write_bytes(output)
    start = time.perf_counter()
    record, written, terminal = session(plain_env, tmp, "replay_bytes.py", args=(str(tmp / "output.bin"), str(status)))
    assert time.perf_counter() - start < 60
    assert (record.outcome == Outcome.PASS.value) == (status == 0)
    assert record.exit_code == status
    assert "\x1b" not in terminal and "\x00" not in terminal
    for path in written:
        if path.suffix in READ_BY_PEOPLE:
            text = path.read_text(encoding="utf-8", errors="replace")
            text = text.replace("<script>", "", 1) if path.suffix == ".html" else text
            assert unsafe(text, own_marker=path.name == "nightly.md") == [], path


@pytest.mark.chaos
def test_one_ten_mib_log_line_costs_seconds_through_matrix_report_and_nightly(
    plain_env: CellEnv, tmp_path: Path
) -> None:
    """The credential pattern restarted inside the line: the report ran for minutes at 100 % CPU."""
    start = time.perf_counter()
    record, written, _ = session(plain_env, tmp_path, "flood_one_line.py", timeout=120)
    took = time.perf_counter() - start
    assert record.outcome == Outcome.OTHER_FAILURE.value
    assert (tmp_path / "report" / "report.html").stat().st_size > 2**20  # the log's tail is in it
    assert len(written) > 5
    assert took < 60, f"{took:.1f} s"


def test_a_forged_gpu_peak_reaches_no_file_without_a_gpu(plain_env: CellEnv, tmp_path: Path) -> None:
    """Issue #39: a run that prints a GPU peak of 80,000,000,000 bytes on a machine without a GPU got 76294 MiB in
    summary-matrix.md, 76293.9 in report.html and peak_mem_kind=gpu in runs.csv. No GPU figure may appear."""
    record, written, terminal = session(plain_env, tmp_path, "forged_memory.py")
    assert record.claimed_memory["gpu_peak_memory_bytes"] == 80_000_000_000  # kept in the record, as a claim
    assert {p.name for p in written} >= {"summary-matrix.md", "report.html", "runs.csv", "report.md"}
    for path in written:
        if path.suffix in READ_BY_PEOPLE + DATA:
            text = path.read_text(encoding="utf-8", errors="replace")
            assert "76294" not in text and "76293" not in text, path
    runs = next(p for p in written if p.name == "runs.csv").read_text().splitlines()
    kind = runs[0].split(",").index("peak_mem_kind")
    assert [row.split(",")[kind] for row in runs[1:]] == ["rss"]
    assert "76294" not in terminal
