"""``reprobisect report``: files written, merge, baseline, --fail-on exit codes, broken inputs."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pandas as pd
import pytest

from reprobisect.commands.main import main as reprobisect
from reprobisect.errors import FAIL_EXIT
from reprobisect.model.grid_report import GridReport

RECORDS = Path(__file__).parents[1] / "resources" / "records"


def main(argv: list[str]) -> int:
    """``reprobisect report ARGV``, through the one entry point."""
    return reprobisect(["report", *argv])


def test_writes_every_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dest = tmp_path / "report"
    assert main(["--out", str(RECORDS / "releases"), "--merge", str(RECORDS / "bisect"), "--dest", str(dest)]) == 0
    names = {p.name for p in dest.iterdir()}
    assert {
        "runs.parquet",
        "runs.csv",
        "report.md",
        "report.html",
        "steps-deepspeed.png",
        "outcomes-deepspeed.png",
    } <= names
    assert len(pd.read_parquet(dest / "runs.parquet")) == 36 + 4
    out = capsys.readouterr().out
    assert out.startswith("40 runs in 5 cell(s)")


def test_default_dest_is_under_out(tmp_path: Path) -> None:
    out = tmp_path / "reports"
    shutil.copytree(RECORDS / "baseline", out)
    assert main(["--out", str(out)]) == 0
    assert (out / "report" / "report.html").is_file()


def test_markdown_flag_prints_the_markdown(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--out", str(RECORDS / "baseline"), "--dest", str(tmp_path), "--markdown"]) == 0
    assert capsys.readouterr().out.startswith("# reprobisect report: gan")


@pytest.mark.parametrize(
    ("fail_on", "expected"),
    [
        ([], 0),
        (["regression"], FAIL_EXIT),
        (["new-failure"], FAIL_EXIT),
        (["regression", "new-failure"], FAIL_EXIT),
    ],
)
def test_fail_on_with_the_real_baseline(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fail_on: list[str], expected: int
) -> None:
    argv = ["--out", str(RECORDS / "current"), "--baseline", str(RECORDS / "baseline"), "--dest", str(tmp_path)]
    assert main([*argv, *(x for name in fail_on for x in ("--fail-on", name))]) == expected
    out = capsys.readouterr().out
    assert "Compared with" in out and "1 new-failure, 1 timing-regression" in out
    changes = pd.read_csv(tmp_path / "changes.csv")
    assert sorted(changes["kind"]) == ["new-failure", "timing-regression"]


def test_a_rerun_against_its_baseline_passes_every_fail_on(tmp_path: Path) -> None:
    argv = [
        "--out",
        str(RECORDS / "rerun"),
        "--baseline",
        str(RECORDS / "baseline"),
        "--dest",
        str(tmp_path),
        "--fail-on",
        "regression",
        "--fail-on",
        "new-failure",
    ]
    assert main(argv) == 0


def test_a_higher_threshold_lets_the_slow_down_pass(tmp_path: Path) -> None:
    argv = [
        "--out",
        str(RECORDS / "current"),
        "--baseline",
        str(RECORDS / "baseline"),
        "--dest",
        str(tmp_path),
        "--threshold",
        "3",
        "--fail-on",
        "regression",
    ]
    assert main(argv) == 0


def test_broken_records_are_reported_not_fatal(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--out", str(RECORDS / "broken"), "--dest", str(tmp_path)]) == 0
    err = capsys.readouterr().err
    assert err.count("warning: skipping") == 5 and "truncated.json" in err
    assert "truncated.json" in (tmp_path / "report.md").read_text()


def test_errors_name_the_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--out", str(tmp_path / "nowhere")]) == 2
    assert "nowhere" in capsys.readouterr().err
    assert main(["--out", str(tmp_path)]) == 3  # a folder without records
    assert "no readable records" in capsys.readouterr().err
    assert main(["--out", str(RECORDS / "baseline"), "--fail-on", "regression"]) == 2
    assert "--baseline" in capsys.readouterr().err
    argv = ["--out", str(RECORDS / "current"), "--baseline", str(tmp_path), "--fail-on", "regression"]
    assert main([*argv, "--dest", str(tmp_path / "r")]) == 3  # an empty baseline must not pass the check
    assert "--baseline" in capsys.readouterr().err


def test_a_real_bisect_shows_its_transition(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = [
        "--out",
        str(RECORDS / "releases"),
        "--merge",
        str(RECORDS / "bisect"),
        "--dest",
        str(tmp_path),
        "--markdown",
    ]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert ("last `0.16.4` → first `0.16.5`: ✗ REPRODUCED `36b244a365` → ! OTHER_FAILURE `e149c29f78`") in text
    assert "4 runs over 7 releases" in text
    assert "| 0.16.5 " in text  # the bisect's probes are runs like any other
    assert (
        "bisect-gan-cpu-deepspeed-deepspeed-0.16.4-0.17.0-all-transitions.json"
        in (tmp_path / "report.html").read_text()
    )


def _grid_answer(hostile: str = "") -> GridReport:
    """A grid answer as triage writes it: the harness's own grid search over a planted staircase (fails where
    lightning < 2.5.5 and deepspeed >= 0.16.4), with a hostile word in its signature where asked."""
    from reprobisect.bisect.grid import grid_search
    from reprobisect.bisect.grid_answer import grid_report
    from reprobisect.bisect.search import ProbeResult

    rows, cols = ["0.16.0", "0.16.4", "0.17.0"], ["2.5.2", "2.5.5", "2.6.0"]

    def probe(cells: list[tuple[str, str]]) -> list[ProbeResult]:
        return [
            ProbeResult(version="x", outcome="REPRODUCED", signature_id="s1", signature=f"TypeError{hostile}")
            if row != "0.16.0" and col == "2.5.2"
            else ProbeResult(version="x", outcome="PASS")
            for row, col in cells
        ]

    result = grid_search("deepspeed", rows, "lightning", cols, probe)
    return grid_report(result, repro="script-issue", form="cpu-shim", held={"torch": "2.13.0"})


def test_a_grid_answer_beside_the_records_is_drawn_on_the_page(tmp_path: Path) -> None:
    import json

    out = tmp_path / "out"
    shutil.copytree(RECORDS / "releases", out)
    hostile = "<script>alert(1)</script>"
    answer = dataclasses.replace(_grid_answer(hostile), form=f"cpu-shim{hostile}")  # reach the page only escaped
    (out / "grid-script-issue-cpu-shim-deepspeed-lightning.json").write_text(json.dumps(answer.to_json()))
    (out / "grid-broken.json").write_text(json.dumps({"rows": [1], "grid": "x"}))
    assert main(["--out", str(out), "--dest", str(tmp_path / "report")]) == 0
    page = (tmp_path / "report" / "report.html").read_text()
    assert 'href="#grids"' in page and "across deepspeed × lightning" in page
    assert "lightning &lt; 2.5.5" in page and "deepspeed ≥ 0.16.4" in page  # the rule, escaped once
    assert page.count('class="g-fails-measured"') + page.count('class="g-fails-inferred"') == 2  # the region drawn
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;alert(1)" in page
    assert "grid-broken.json: not a grid answer" in page  # a file not drawn is listed, never fatal
