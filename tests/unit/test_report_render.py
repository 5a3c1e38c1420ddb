"""Markdown and HTML renderings of real records, plots included."""

from __future__ import annotations

import builtins
import dataclasses
import io
import json
import os
import re
from html.parser import HTMLParser
from importlib import resources
from pathlib import Path

import pytest

from reprobisect.report.compare import compare
from reprobisect.report.frame import Bisect, load_records, records_frame
from reprobisect.report.html import report_html
from reprobisect.report.logs import LogExcerpt, log_excerpts, log_tail, traceback_text
from reprobisect.report.markdown import report_markdown
from reprobisect.report.plots import outcome_band, step_time_plot
from reprobisect.report.views import ReportData
from reprobisect.report.write import write_report
from tests.bisect_reports import report_of

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
        logs=log_excerpts(frame),
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
    return Bisect(path=Path("bisect-gan-deepspeed.json"), report=report_of(data))


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
    record = dataclasses.replace(item.record, log_path="logs/evil.log", fix="<img src=x>")
    frame = records_frame([dataclasses.replace(item, record=record, root=tmp_path)])
    frame = frame.assign(signature_id="0123456789", signature="ValueError: <b>bold</b>")  # a forged record's
    page = report_html(ReportData(frame=frame, sources=[tmp_path], logs=log_excerpts(frame)))
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


class _Page(HTMLParser):
    """A page as a browser's parser sees it: every start tag with its attributes, and its text, unescaped."""

    def __init__(self, page: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str]]] = []
        self.text: list[str] = []
        self.feed(page)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, {name: value or "" for name, value in attrs}))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def _assert_inert(page: str) -> _Page:
    """One inline script (ours), no tag or handler from data, links only within the page, images only inline."""
    parsed = _Page(page)
    names = [tag for tag, _ in parsed.tags]
    assert names.count("script") == 1 and names.count("style") == 1
    assert not {"textarea", "link", "iframe", "object", "embed", "base", "b"} & set(names)
    attrs = [(name, value) for _, a in parsed.tags for name, value in a.items()]
    assert not [name for name, _ in attrs if name.startswith("on")]
    assert all(value.startswith("#") for name, value in attrs if name == "href")
    assert all(value.startswith("data:image/png;base64,") for name, value in attrs if name == "src")
    assert all(not a.get("src") for tag, a in parsed.tags if tag == "script")
    return parsed


HOSTILE = '<script>alert(1)</script></textarea><b>{{ 7*7 }}{{ "zq" * 3 }}{% raw %}"onmouseover=alert(2) x="'


def test_html_autoescapes_whatever_a_record_says() -> None:
    data = _data("releases")
    frame = data.frame.assign(
        fix=HOSTILE,
        signature=HOSTILE,
        signature_id=HOSTILE,
        known_signature=HOSTILE,
        upstream=HOSTILE,
        run_id=[f'{i}" onmouseover="alert(3)' for i in range(len(data.frame))],
        cell=[f'{c}" onmouseover="alert(4)' for c in data.frame["cell"]],
        outcome="ENV_ERROR",
        glyph=HOSTILE,
    )
    bisect = _bisect()
    first = bisect.report.transitions[0]
    transition = dataclasses.replace(
        first, last=HOSTILE, after=dataclasses.replace(first.after, signature=HOSTILE, signature_id=HOSTILE)
    )
    hostile_bisect = dataclasses.replace(bisect, report=dataclasses.replace(bisect.report, transitions=(transition,)))
    logs = {r: LogExcerpt(tail=HOSTILE, lines=1, traceback=HOSTILE) for r in frame["run_id"]}
    hostile = dataclasses.replace(data, frame=frame, logs=logs, skipped=[HOSTILE], bisects=[hostile_bisect])
    page = report_html(hostile, title=HOSTILE)
    parsed = _assert_inert(page)
    assert "<script>alert(1)" not in page and "</textarea>" not in page and '"onmouseover=' not in page
    assert '{{ 7*7 }}{{ "zq" * 3 }}' in "".join(parsed.text) and "zqzqzq" not in page  # shown, not evaluated
    assert "".join(parsed.text).count(HOSTILE) > 6 * len(frame)  # the text itself, unescaped by the parser
    titles = [a.get("title", "") for tag, a in parsed.tags if a.get("title")]
    assert HOSTILE in titles and any(t.endswith('" onmouseover="alert(4)') for t in titles)


