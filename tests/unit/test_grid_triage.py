"""``triage`` with ranges on two packages: the grid is searched, not run whole — each wave one matrix run over its
cells (run_matrix faked here, returning records of a planted interaction), the answer printed, written into the
summary and as ``grid-<slug>.json``; ``--full-grid`` runs every cell as before."""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import subprocess
import sys
import time
import types
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from reprobisect.bisect import edge_culprits, grid_probes
from reprobisect.commands import output, triage, triage_flow
from reprobisect.commands.triage_options import TriageOptions
from reprobisect.errors import ConfigError
from reprobisect.model.culprit import Commit, Culprit, SearchTarget
from reprobisect.model.grid_report import EdgeCulprit, GridCell, GridRegion, GridReport, RegionSignature
from reprobisect.model.record import Record
from reprobisect.model.signature import Signature
from reprobisect.model.store import Store
from reprobisect.report.grid_view import grid_markdown, grid_picture, grid_terminal
from reprobisect.run.context import RunContext
from reprobisect.run.select import select_fixes

BASELINE = Path(__file__).parents[1] / "resources" / "records" / "baseline"
DEEPSPEED = ["0.13.5", "0.14.0", "0.14.1", "0.14.2", "0.14.4", "0.14.5", "0.15.0", "0.15.1"]
LIGHTNING = ["2.2.0", "2.2.5", "2.3.0", "2.3.3", "2.4.0", "2.5.0"]
GONE = Signature(exception="ImportError", message="cannot import name 'DeepSpeedOptimizer' from 'deepspeed.runtime'")


def _fails(deepspeed: str, lightning: str) -> bool:
    """Lightning #20040: the import DeepSpeed 0.14.1 removed, in every Lightning before the fix (2.4.0)."""
    return DEEPSPEED.index(deepspeed) >= DEEPSPEED.index("0.14.1") and LIGHTNING.index(lightning) < 4


def _record(cell_id: str, form: str, fix: str = "none") -> Record:
    template = Record.load(next((BASELINE / "records").rglob("*none__r0.json")))
    found = dict(re.findall(r"(deepspeed|lightning)-([0-9.]+)", cell_id))
    failing = _fails(found["deepspeed"], found["lightning"]) and fix == "none"
    return dataclasses.replace(
        template,
        repro="script-issue",
        form=form,
        fix=fix,
        cell={**template.cell, "id": cell_id, "packages": found},
        outcome="OTHER_FAILURE" if failing else "PASS",
        signature=GONE if failing else None,
    )


