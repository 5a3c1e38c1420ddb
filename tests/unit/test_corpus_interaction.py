"""Corpus entries of kind ``interaction`` (issue #51 item 4): a bug between two packages whose truth is its whole
grid measured by hand and the rules read from it.

Hostile truths are refused naming file, key, value and fix; the scoring is held against grid answers made by the
harness's own grid search (bisect/grid.py, bisect/grid_answer.py) over planted grids, so the answer's shape is the
one triage writes, with each way of being wrong planted: a cell one off, a cell left unknown, another failure, the
axes the other way round, the wrong pull request at an edge.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import tarfile
import tomllib
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reprobisect.bisect.grid import grid_search
from reprobisect.bisect.grid_answer import grid_report
from reprobisect.bisect.search import ProbeResult
from reprobisect.commands import corpus
from reprobisect.commands.triage_flow import Triaged
from reprobisect.corpus.entries import why_not_here
from reprobisect.corpus.grid_scoring import edge_culprits, score_grid
from reprobisect.corpus.interaction import parse_rule
from reprobisect.corpus.table import Header, Ran, Table, markdown
from reprobisect.corpus.truth import load_truth, parse_truth
from reprobisect.corpus.truth_model import Truth
from reprobisect.errors import ConfigError
from reprobisect.model.culprit import Commit, Culprit
from reprobisect.model.grid_report import EdgeCulprit, GridCell, GridReport
from tests.conftest import tool_module

LIGHTNING = ("2.5.2", "2.5.5", "2.6.0")
DEEPSPEED = ("0.16.0", "0.16.4", "0.17.0")
BUG = "TypeError: DeepSpeedStrategy.__init__() got an unexpected keyword argument 'exclude_frozen_parameters'"
FAILING = {("2.5.2", "0.16.4"), ("2.5.2", "0.17.0")}  # (lightning, deepspeed)
MARKER = "# --- measured by tools/corpus_truth.py: everything below is rewritten; do not edit by hand ---"
HEAD = """\
schema = 1
title = "Lightning refuses exclude_frozen_parameters that DeepSpeed's tensor-parallel path asks for"
report = "Lightning-AI/pytorch-lightning#20040"
reporter = "no version named"
kinds = ["interaction", "exception"]
package = "lightning"
partner = "deepspeed"
releases = ["2.5.2", "2.5.5", "2.6.0"]
partner_releases = ["0.16.0", "0.16.4", "0.17.0"]
backend = "cpu"
precision = "bf16"
timeout = 600

[pins]
torch = "system"

[[region]]
rule = "lightning < 2.5.5 and deepspeed >= 0.16.4"
signature = "TypeError: ... unexpected keyword argument 'exclude_frozen_parameters'"

[[change]]
package = "deepspeed"
before = "0.16.0"
after = "0.16.4"
at = "2.5.2"
effect = "breaks"
pr = "deepspeedai/DeepSpeed#6922"
commit = "abcdef1"