def test_html_shows_where_verdicts_change_and_which_passes_trained_and_escapes_both() -> None:
    """The page has what report.md has: a sweep's verdict changes between neighbouring releases (here a hostile
    known name on 0.19.8's runs, shown as text) and, on a passing cell whose runs checked their training, "trains"
    with the deviations."""
    data = _data("releases")
    frame = data.frame
    late = frame["deepspeed"] == "0.19.8"
    frame = frame.assign(
        known_signature=[HOSTILE if is_late else k for is_late, k in zip(late, frame["known_signature"], strict=True)],
        trains=["yes" if o == "PASS" else "" for o in frame["outcome"]],
        deviation_D=0.053,
        deviation_G=0.024,
    )
    page = report_html(dataclasses.replace(data, frame=frame))
    parsed = _assert_inert(page)
    text = "".join(parsed.text)
    assert 'id="sweeps"' in page and "Where the verdict changes" in text and "Along deepspeed" in text
    assert HOSTILE in text and "<script>alert(1)" not in page  # the hostile name as text in a transition
    assert "0.17.0" in text and " trains (claimed; D 5%, G 2%)" in text
    assert 'href="#sweeps"' in page  # in the page's navigation


def _refuse(*args: object, **kwargs: object) -> None:
    msg = f"the renderer opened a file: {args[:1]!r}"
    raise AssertionError(msg)


def test_html_renders_from_the_data_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = _data("baseline")
    gone = tmp_path / "gone"  # no record or log is where the frame says
    frame = data.frame.assign(source=str(gone), log_file=[str(gone / log) for log in data.frame["log"]])
    logs = {r: LogExcerpt(tail=f"the end of {r}", lines=7, traceback="Traceback (given)") for r in frame["run_id"]}
    given, unread = dataclasses.replace(data, frame=frame, logs=logs), dataclasses.replace(data, logs={})
    report_html(given)  # loads the package's templates, CSS and JS (resources, not data) once
    with monkeypatch.context() as patch:
        for owner, name in ((builtins, "open"), (io, "open"), (os, "open"), (Path, "open"), (Path, "read_bytes")):
            patch.setattr(owner, name, _refuse)
        page, without = report_html(given), report_html(unread)
    assert page.count("Traceback (given)") == len(frame) and "Log (last 7 of 7 lines)" in page
    assert all(f"the end of {r}" in page for r in frame["run_id"])
    assert "(log not read for this report)" in without and "Traceback (most recent call last)" not in without


def test_write_report_reads_the_logs_before_rendering(tmp_path: Path) -> None:
    data = dataclasses.replace(_data("releases"), logs={})
    write_report(data, tmp_path)
    page = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert "Traceback (most recent call last):" in page and "(log not read" not in page


def test_a_report_too_long_for_an_issue_is_also_written_whole(tmp_path: Path) -> None:
    """report.md fits an issue and says what it left out; report-full.md keeps every section (the GPU map of #17 lost
    its first releases to the limit); a later report that fits removes the stale whole one."""
    data = dataclasses.replace(_data("releases"), logs={})
    write_report(data, tmp_path, markdown_limit=2_000)
    short, full = ((tmp_path / name).read_text(encoding="utf-8") for name in ("report.md", "report-full.md"))
    assert len(short) <= 2_000 and "_Left out to fit an issue" in short
    assert "First release with each outcome" in full and "_Left out" not in full and len(full) > len(short)
    write_report(data, tmp_path)
    assert not (tmp_path / "report-full.md").exists()


def test_html_inlines_its_css_and_js() -> None:
    page = report_html(_data("releases", plots={"steps-deepspeed.png": PNG}))
    static = resources.files("reprobisect.report") / "static"
    css, js = ((static / name).read_text(encoding="utf-8") for name in ("report.css", "report.js"))
    assert f"<style>\n{css}" in page and f"<script>\n{js}</script>" in page
    assert ".o-REPRODUCED{background:#fbdada;border-left:4px solid #c62828}" in page  # outcome colours
    _assert_inert(page)