class FakeMatrix:
    """run_matrix over the cells asked: a record per cell (and per fix asked), as the planted interaction says."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, ...]] = []

    def __call__(self, config: Any, request: Any, ctx: Any, *, cells: Sequence[str] = (), stats: Any = None) -> Any:
        self.calls.append(tuple(cells))
        fixes = [fix.name for fix in select_fixes(config.repro(request.repros[0]), request.fixes)]
        return [_record(cell, request.forms[0], fix) for cell in cells for fix in fixes]


def _triage(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *extra: str) -> tuple[Any, FakeMatrix, list[str]]:
    envs = tmp_path / "cells"
    envs.mkdir()
    cache = {name: {"at": time.time(), "versions": versions} for name, versions in (("deepspeed", DEEPSPEED), ("lightning", LIGHTNING))}  # fmt: skip
    (envs / "index-cache.json").write_text(json.dumps(cache))
    script = tmp_path / "issue.py"
    script.write_text("import lightning, deepspeed\n")
    echoed: list[str] = []
    ctx = RunContext(
        base=types.SimpleNamespace(executable=sys.executable, torch="2.13.0", torchvision=None, version="3.11.2"),
        store=Store(tmp_path / "out"),
        envs_dir=envs,
        environ={},
        echo=echoed.append,
    )
    fake = FakeMatrix()
    monkeypatch.setattr(grid_probes, "run_matrix", fake)
    monkeypatch.setattr(output, "run_matrix", fake)
    monkeypatch.setattr(triage_flow, "run_context", lambda common, engine: ctx)
    parser = argparse.ArgumentParser()
    triage.setup_arguments(parser.add_subparsers())
    words = ["triage", str(script), "--backend", "cpu", "--out", str(tmp_path / "out"), "--envs", str(envs)]
    words += ["--deepspeed", ">=0.13.5,<0.16", "--lightning", ">=2.2,<2.6", *extra]
    options = TriageOptions.from_args(parser.parse_args(words))
    return triage_flow.triage_answers(options, rerun="reprobisect triage issue.py"), fake, echoed


def test_two_ranges_search_the_grid_and_answer_with_a_rule(tmp_path, monkeypatch, capsys) -> None:
    triaged, fake, echoed = _triage(tmp_path, monkeypatch)
    [report] = triaged.grids
    assert (report.row_axis, report.col_axis) == ("deepspeed", "lightning")  # the longer axis: rows
    assert [region.rule for region in report.regions] == ["fails where deepspeed ≥ 0.14.1 and lightning < 2.4.0"]
    assert report.regions[0].signatures[0].outcome == "OTHER_FAILURE"
    assert report.assumption_held and report.cells_in_grid == 48
    run = sum(len(call) for call in fake.calls)
    assert run == report.cells_run < 48 and len(fake.calls) == report.waves
    assert len({cell for call in fake.calls for cell in call}) == run  # no cell asked twice
    for r, deepspeed in enumerate(report.rows):  # every cell, run or inferred, is the planted truth
        for c, lightning in enumerate(report.cols):
            assert report.grid[r][c].fails == _fails(deepspeed, lightning)
    proven = {(e.axis, e.passing, e.failing, e.at) for e in report.edges if e.measured}
    assert any(axis == "deepspeed" and (p, f) == ("0.14.0", "0.14.1") for axis, p, f, _ in proven)
    assert any(axis == "lightning" and (p, f) == ("2.4.0", "2.3.3") for axis, p, f, _ in proven)
    written = json.loads(next((tmp_path / "out").glob("grid-*.json")).read_text())
    assert written == report.to_json() and GridReport.from_json(written, where="grid.json") == report
    summary = next((tmp_path / "out").glob("summary-*.md")).read_text()
    assert "**fails where deepspeed ≥ 0.14.1 and lightning &lt; 2.4.0**" in summary
    assert f"**{run} of 48 cells run**" in summary and "Checked: **held**" in summary
    printed = capsys.readouterr().out
    assert "fails where deepspeed ≥ 0.14.1 and lightning < 2.4.0  (24 cells" in printed
    assert f"{run} of 48 cells run" in printed and "checked: held on the" in printed
    assert "deepspeed ↓ lightning →" in printed and "✗" in printed and "✓" in printed
    assert any("instead of running all 48 cells" in line for line in echoed)


def test_fixes_run_beside_the_searched_cells_and_are_counted_over_the_failing_ones(tmp_path, monkeypatch) -> None:
    triaged, _, _ = _triage(tmp_path, monkeypatch, "--fix-env", "compat=X=1")
    [report] = triaged.grids
    failing_run = sum(1 for row in report.grid for cell in row if cell.fails and cell.how == "measured")
    assert report.fixes == {"compat": (failing_run, failing_run)}


def test_full_grid_runs_every_cell_as_before(tmp_path, monkeypatch) -> None:
    triaged, fake, _ = _triage(tmp_path, monkeypatch, "--full-grid")
    assert triaged.grids == [] and len(fake.calls) == 1 and fake.calls[0] == ()  # one matrix run, no cell chosen


def test_what_a_grid_does_not_answer_yet_is_refused_before_it_runs(tmp_path, monkeypatch) -> None:
    with pytest.raises(ConfigError, match="--slower-than"):
        _triage(tmp_path, monkeypatch, "--slower-than", "10")


class FakeCulprits:
    """find_culprits behind each edge: the axis, ends and pins each search got, and a commit for it."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, str, str, dict[str, str], Path]] = []

    def __call__(self, config: Any, request: Any, transitions: Sequence[Any], **kw: Any) -> list[Culprit]:
        [t] = transitions
        self.asked.append((request.axis, request.good, request.bad, dict(request.pins), kw["clone"]))
        kind = "introduced" if t.after.outcome != "PASS" else "fixed"
        commit = Commit(sha="b" * 40, subject=f"Touch {request.axis} (#7018)", pull_request="acme/x#7018")
        target = SearchTarget(outcome=t.after.outcome, signature_id=t.after.signature_id)
        rerun = f"reprobisect bisect --axis {request.axis}"
        return [Culprit(last=t.last, first=t.first, kind=kind, target=target, commit=commit, rerun=rerun)]