[[change]]
package = "lightning"
before = "2.5.2"
after = "2.5.5"
at = "0.16.4"
effect = "fixes"
pr = "Lightning-AI/pytorch-lightning#21000"
commit = "abcdef2"
"""


def _cells(failing: Collection[tuple[str, str]] = FAILING) -> str:
    rows = []
    for row in LIGHTNING:
        for col in DEEPSPEED:
            line = json.dumps(BUG) if (row, col) in failing else '""'
            exit_status = 1 if (row, col) in failing else 0
            rows.append(f'"{row}|{col}" = {{ exit = {exit_status}, last_line = {line}, seconds = 3.0 }}')
    return "\n".join(["[cells]", *rows])


GOOD = f"{HEAD}\n{MARKER}\n{_cells()}\n"


def _entry(root: Path, text: str = GOOD, name: str = "pl-ds-frozen") -> Path:
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "issue.py").write_text("print('hi')\n")
    (folder / "truth.toml").write_text(text)
    return folder


def _truth(tmp_path: Path, text: str = GOOD) -> Truth:
    return load_truth(_entry(tmp_path, text))


def _refused(tmp_path: Path, text: str, *words: str) -> str:
    with pytest.raises(ConfigError) as info:
        _truth(tmp_path, text)
    message = str(info.value)
    assert message.startswith(str(tmp_path / "pl-ds-frozen" / "truth.toml") + ": ") and len(message) < 1200
    for word in words:
        assert word in message, message
    return message


# --- loading ---------------------------------------------------------------------------------------------------


def test_an_interaction_truth_loads_with_its_grid_regions_and_changes(tmp_path: Path) -> None:
    truth = _truth(tmp_path)
    assert truth.interaction is not None and truth.interaction.partner == "deepspeed"
    assert truth.failing_cells() == FAILING and truth.unmeasured() == [] and truth.runs == {}
    [region] = truth.interaction.regions
    assert (region.rows, region.cols) == ((0, 0), (1, 2))
    breaks, fixes = truth.interaction.changes
    assert (breaks.passing, breaks.failing, fixes.passing, fixes.failing) == ("0.16.0", "0.16.4", "2.5.5", "2.5.2")
    unmeasured = _truth(tmp_path / "b", HEAD)  # no cells yet: loads, and says what the tool has to measure
    assert len(unmeasured.unmeasured()) == 9 and unmeasured.unmeasured()[0] == "2.5.2|0.16.0"


@pytest.mark.parametrize(
    ("rule", "rows", "cols"),
    [
        ("lightning < 2.5.5 and deepspeed ≥ 0.16.4", (0, 0), (1, 2)),
        ("fails where deepspeed >= 0.16.4 and lightning < 2.5.5", (0, 0), (1, 2)),  # as the harness prints it
        ("2.5.2 ≤ lightning < 2.6.0", (0, 1), (0, 2)),
        ("2.5.5 <= lightning < 2.6.0 and deepspeed = 0.16.4", (1, 1), (1, 1)),
        ("fails everywhere in the grid", (0, 2), (0, 2)),
        ("  lightning   >=   2.6.0 ", (2, 2), (0, 2)),
    ],
)
def test_a_rule_names_its_rectangle_in_the_releases_listed(
    rule: str, rows: tuple[int, int], cols: tuple[int, int]
) -> None:
    spans = parse_rule(rule, {"lightning": LIGHTNING, "deepspeed": DEEPSPEED}, "t.toml", "region[0].rule")
    assert (spans["lightning"], spans["deepspeed"]) == (rows, cols)


def _without(text: str, line: str) -> str:
    assert line in text
    return text.replace(line + "\n", "")


_RULE = 'rule = "lightning < 2.5.5 and deepspeed >= 0.16.4"'
_FIRST_CELL = '"2.5.2|0.16.0" = { exit = 0, last_line = "", seconds = 3.0 }'
HOSTILE = [
    (('partner = "deepspeed"', "partner = 3"), ("partner = 3", "must be a str")),
    (('partner = "deepspeed"', 'partner = "lightning"'), ("partner = 'lightning'", "other axis")),
    (('partner = "deepspeed"', 'partner = "numpy"'), ("partner = 'numpy'", "deepspeed, torch, python")),
    (('package = "lightning"', 'package = "numpy"'), ("package = 'numpy'", "deepspeed, lightning, torch, python")),
    ((_RULE, 'rule = "lightning < 2.5.5 and numpy >= 1.0"'), ("region[0].rule", "'numpy'", "lightning and deepspeed")),
    ((_RULE, 'rule = "lightning < 2.5.5 and deepspeed >= 0.16.5"'), ("'0.16.5' is not a listed release",)),
    ((_RULE, 'rule = "lightning < 2.5.5 and lightning >= 2.5.2"'), ("names lightning twice",)),
    ((_RULE, 'rule = "lightning ~= 2.5"'), ("'lightning ~= 2.5'", "each clause must be")),
    ((_RULE, 'rule = "lightning < 2.5.2"'), ("holds no listed release of lightning",)),
    ((_RULE, 'rule = "2.6.0 <= lightning < 2.5.5"'), ("holds no listed release",)),
    ((_RULE, "rule = 7"), ("region[0].rule = 7", "must be a str")),
    ((_RULE, 'rule = ""'), ("region[0].rule", "at most 400 characters")),
    ((_RULE, f'rule = "{"lightning < 2.5.5 and " * 40}deepspeed >= 0.16.4"'), ("at most 400 characters",)),
    ((_RULE, 'rule = "lightning < 2.5.5 and deepspeed >= 0.17.0"'), ("region", "2.5.2|0.16.4 fails")),
    ((_RULE, 'rule = "lightning < 2.6.0 and deepspeed >= 0.16.4"'), ("2.5.5|0.16.4 passes", "exactly the failing")),
    ((_RULE, 'rules = "x"'), ("region[0].rules", "perhaps you meant 'rule'")),
    (("[[region]]\n" + _RULE, ""), ("region = []", "1 to 64 [[region]]")),
    ((_FIRST_CELL, ""), ("cells = '2.5.2|0.16.0'", "8 of 9 cells measured", "tools/corpus_truth.py")),
    ((_FIRST_CELL, _FIRST_CELL.replace("2.5.2|", "2.5.3|")), ("cells.'2.5.3|0.16.0'", "ROW|COLUMN")),
    ((_FIRST_CELL, _FIRST_CELL.replace("|0.16.0", "|0.16.0|x")), ("cells.'2.5.2|0.16.0|x'", "ROW|COLUMN")),
    ((_FIRST_CELL, _FIRST_CELL.replace("2.5.2|0.16.0", "x" * 5000 + "|0.16.0")), ("cells.'xxx", "...", "ROW|COL")),
    ((_FIRST_CELL, _FIRST_CELL.replace("2.5.2|0.16.0", "2.5.2\\u0007|0.16.0")), ("\\x07", "ROW|COLUMN")),
    ((_FIRST_CELL, '"2.5.2|0.16.0" = 3'), ("cells.'2.5.2|0.16.0' = 3", "must be a table")),
    ((_FIRST_CELL, _FIRST_CELL.replace("exit = 0", 'exit = "0"')), ("cells.'2.5.2|0.16.0'.exit", "must be a int")),
    ((_FIRST_CELL, _FIRST_CELL.replace("seconds = 3.0", "seconds = nan")), ("seconds = nan",)),
    ((_FIRST_CELL, _FIRST_CELL.replace("exit = 0", "exit = 0, colour = 1")), ("colour", "unknown key")),
    (('after = "0.16.4"', 'after = "0.17.0"'), ("change[0].before/after", "adjacent listed releases of deepspeed")),
    (('after = "0.16.4"', 'after = "0.16.5"'), ("change[0].before/after", "'0.16.0 → 0.16.5'")),
    (('at = "2.5.2"', 'at = "2.5.3"'), ("change[0].at = '2.5.3'", "listed release of lightning")),
    (('effect = "breaks"', 'effect = "improves"'), ("change[0].effect = 'improves'", "'breaks'")),
    (('effect = "breaks"', 'effect = "fixes"'), ("change[0].effect = 'fixes'", "says 2.5.2|0.16.4 passes")),
    (('at = "2.5.2"', 'at = "2.6.0"'), ("change[0].effect", "2.6.0|0.16.4 fails; its run says exit 0")),
    (('package = "deepspeed"\nbefore', 'package = "torch"\nbefore'), ("change[0].package = 'torch'", "grid's axes")),
    (('pr = "deepspeedai/DeepSpeed#6922"', 'pr = "6922"'), ("change[0].pr", "owner/repo#N")),
    (('commit = "abcdef1"', 'commit = "HEAD; rm -rf"'), ("change[0].commit", "commit sha")),
    (('commit = "abcdef1"', 'commits = "abcdef1"'), ("change[0].commits", "unknown key")),
    (
        ('[[change]]\npackage = "lightning"', '[[change]]\npackage = "deepspeed"'),
        ("change[1].before/after", "releases of deepspeed"),
    ),
    (('torch = "system"', 'torch = "system"\ndeepspeed = "0.16.4"'), ("pins.deepspeed", "grid's axes")),
    (('torch = "system"', 'torch = "system"\nlightning = "2.5.5"'), ("pins.lightning", "grid's axes")),
    (('"0.16.4", "0.17.0"]', '"0.17.0", "0.16.4"]'), ("partner_releases", "increasing order")),
    (('partner_releases = ["0.16.0", "0.16.4", "0.17.0"]', 'partner_releases = ["0.16.0"]'), ("list 2 to 64",)),
    (('partner_releases = ["0.16.0", "0.16.4", "0.17.0"]', 'partner_releases = "0.16.0"'), ("must be a list",)),
    (('partner_releases = ["0.16.0", "0.16.4", "0.17.0"]', ""), ("partner_releases = None", "missing")),
    (('kinds = ["interaction", "exception"]', 'kinds = ["interaction", "performance"]'), ("not both",)),
    (("timeout = 600", 'timeout = 600\n[[affected]]\nfirst = "2.5.2"\nlast = "2.5.2"'), ("affected", "[cells]")),
    (("timeout = 600", 'timeout = 600\n[runs]\n"2.5.2" = {exit = 0}'), ("runs", "interaction entry's truth")),
]


@pytest.mark.parametrize(("edit", "words"), HOSTILE)
def test_a_hostile_interaction_truth_is_refused_naming_key_value_and_fix(
    tmp_path: Path, edit: tuple[str, str], words: tuple[str, ...]
) -> None:
    old, new = edit
    assert old in GOOD
    _refused(tmp_path, GOOD.replace(old, new, 1), *words)


def test_a_one_package_entry_with_an_interaction_key_is_refused(tmp_path: Path) -> None:
    one = GOOD.replace('kinds = ["interaction", "exception"]', 'kinds = ["exception"]').replace(
        'package = "lightning"', 'package = "deepspeed"'
    )
    _refused(tmp_path, one, "partner = 'deepspeed'", "only an entry of kind 'interaction'")


def test_a_grid_larger_than_a_hand_can_measure_is_refused(tmp_path: Path) -> None:
    many = ", ".join(f'"0.{n}.0"' for n in range(65))
    _refused(tmp_path, GOOD.replace('["0.16.0", "0.16.4", "0.17.0"]', f"[{many}]"), "partner_releases", "2 to 64")


_INTERACTION_KEYS = ["partner", "partner_releases", "region", "change", "cells", "package", "releases", "kinds"]
_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(), st.text(max_size=30), st.lists(st.text(max_size=8), max_size=4),
    st.dictionaries(st.text(max_size=12), st.integers() | st.text(max_size=4), max_size=3),
    st.lists(st.dictionaries(st.sampled_from(["rule", "package", "at", "x"]), st.text(max_size=12)), max_size=2),
)  # fmt: skip


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(key=st.sampled_from(_INTERACTION_KEYS), value=_VALUES)
def test_any_value_in_any_interaction_key_loads_or_is_refused_by_name(tmp_path: Path, key: str, value: Any) -> None:
    data = tomllib.loads(GOOD)
    if value is None:
        del data[key]
    else:
        data[key] = value
    folder = tmp_path / "entry"
    folder.mkdir(exist_ok=True)
    (folder / "issue.py").write_text("")
    try:
        parse_truth(data, folder, where="truth.toml")
    except ConfigError as exc:
        assert str(exc).startswith("truth.toml: ") and len(str(exc)) < 1200
        named = (key, "region", "cells", "change", "pins", "affected", "kinds", "runs")
        assert any(word in str(exc) for word in named), str(exc)


# --- scoring: grid answers made by the harness's own grid search over planted grids ----------------------------


def _answer(
    failing: Collection[tuple[str, str]] = FAILING,
    *,
    rows_are: str = "deepspeed",
    skipped: Collection[tuple[str, str]] = (),
    text: str = BUG,
) -> GridReport:
    """A grid answer as triage writes it, from grid_search over a probe planted with ``failing`` (lightning,
    deepspeed) cells; ``rows_are``: which axis the harness made its rows."""
    flip = rows_are == "deepspeed"
    rows, cols = (DEEPSPEED, LIGHTNING) if flip else (LIGHTNING, DEEPSPEED)

    def probe(cells: Sequence[tuple[str, str]]) -> list[ProbeResult]:
        found = []
        for row, col in cells:
            key = (col, row) if flip else (row, col)
            if key in skipped:
                found.append(ProbeResult(version=f"{row},{col}", outcome="ENV_ERROR", signature="no wheel"))
            elif key in failing:
                found.append(ProbeResult(version="x", outcome="REPRODUCED", signature_id="s1", signature=text))
            else:
                found.append(ProbeResult(version=f"{row},{col}", outcome="PASS"))
        return found

    axes = ("deepspeed", "lightning") if flip else ("lightning", "deepspeed")
    result = grid_search(axes[0], rows, axes[1], cols, probe)
    return grid_report(result, repro="script-issue", form="cpu-shim", held={"torch": "2.13.0"})


def test_a_right_grid_answer_is_exact_whichever_axis_the_harness_made_its_rows(tmp_path: Path) -> None:
    truth = _truth(tmp_path)
    for rows_are in ("deepspeed", "lightning"):
        answer = _answer(rows_are=rows_are)
        row = score_grid(truth, answer, 61.04)
        assert row.rule.ok and row.signature.ok, row
        assert row.ranges.ok is None and row.introduced.ok is None and row.seconds == 61.0
        # the truth names a pull request at each edge, and nobody looked (--no-culprits): not exact, as a one-package
        # row whose introducing PR was not asked
        assert row.edges.ok is False and row.edges.found.startswith("not asked") and not row.exact
        right = {
            ("deepspeed", "2.5.2"): "deepspeedai/DeepSpeed#6922",
            ("lightning", "0.16.4"): "Lightning-AI/pytorch-lightning#21000",
        }
        assert score_grid(truth, _with_culprits(_answer(rows_are=rows_are), right), 61.04).exact
        assert row.cells == f"{answer.cells_run} of 9" and answer.cells_run <= 9
        assert "deepspeed ≥ 0.16.4" in row.rule.found and row.rule.truth == "lightning < 2.5.5 and deepspeed >= 0.16.4"


def test_a_cell_one_off_makes_the_rule_wrong_and_names_it(tmp_path: Path) -> None:
    truth = _truth(tmp_path)
    row = score_grid(truth, _answer({*FAILING, ("2.5.5", "0.17.0")}), 1.0)
    assert row.rule.ok is False and not row.exact and "wrong cells: 2.5.5|0.17.0" in row.rule.found
    row = score_grid(truth, _answer({("2.5.2", "0.17.0")}), 1.0)
    assert row.rule.ok is False and "2.5.2|0.16.4" in row.rule.found


def test_a_cell_the_harness_left_unknown_makes_the_rule_inexact(tmp_path: Path) -> None:
    truth = _truth(tmp_path)
    answer = _answer(skipped={("2.6.0", "0.17.0")})
    assert any(cell.state == "skipped" for line in answer.grid for cell in line)
    row = score_grid(truth, answer, 1.0)
    assert row.rule.ok is False and "not judged: 2.6.0|0.17.0" in row.rule.found
    answer = _answer()
    first = (GridCell(state="not run", how="not run"), *answer.grid[0][1:])
    answer = dataclasses.replace(answer, grid=(first, *answer.grid[1:]))
    assert score_grid(truth, answer, 1.0).rule.ok is False
    answer = dataclasses.replace(answer, grid=answer.grid[:2])  # a row missing from the answer's grid
    assert "not judged" in score_grid(truth, answer, 1.0).rule.found


def test_another_failure_on_a_cell_run_is_a_wrong_signature(tmp_path: Path) -> None:
    truth = _truth(tmp_path)
    row = score_grid(truth, _answer(text="ImportError: cannot import name 'X' from 'deepspeed'"), 1.0)
    assert row.rule.ok is True and row.signature.ok is False and "ImportError" in row.signature.found


def test_an_answer_over_other_axes_is_not_judged(tmp_path: Path) -> None:
    truth = _truth(tmp_path)
    answer = dataclasses.replace(_answer(), row_axis="torch")
    row = score_grid(truth, answer, 1.0)
    assert row.rule.ok is False and row.signature.ok is False and not row.exact
    with pytest.raises(ConfigError, match="grid answer"):  # a file of another shape is no answer to score
        GridReport.from_json({"kind": "grid", "grid": "x", "regions": 3}, where="grid-x.json")


def _with_culprits(answer: GridReport, prs: dict[tuple[str, str], str]) -> GridReport:
    """The answer with the commit searches triage makes behind its edges (bisect/edge_culprits.py: ``culprits``, one
    per search, each standing for the ``edges_at`` it names), one per edge here, with a pull request on the edges
    named by (axis, at) and none found on the others."""
    return answer.with_culprits(
        [
            EdgeCulprit(
                axis=edge.axis,
                at_axis=edge.at_axis,
                at=edge.at,
                passing=edge.passing,
                failing=edge.failing,
                measured=edge.measured,
                edges_at=(edge.at,),
                direction="brought",
                clone="/clone",
                culprit=Culprit(
                    last=edge.passing,
                    first=edge.failing,
                    kind="introduced",
                    target=None,
                    commit=Commit(sha="a" * 40, subject="s", pull_request=pr) if pr else None,
                    why=None if pr else "no tag",
                ),
            )
            for edge in answer.edges
            for pr in [prs.get((edge.axis, edge.at))]
        ]
    )


def test_the_edges_pull_requests_are_scored_when_the_answer_names_them(tmp_path: Path) -> None:
    truth = _truth(tmp_path)
    right = {
        ("deepspeed", "2.5.2"): "deepspeedai/DeepSpeed#6922",
        ("lightning", "0.16.4"): "Lightning-AI/pytorch-lightning#21000",
    }
    row = score_grid(truth, _with_culprits(_answer(), right), 1.0)
    assert row.edges.ok is True and row.exact and "deepspeed 0.16.0 → 0.16.4 at 2.5.2" in row.edges.truth
    wrong = {**right, ("lightning", "0.16.4"): "Lightning-AI/pytorch-lightning#20999"}
    row = score_grid(truth, _with_culprits(_answer(), wrong), 1.0)
    assert row.edges.ok is False and not row.exact and "#20999" in row.edges.found
    row = score_grid(truth, _with_culprits(_answer(), {("deepspeed", "2.5.2"): right[("deepspeed", "2.5.2")]}), 1.0)
    assert row.edges.ok is False and "no commit" in row.edges.found


def test_edge_culprits_match_a_change_to_the_step_of_the_same_axis_at_the_same_release(tmp_path: Path) -> None:
    interaction = _truth(tmp_path).interaction
    assert interaction is not None
    answer = _with_culprits(_answer(), {("lightning", "0.17.0"): "o/r#1", ("deepspeed", "2.5.2"): "o/r#2"})
    breaks, fixes = edge_culprits(answer, interaction.changes) or [None, None]
    assert breaks is not None and breaks.commit is not None and breaks.commit.pull_request == "o/r#2"
    assert fixes is not None and fixes.commit is None  # the step at deepspeed 0.16.4 has none; 0.17.0's is another
    assert edge_culprits(_answer(), interaction.changes) is None  # no edge has a culprit: not asked


def test_the_table_shows_the_rule_and_the_cells_run(tmp_path: Path) -> None:
    truth = _truth(tmp_path)
    prs = {
        ("deepspeed", "2.5.2"): "deepspeedai/DeepSpeed#6922",
        ("lightning", "0.16.4"): "Lightning-AI/pytorch-lightning#21000",
    }
    rows = [
        score_grid(truth, _with_culprits(_answer(), prs), 5.0),
        score_grid(truth, _answer({("2.5.2", "0.17.0")}), 5.0),
    ]
    header = Header(commit="abc", date="2026-12-07", backend="cpu", entry_jobs=1, wall_seconds=10.0)
    text = markdown(Table(rows=[Ran(row=r) for r in rows], not_run=[], command="reprobisect corpus", header=header))
    assert "rule exact?" in text and "edges' PRs right?" in text and "1 of 2 exact" in text
    assert f"({rows[0].cells} cells) |" in text and "lightning &lt; 2.5.5 and deepspeed >= 0.16.4" in text
    assert "wrong cells: 2.5.2\\|0.16.4" in text and "\\\\|" not in text  # a cell's pipe escaped once: one column


# --- the command --------------------------------------------------------------------------------------------------


def _options(tmp_path: Path, *extra: str) -> corpus.CorpusOptions:
    parser = argparse.ArgumentParser()
    corpus.setup_arguments(parser.add_subparsers())
    argv = ["corpus", "--jobs", "2", "--git", "/clone", "--out", str(tmp_path), *extra]
    return corpus.CorpusOptions.from_args(parser.parse_args(argv))


def test_an_interaction_entry_is_triaged_with_two_ranges_and_a_clone_for_each_package(tmp_path: Path) -> None:
    argv = corpus._triage_argv(_truth(tmp_path), _options(tmp_path))
    assert argv[argv.index("--lightning") + 1] == ",".join(LIGHTNING)
    assert argv[argv.index("--deepspeed") + 1] == ",".join(DEEPSPEED)
    assert "--git" not in argv and "--culprits" in argv  # a bare clone names no package: the harness clones both
    named = corpus._triage_argv(_truth(tmp_path), _options(tmp_path, "--git", "lightning=/l"))
    assert named[named.index("--git") + 1] == "lightning=/l" and "--culprits" in named  # deepspeed: the harness's
    both = _options(tmp_path, "--git", "lightning=/l", "--git", "deepspeed=/d")
    argv = corpus._triage_argv(_truth(tmp_path), dataclasses.replace(both, git=both.git[1:]))
    assert "--culprits" not in argv and {"lightning=/l", "deepspeed=/d"} <= set(argv)
    assert "--culprits" not in corpus._triage_argv(_truth(tmp_path), _options(tmp_path, "--no-culprits"))
    with pytest.raises(ConfigError, match=r"--deepspeed: .*pl-ds-frozen varies or pins deepspeed"):
        corpus.refuse_pins([_truth(tmp_path)], {"deepspeed": "0.16.4"})


def _run(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, grids: list[GridReport]) -> Any:
    triaged = Triaged(answers=[], timed=[], grids=grids)
    monkeypatch.setattr(corpus, "triage_answers", lambda args, rerun: triaged)
    return corpus.run_entry(_truth(tmp_path), _options(tmp_path))


def test_the_grid_answer_of_the_entrys_triage_is_scored(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    prs = {
        ("deepspeed", "2.5.2"): "deepspeedai/DeepSpeed#6922",
        ("lightning", "0.16.4"): "Lightning-AI/pytorch-lightning#21000",
    }
    assert _run(monkeypatch, tmp_path / "a", [_with_culprits(_answer(), prs)]).exact
    row = _run(monkeypatch, tmp_path / "b", [])
    assert not row.exact and "0 grid answers" in row.rule.found  # no grid searched: a wrong row, never hidden


def test_an_unmeasured_interaction_entry_is_listed_as_not_run(tmp_path: Path) -> None:
    corpus_dir = tmp_path / "corpus"
    _entry(corpus_dir, HEAD)
    out = tmp_path / "out"
    assert corpus.run_from_args(_namespace(corpus_dir, out)) == 0
    data = json.loads((out / "corpus.json").read_text())
    assert (
        data["ran"] == 0 and "2.5.2|0.16.0" in data["not_run"][0]["why"] and "9 more" not in data["not_run"][0]["why"]
    )


def _namespace(corpus_dir: Path, out: Path) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    corpus.setup_arguments(parser.add_subparsers())
    return parser.parse_args(["corpus", "--corpus", str(corpus_dir), "--out", str(out)])


# --- the hand tool ---------------------------------------------------------------------------------------------


def test_the_hand_tool_measures_every_cell_and_writes_them_below_the_marker(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    tool = tool_module("corpus_truth")
    folder = _entry(tmp_path, HEAD.replace("timeout = 600", "timeout = 600\nnotes = 'kept'"))
    asked: list[tuple[str, str | None]] = []

    def venv(work: Path, truth: dict[str, Any], release: str, partner_release: str | None = None) -> tuple[Path, str]:
        asked.append((release, partner_release))
        return tmp_path / f"{release}-{partner_release}" / "bin" / "python", f"installed {release} {partner_release}"

    def runs(python: Path, entry: Path, truth: dict[str, Any], ext: Path) -> tuple[dict[str, Any], str]:
        release, partner_release = python.parent.parent.name.split("-")
        fails = (release, partner_release) in FAILING
        return {"exit": int(fails), "last_line": BUG if fails else "", "seconds": 2.5}, f"ran {release}"

    monkeypatch.setattr(tool, "release_venv", venv)
    monkeypatch.setattr(tool, "_runs", runs)
    assert tool.main([str(folder), "--work", str(tmp_path / "work")]) == 0
    assert asked == [(r, c) for r in LIGHTNING for c in DEEPSPEED]
    text = (folder / "truth.toml").read_text()
    assert text.index(MARKER) < text.index("[cells]") and "notes = 'kept'" in text and "[runs]" not in text
    truth = load_truth(folder)
    assert truth.unmeasured() == [] and truth.failing_cells() == FAILING
    with tarfile.open(folder / "truth-logs.tar.xz") as tar:
        names = tar.getnames()
    assert len(names) == 9 and "cell-lightning-2.5.2-deepspeed-0.16.4.log" in names
    asked.clear()  # one row again, two columns: the rest stay as measured
    tool.main(
        [str(folder), "--work", str(tmp_path / "work"), "--releases", "2.5.5", "--partner-releases", "0.16.0,0.17.0"]
    )
    assert asked == [("2.5.5", "0.16.0"), ("2.5.5", "0.17.0")] and load_truth(folder).unmeasured() == []
    with pytest.raises(SystemExit, match="--commit"):
        tool.main([str(folder), "--commit", "abc", "--git", str(tmp_path)])


def test_the_hand_tool_installs_both_axes_releases_and_the_other_pins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tool = tool_module("corpus_truth")
    made: list[tuple[str, dict[str, str]]] = []
    installed: list[list[str]] = []

    def venv(work: Path, key: str, pins: dict[str, str]) -> Path:
        made.append((key, pins))
        (tmp_path / key / "bin").mkdir(parents=True)
        return tmp_path / key / "bin" / "python"

    monkeypatch.setattr(tool, "_venv", venv)
    monkeypatch.setattr(tool, "_install", lambda python, wanted, pins: installed.append(wanted) or "log")
    truth = {"package": "lightning", "partner": "deepspeed", "pins": {"torch": "system", "python": "system"}}
    tool.release_venv(tmp_path, truth, "2.5.2", "0.16.4")
    assert installed[-1] == ["lightning==2.5.2", "deepspeed==0.16.4"] and made[-1][0].startswith(
        "lightning-2.5.2-deepspeed-0.16.4-"
    )
    torch_axis = {"package": "deepspeed", "partner": "torch", "pins": {"lightning": "2.5.5"}}
    tool.release_venv(tmp_path, torch_axis, "0.16.4", "2.13.0")
    assert installed[-1] == ["deepspeed==0.16.4", "lightning==2.5.5"] and made[-1][1]["torch"] == "2.13.0"
    with pytest.raises(SystemExit, match="python axis"):
        tool.release_venv(tmp_path, {"package": "deepspeed", "partner": "python", "pins": {}}, "0.16.4", "3.12")


# --- packages a cell needs beside the matrix's ([requires]) ----------------------------------------------------------


def test_an_entry_that_needs_another_package_is_triaged_with_it_and_left_out_of_a_slice(tmp_path: Path) -> None:
    truth = _truth(tmp_path, GOOD + '\n[requires]\nnumpy = "1.26.4"\n')
    assert truth.requires == {"numpy": "1.26.4"}
    assert why_not_here(truth, backend="cpu", gpus=0) is None  # corpus's own triage installs it: --require
    argv = corpus._triage_argv(truth, _options(tmp_path))
    assert argv[argv.index("--require") + 1] == "numpy==1.26.4"
    why = why_not_here(truth, backend="cpu", gpus=0, axes={"deepspeed": "0.16.4"})  # a nightly slice's cells
    assert why is not None and "numpy==1.26.4" in why and "this slice's cells do not install" in why


@pytest.mark.parametrize(
    ("table", "words"),
    [
        ('torch = "2.4.0"', "requires.torch"),  # a matrix package: [pins]
        ('"bad name!" = "1.0"', "a package name other than the matrix's"),
        ('numpy = "latest"', "an exact version"),
        ("numpy = 126", "an exact version"),
        ('numpy = "1.26.4; rm -rf /"', "an exact version"),
        ('"-e" = "1.0"', "a package name"),
    ],
)
def test_a_hostile_requires_is_refused_naming_the_key(tmp_path: Path, table: str, words: str) -> None:
    _refused(tmp_path, GOOD + f"\n[requires]\n{table}\n", words)