def test_log_excerpts_stay_inside_the_records_root(tmp_path: Path) -> None:
    (item, *_) = load_records([RECORDS / "baseline"])
    secret = tmp_path / "secret.txt"
    secret.write_text("Traceback (most recent call last):\nKeyError: the secret\n")
    root = tmp_path / "root"
    (root / "logs").mkdir(parents=True)
    (root / "logs" / "run.log").symlink_to(secret)  # a log that became a link after the records were loaded
    frame = records_frame([dataclasses.replace(item, record=dataclasses.replace(item.record, log_path="logs/run.log"))])
    frame = frame.assign(source=str(root))
    (excerpt,) = log_excerpts(frame).values()
    assert "secret" not in excerpt.tail and excerpt.traceback == "" and excerpt.lines == 0
    assert excerpt.tail.startswith("(log not read: 'logs/run.log' is outside")


def test_log_tail_reads_only_the_end_of_a_runaway_log(tmp_path: Path) -> None:
    log = tmp_path / "runaway.log"
    log.write_text("FIRST\n" + "x" * 99 + "\n" + ("y" * 99 + "\n") * 30_000 + "the last line\n")
    tail, total = log_tail(log)
    assert total < 30_000 and "FIRST" not in tail and tail.endswith("the last line")


def _timing_bisect(version: str = "0.18.5", unlike: tuple[str, ...] = ()) -> Bisect:
    """A timing search's file (bisect --slower-than) as probes.py writes it."""

    def probe(name: str, verdict: str, ratio: float) -> dict[str, object]:
        timing = {"verdict": verdict, "ratio": ratio, "low": ratio * 0.9, "high": ratio * 1.1, "runs": 3}
        timing |= {"value": 0.01 * ratio, "value_low": 0.009 * ratio, "value_high": 0.011 * ratio}
        return {"version": name, "outcome": "PASS", "timing": timing}

    data = {
        **_bisect().report.to_json(),
        "range": {"good": "0.18.4", "bad": "0.18.9", "versions": ["0.18.4", version]},
        "transitions": [],
        "skipped": [],
        "slowdown": {"metric": "step", "threshold_percent": 10, "min_repeats": 3, "max_repeats": 10},
        "probes": [probe(version, "slower", 8.5), probe("0.18.4", "not slower", 1.0)],
        "unlike": list(unlike),
        "reference": {"version": "0.18.4", "runs": 3},
        "busy": None,
        "claims_refused": [],
        "target": "step slower than 0.18.4 by more than 10%",
    }
    return Bisect(path=Path("bisect-slow.json"), report=report_of(data))


def test_a_timing_search_shows_each_version_with_its_interval_in_markdown_and_html() -> None:
    data = _data("releases", bisects=[_timing_bisect()])
    text = report_markdown(data)
    assert "## Slower, not broken (timing bisect)" in text
    assert "| 0.18.4 | not slower | 10.00 ms [9.00 ms, 11.00 ms] | ×1.000 [×0.900, ×1.100] | 3 |" in text
    assert "| 0.18.5 | slower | 85.00 ms [76.50 ms, 93.50 ms] | ×8.500 [×7.650, ×9.350] | 3 |" in text
    assert text.index("| 0.18.4 |") < text.index("| 0.18.5 |")  # in version order, not probe order
    assert "ran alike" in text
    page = report_html(data)
    assert page.count("<circle") == 2 and "limit ×1.10" in page and "×8.500 [×7.650, ×9.350]" in page


def test_a_hostile_timing_search_is_shown_inert_and_its_unlike_runs_said() -> None:
    bisect = _timing_bisect(version=HOSTILE, unlike=(f"jobs: 1 (3 runs), {HOSTILE} (3 runs)",))
    data = _data("releases", bisects=[bisect])
    text = report_markdown(data)
    section = text[text.index("## Slower, not broken") :]
    assert "**Not comparable**" in section and "<script>" not in section
    page = report_html(data)
    parsed = _assert_inert(page)
    assert "<script>alert(1)" not in page and "Not comparable" in page
    assert HOSTILE in "".join(parsed.text)