def _clone(path: Path) -> Path:
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    return path


def test_two_clones_name_the_commit_behind_each_edge_in_the_json_summary_and_terminal(
    tmp_path, monkeypatch, capsys
) -> None:
    fake = FakeCulprits()
    monkeypatch.setattr(edge_culprits, "find_culprits", fake)
    ds, pl = _clone(tmp_path / "ds"), _clone(tmp_path / "pl")
    triaged, _, _ = _triage(tmp_path, monkeypatch, "--git", f"deepspeed={ds}", "--git", f"lightning={pl}")
    [report] = triaged.grids
    culprits = report.culprits or ()
    by_axis = {c.axis: c for c in culprits}
    assert sorted(by_axis) == ["deepspeed", "lightning"] and len(culprits) == len(fake.asked)
    assert len(fake.asked) == len({(e.axis, e.passing, e.failing) for e in report.edges})  # one a pair
    brought = next(c for c in culprits if (c.passing, c.failing) == ("0.14.0", "0.14.1"))
    assert brought.direction == "brought" and brought.commit is not None
    assert brought.commit.pull_request == "acme/x#7018"
    assert ("deepspeed", "0.14.0", "0.14.1", {"lightning": brought.at}, ds) in [
        (a, g, b, {k: v for k, v in pins.items() if k == "lightning"}, c) for a, g, b, pins, c in fake.asked
    ]
    fixed = next(c for c in culprits if (c.passing, c.failing) == ("2.4.0", "2.3.3"))
    assert fixed.direction == "fixed" and fixed.clone == str(pl)
    written = json.loads(next((tmp_path / "out").glob("grid-*.json")).read_text())
    assert written == report.to_json() and GridReport.from_json(written, where="grid.json") == report
    summary = next((tmp_path / "out").glob("summary-*.md")).read_text()
    assert "The commit behind each edge" in summary and "**brought by `bbbbbbbbbbbb`** Touch deepspeed" in summary
    assert "**fixed by `bbbbbbbbbbbb`** Touch lightning (#7018) (acme/x#7018)" in summary
    assert "reprobisect bisect --axis lightning" in summary  # the re-run of each search
    printed = capsys.readouterr().out
    assert "commit: deepspeed 0.14.0 → 0.14.1 starts failing at lightning" in printed
    assert "brought by bbbbbbbbbbbb Touch deepspeed (#7018) (acme/x#7018)" in printed


def test_culprits_beside_two_ranges_clones_each_package_not_named(tmp_path, monkeypatch) -> None:
    fake = FakeCulprits()
    monkeypatch.setattr(edge_culprits, "find_culprits", fake)
    made: list[str] = []
    monkeypatch.setattr(edge_culprits.history, "clone_known", lambda package, dest: made.append(package) or dest)
    ds = _clone(tmp_path / "ds")
    triaged, _, _ = _triage(tmp_path, monkeypatch, "--culprits", "--git", f"deepspeed={ds}")
    culprits = triaged.grids[0].culprits or ()
    assert made == ["lightning"] and {c.axis for c in culprits} == {"deepspeed", "lightning"}
    assert all(c.commit is not None for c in culprits)


