"""Markdown and HTML renderings of real records, plots included."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest

from reprobisect.report.compare import compare
from reprobisect.report.html import log_tail, report_html, traceback_text
from reprobisect.report.load import Bisect, load_records, records_frame
from reprobisect.report.markdown import report_markdown
from reprobisect.report.plots import outcome_band, step_time_plot
from reprobisect.report.views import ReportData

RECORDS = Path(__file__).parents[1] / "resources" / "records"
PNG = b"\x89PNG\r\n\x1a\n"


def _data(*names: str, baseline: str | None = None, **extra: object) -> ReportData:
    frame = records_frame(load_records([RECORDS / n for n in names]))
    comparison = compare(frame, records_frame(load_records([RECORDS / baseline]))) if baseline else None
    return ReportData(
        frame=frame,
        sources=[RECORDS / n for n in names],
        comparison=comparison,
        baseline=RECORDS / baseline if baseline else None,
        **extra,
    )  # type: ignore[arg-type]


def _bisect() -> Bisect:
    data = {
        "repro": "gan",
        "form": "cpu-deepspeed",
        "precision": "bf16",
        "axis": "deepspeed",
        "cell": {},
        "range": {"good": "0.16.4", "bad": "0.19.8", "versions": []},
        "runs": 6,
        "releases_in_range": 14,
        "probes": [],
        "skipped": [{"version": "0.17.2", "why": "ENV_ERROR: x"}],
        "transitions": [
            {
                "last": "0.16.9",
                "first": "0.17.0",
                "from": {"outcome": "REPRODUCED", "signature_id": "36b244a365", "signature": "t"},
                "to": {"outcome": "OTHER_FAILURE", "signature_id": "e149c29f78", "signature": "u"},
            }
        ],
    }
    return Bisect(path=Path("bisect-gan-deepspeed.json"), data=data)


def test_markdown_has_environment_matrix_transitions_and_commands() -> None:
    text = report_markdown(_data("releases", bisects=[_bisect()]))
    assert "**Environment**: python 3.11.7" in text and "CPU only" in text and "lightning 2.6.6" in text
    assert "| 0.16.4      | ✗ 36b244a365" in text or re.search(r"\| 0\.16\.4 +\| ✗ 36b244a365", text)
    assert "last `0.16.9` → first `0.17.0`: ✗ REPRODUCED `36b244a365` → ! OTHER_FAILURE `e149c29f78`" in text
    assert "skipped 0.17.2" in text
    assert "First release with each outcome along deepspeed" in text
    assert "nox -s repro_gan -- --deepspeed 0.19.8 --lightning 2.6.6 --form cpu-deepspeed --fix none" in text
    assert "--torch" not in text  # torch came from the system interpreter
    assert len(text) < 60_000


def test_markdown_without_bisect_has_no_transition_section() -> None:
    assert "Transitions" not in report_markdown(_data("baseline"))


def test_markdown_drops_optional_sections_to_fit_an_issue() -> None:
    full = report_markdown(_data("releases"))
    short = report_markdown(_data("releases"), limit=len(full) - 100)
    assert "Reproduce each cell" not in short
    assert "Left out to fit an issue: commands" in short
    assert "## gan · cpu-deepspeed" in short


def test_markdown_lists_the_comparison() -> None:
    text = report_markdown(_data("current", baseline="baseline"))
    assert "Flagged: **1 new-failure, 1 timing-regression**" in text
    assert "| new-failure" in text and "| timing-regression" in text


def test_html_is_self_contained_and_has_a_details_element_per_run() -> None:
    data = _data("releases", bisects=[_bisect()])
    data = dataclasses.replace(data, plots={"steps-deepspeed.png": PNG + b"fake"})
    page = report_html(data)
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)
    assert "<link" not in page and "<script src" not in page
    assert 'src="data:image/png;base64,' in page
    run_ids = set(data.frame["run_id"])
    assert {m for m in re.findall(r'<details id="run-([0-9a-f]+)"', page)} == run_ids
    assert page.count('class="o o-REPRODUCED') >= 1 and 'class="sortable matrix"' in page
    assert "Traceback (most recent call last):" in page
    assert "0.16.9" in page  # the bisect transition


def test_html_escapes_what_logs_and_records_say(tmp_path: Path) -> None:
    (item, *_) = load_records([RECORDS / "baseline"])
    log = tmp_path / "logs" / "evil.log"
    log.parent.mkdir(parents=True)
    log.write_text(
        "<script>alert(1)</script>\nTraceback (most recent call last):\n"
        '  File "x.py", line 1, in <module>\nValueError: <b>bold</b> & co\n'
    )
    record = dataclasses.replace(
        item.record,
        log_path="logs/evil.log",
        fix="<img src=x>",
        signature={"id": "0123456789", "text": "ValueError: <b>bold</b>"},
    )
    frame = records_frame([dataclasses.replace(item, record=record, root=tmp_path)])
    page = report_html(ReportData(frame=frame, sources=[tmp_path]))
    assert "<script>alert(1)" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<img src=x>" not in page and "<b>bold</b>" not in page
    assert "ValueError: &lt;b&gt;bold&lt;/b&gt; &amp; co" in page


def test_log_tail_and_traceback(tmp_path: Path) -> None:
    log = tmp_path / "run.log"
    log.write_text(
        "\n".join(f"line {i}" for i in range(500)) + "\nTraceback (most recent call last):\n"
        '  File "a.py", line 3, in f\n    g()\nRuntimeError: boom\n@@repro {"event": "exit"}\n'
    )
    tail, total = log_tail(log)
    assert total == 505 and len(tail.splitlines()) == 200 and tail.endswith('"exit"}')
    assert traceback_text(tail).splitlines()[-1] == "RuntimeError: boom"
    assert log_tail(tmp_path / "missing.log")[0].startswith("(log not readable")


def test_plots_are_pngs() -> None:
    frame = _data("releases").frame
    steps = step_time_plot(frame, "deepspeed")
    assert steps is not None and steps.startswith(PNG)
    assert outcome_band(frame, "deepspeed").startswith(PNG)
    failing = frame[frame["outcome"] != "PASS"]
    assert step_time_plot(failing, "deepspeed") is None  # nothing ran a second step


def test_empty_report_renders() -> None:
    data = _data("baseline")
    empty = dataclasses.replace(data, frame=data.frame.iloc[0:0], skipped=["skipping x.json: truncated"])
    assert "No readable records" in report_markdown(empty) and "x.json" in report_markdown(empty)
    assert "No readable records" in report_html(empty)


@pytest.mark.parametrize("name", ["baseline", "current", "rerun", "releases", "bisect"])
def test_resource_records_are_real_harness_output(name: str) -> None:
    for path in (RECORDS / name / "records").rglob("*.json"):
        data = json.loads(path.read_text())
        assert data["harness_version"] and data["versions_source"] == "imported", path
        assert (RECORDS / name / data["log_path"]).is_file(), path


def test_both_renderings_warn_when_every_timing_moved() -> None:
    data = _data("baseline")
    busy = data.frame.assign(step_ms=[[t * 2 for t in steps] for steps in data.frame["step_ms"]])
    slow = dataclasses.replace(data, frame=busy, comparison=compare(busy, data.frame), baseline=RECORDS / "baseline")
    assert "Every timed run moved: median ratio ×2.00" in report_markdown(slow)
    assert "Every timed run moved: median ratio ×2.00" in report_html(slow)
    assert "Every timed run moved" not in report_markdown(_data("rerun", baseline="baseline"))