def test_without_clones_the_grid_answer_says_how_to_name_the_commits(tmp_path, monkeypatch) -> None:
    triaged, _, _ = _triage(tmp_path, monkeypatch)
    assert triaged.grids[0].culprits is None and "culprits" not in triaged.grids[0].to_json()
    summary = next((tmp_path / "out").glob("summary-*.md")).read_text()
    assert "add --git deepspeed=CLONE --git lightning=CLONE (or --culprits)" in summary


@pytest.mark.parametrize(
    ("given", "words"),
    [
        (lambda t: [str(_clone(t / "ds"))], "say which package each clone is of: --git deepspeed=CLONE"),
        (lambda t: [f"torch={_clone(t / 'ds')}"], "torch has no clone here"),
        (lambda t: [f"tinypkg={_clone(t / 'ds')}"], "tinypkg is not an axis this triage varies"),
        (lambda t: [f"deepspeed={t / 'missing'}"], r"--git deepspeed=\S+missing: no such folder"),
    ],
)
def test_clones_beside_two_ranges_are_refused_before_anything_runs(tmp_path, monkeypatch, given, words) -> None:
    extra = [word for value in given(tmp_path) for word in ("--git", value)]
    with pytest.raises(ConfigError, match=words):
        _triage(tmp_path, monkeypatch, *extra)
    assert not list((tmp_path / "out").glob("**/*.json"))  # no cell ran, no answer was written


_TEXT = st.text(st.characters(codec="utf-8"), max_size=30)


@settings(max_examples=60)
@given(_TEXT, _TEXT, st.integers(1, 60), st.sampled_from(["brought", "fixed"]))
@example(word="@0", signature="", cols=1, direction="brought")  # "@0" once went out unneutralised (CI, stop 56)
def test_hostile_words_never_reach_the_page_and_the_picture_fits_a_terminal(
    word: str, signature: str, cols: int, direction: Literal["brought", "fixed"]
) -> None:
    commit = Commit(sha=signature, subject=signature, pull_request=word) if cols % 2 else None
    culprit = Culprit(
        last=f"{word}1",
        first=f"{word}2",
        kind="introduced",
        target=None,
        commit=commit,
        last_good_commit=Commit(sha=signature, subject=word, pull_request=None),
        skipped_between=(word,) * (cols % 3),
        why=signature,
        rerun="x",
        release_sources=(signature,),
    )
    data = GridReport(
        repro=word,
        form=word,
        cell={word: word},
        row_axis=word,
        col_axis="deepspeed",
        rows=(f"{word}1", f"{word}2"),
        cols=tuple(f"0.{i}.{i}" for i in range(cols)),
        cells_run=3,
        cells_in_grid=2 * cols,
        waves=2,
        searched_along=word,
        assumption="monotone",
        assumption_held=False,
        checked=word,
        fallback=word,
        contradictions=(),
        regions=(
            GridRegion(
                rule=word,
                clauses=(word,),
                rows=(f"{word}1", f"{word}2"),
                cols=("0.0.0", "0.0.0"),
                cells=1,
                cells_run=1,
                signatures=(RegionSignature(id=word, text=signature, cells=1, outcome=word),),
                edges_proven=0,
            ),
        ),
        edges=(),
        grid=((GridCell(state="skipped", how="skipped", outcome=word, why=signature),) * cols,) * 2,
        fixes={word: (1, 2)},
        culprits=(
            EdgeCulprit(
                axis=word,
                at_axis=word,
                at=word,
                passing=f"{word}1",
                failing=f"{word}2",
                measured=True,
                edges_at=(word, signature),
                direction=direction,
                clone=word,
                culprit=culprit,
            ),
        ),
    )
    text = grid_markdown(data, name=word, rerun="x")
    assert "\x1b" not in text and "<!--" not in text and "\r" not in text
    assert not re.search(r"(?<![\w/.+-])@[A-Za-z0-9_-]", text.replace("@\u200b", ""))
    picture = grid_picture(data)
    assert all(len(line) <= 120 for line in picture[:-2]) and "\x1b" not in "".join(picture)
    assert "\x1b" not in "".join(grid_terminal(data))
