"""The commit behind each edge of a grid (bisect/edge_culprits.py): which edges are searched (one per axis and pair of
releases, at an edge whose both cells ran), with which clone, the other axis pinned at the edge's release, and why
an axis is not searched; the culprit search itself (``find_culprits``) and the grid's probe are faked."""

from __future__ import annotations

import dataclasses
import itertools
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from reprobisect.bisect import edge_culprits
from reprobisect.bisect.culprits import change_kind
from reprobisect.bisect.edge_culprits import (
    EdgeSearch,
    GridClones,
    chosen_edges,
    named_clones,
    refuse_clones,
)
from reprobisect.bisect.grid_answer import grid_report
from reprobisect.bisect.grid_result import CellState, GridResult
from reprobisect.bisect.probes import BisectRequest
from reprobisect.bisect.search import ProbeResult
from reprobisect.errors import ConfigError
from reprobisect.model.bisect_report import TransitionEntry
from reprobisect.model.culprit import Commit, Culprit, SearchTarget
from reprobisect.model.grid_report import GridReport
from reprobisect.report.grid_view import grid_markdown

ROWS = ("0.1", "0.2", "0.3")  # deepspeed
COLS = ("1.0", "1.1", "1.2")  # lightning
# fails where deepspeed ≥ 0.2 and lightning < 1.2: two deepspeed edges 0.1 → 0.2 (at 1.0 and 1.1), two lightning
# edges 1.1 → 1.2 (at 0.2 and 0.3)
FAILING = {(1, 0), (1, 1), (2, 0), (2, 1)}


def _report(measured: set[tuple[int, int]], row_axis: str = "deepspeed") -> GridReport:
    cells = {}
    for position in itertools.product(range(3), range(3)):
        fails = position in FAILING
        state = "fails" if fails else "passes"
        if position in measured:
            result = ProbeResult(
                version="x", outcome="OTHER_FAILURE" if fails else "PASS", signature_id="ce31b496b3" if fails else None
            )
            cells[position] = CellState(state=state, how="measured", result=result)  # type: ignore[arg-type]
        else:
            cells[position] = CellState(state=state, how="inferred")  # type: ignore[arg-type]
    result = GridResult(
        row_axis=row_axis,
        col_axis="lightning",
        rows=ROWS,
        cols=COLS,
        cells=cells,
        probed=tuple(sorted(measured)),
        waves=2,
        assumption="a staircase",
        assumption_held=True,
        checked="held",
        contradictions=(),
        fallback=None,
        searched_along="lightning",
    )
    return grid_report(result, repro="script-issue", form="cpu-deepspeed", held={"torch": "system"})


# the deepspeed edge at lightning 1.1 and the lightning edge at deepspeed 0.3 have both cells run; the others not
MEASURED = {(0, 1), (1, 1), (2, 1), (2, 2)}


class FakeCulprits:
    """find_culprits: the calls it got, and a commit for each transition."""

    def __init__(self) -> None:
        self.calls: list[tuple[BisectRequest, list[TransitionEntry], Path]] = []

    def __call__(self, config: Any, request: BisectRequest, transitions: Sequence[TransitionEntry], **kw: Any):
        self.calls.append((request, list(transitions), kw["clone"]))
        [t] = transitions
        commit = Commit(sha="a" * 40, subject=f"Change {request.axis} (#7)", pull_request="acme/pkg#7")
        kind = change_kind(t.before.outcome, t.after.outcome)
        target = SearchTarget(outcome=t.after.outcome, signature_id=t.after.signature_id)
        return [Culprit(last=t.last, first=t.first, kind=kind, target=target, commit=commit, rerun="re")]


class FakeMeasure:
    """The grid's probe of cells: the cells asked, answered with the outcomes given."""

    def __init__(self, outcomes: Sequence[str]) -> None:
        self.outcomes = outcomes
        self.asked: list[list[tuple[str, str]]] = []

    def __call__(self, cells: Sequence[tuple[str, str]]) -> list[ProbeResult]:
        self.asked.append(list(cells))
        return [
            ProbeResult(version=f"{r} {c}", outcome=o, signature_id=None if o == "PASS" else "ce31b496b3")
            for (r, c), o in zip(cells, self.outcomes, strict=True)
        ]


def _search(tmp_path: Path, clones: GridClones, measure: FakeMeasure | None = None) -> EdgeSearch:
    request = BisectRequest(
        repro="script-issue", form="cpu-deepspeed", axis="deepspeed", good="0.1", bad="0.3", pins={"torch": "system"}
    )
    return EdgeSearch(
        config=None,  # type: ignore[arg-type]
        request=request,
        ctx=type("Ctx", (), {"echo": staticmethod(lambda line: None)})(),  # type: ignore[arg-type]
        clones=clones,
        measure=measure or FakeMeasure([]),
        source=["--script", "issue.py"],
    )


def test_a_staircase_of_edges_between_two_releases_is_one_search_at_an_edge_whose_cells_ran() -> None:
    deepspeed, lightning = chosen_edges(_report(MEASURED))
    assert (deepspeed.axis, deepspeed.passing, deepspeed.failing) == ("deepspeed", "0.1", "0.2")
    assert deepspeed.at == "1.1" and deepspeed.ats == ("1.1", "1.0") and deepspeed.measured and deepspeed.breaking
    assert deepspeed.cells == (("0.1", "1.1"), ("0.2", "1.1"))
    assert (lightning.axis, lightning.passing, lightning.failing) == ("lightning", "1.2", "1.1")
    assert lightning.at == "0.3" and lightning.ats == ("0.3", "0.2") and lightning.measured
    assert not lightning.breaking and lightning.searched(None).direction == "fixed"


def test_with_no_edge_measured_the_first_is_searched() -> None:
    deepspeed, _ = chosen_edges(_report(set()))
    assert deepspeed.at == "1.0" and not deepspeed.measured and deepspeed.ats == ("1.0", "1.1")


def test_each_axis_is_searched_with_its_clone_the_other_pinned_at_the_edge(tmp_path, monkeypatch) -> None:
    fake = FakeCulprits()
    monkeypatch.setattr(edge_culprits, "find_culprits", fake)
    clones = GridClones(named={"deepspeed": tmp_path / "ds", "lightning": tmp_path / "pl"})
    brought, fixed = edge_culprits.edge_culprits(_search(tmp_path, clones), _report(MEASURED))
    (ds_request, [ds_transition], ds_clone), (pl_request, [pl_transition], pl_clone) = fake.calls
    assert (ds_request.axis, ds_request.good, ds_request.bad) == ("deepspeed", "0.1", "0.2")
    assert dict(ds_request.pins) == {"torch": "system", "lightning": "1.1"} and ds_clone == tmp_path / "ds"
    assert ds_transition.before.outcome == "PASS" and ds_transition.after.signature_id == "ce31b496b3"
    # a fix: the older release fails, the newer passes, and the search looks for PASS from 1.1 to 1.2
    assert (pl_request.axis, pl_request.good, pl_request.bad) == ("lightning", "1.1", "1.2")
    assert dict(pl_request.pins) == {"torch": "system", "deepspeed": "0.3"} and pl_clone == tmp_path / "pl"
    assert pl_transition.before.outcome == "OTHER_FAILURE" and pl_transition.after.outcome == "PASS"
    assert brought.direction == "brought" and brought.commit.pull_request == "acme/pkg#7"
    assert brought.at == "1.1" and brought.edges_at == ("1.1", "1.0") and not brought.measured_now
    assert fixed.direction == "fixed" and fixed.culprit.kind == "fixed" and fixed.clone == str(tmp_path / "pl")


def test_a_clone_for_one_axis_searches_that_axis_and_says_why_not_the_other(tmp_path, monkeypatch) -> None:
    fake = FakeCulprits()
    monkeypatch.setattr(edge_culprits, "find_culprits", fake)
    clones = GridClones(named={"deepspeed": tmp_path / "ds"})
    brought, fixed = edge_culprits.edge_culprits(_search(tmp_path, clones), _report(MEASURED))
    assert [call[0].axis for call in fake.calls] == ["deepspeed"] and brought.commit is not None
    assert fixed.commit is None and fixed.clone is None
    assert "no clone of lightning was given (only --git deepspeed=…)" in fixed.why
    assert "--git lightning=CLONE, or --culprits" in fixed.why


def test_a_python_or_torch_axis_has_no_clone_and_says_so(tmp_path, monkeypatch) -> None:
    fake = FakeCulprits()
    monkeypatch.setattr(edge_culprits, "find_culprits", fake)
    clones = GridClones(named={"lightning": tmp_path / "pl"}, harness=True)
    along_python, _ = edge_culprits.edge_culprits(_search(tmp_path, clones), _report(MEASURED, row_axis="python"))
    assert along_python.axis == "python" and along_python.commit is None
    assert "python is the interpreter" in along_python.why
    assert [call[0].axis for call in fake.calls] == ["lightning"]
    assert dict(fake.calls[0][0].pins) == {"torch": "system", "python": "0.3"}
    assert "not built by the harness" in GridClones(harness=True).for_axis("torch")[1]  # type: ignore[operator]


def test_an_inferred_edge_has_its_two_cells_run_before_its_commits_are_searched(tmp_path, monkeypatch) -> None:
    fake = FakeCulprits()
    monkeypatch.setattr(edge_culprits, "find_culprits", fake)
    measure = FakeMeasure(["PASS", "OTHER_FAILURE"])
    search = _search(tmp_path, GridClones(named={"deepspeed": tmp_path / "ds"}), measure)
    brought, _ = edge_culprits.edge_culprits(search, _report({(2, 1), (2, 2)}))  # no deepspeed edge ran
    assert measure.asked == [[("0.1", "1.0"), ("0.2", "1.0")]]
    assert brought.measured_now and brought.at == "1.0" and brought.commit is not None
    [(request, [transition], _)] = fake.calls
    assert transition.after.signature_id == "ce31b496b3" and dict(request.pins)["lightning"] == "1.0"


@pytest.mark.parametrize("outcomes", [["PASS", "PASS"], ["OTHER_FAILURE", "OTHER_FAILURE"], ["PASS", "ENV_ERROR"]])
def test_an_inferred_edge_its_cells_do_not_bear_out_is_not_searched(tmp_path, monkeypatch, outcomes) -> None:
    fake = FakeCulprits()
    monkeypatch.setattr(edge_culprits, "find_culprits", fake)
    search = _search(tmp_path, GridClones(named={"deepspeed": tmp_path / "ds"}), FakeMeasure(outcomes))
    brought, _ = edge_culprits.edge_culprits(search, _report({(2, 1), (2, 2)}))
    assert fake.calls == [] and brought.commit is None and "do not bear out what was inferred" in brought.why
    assert f"(0.2, 1.0) {outcomes[1]}" in brought.why


def test_a_clone_the_harness_cannot_make_is_said_for_its_axis_and_the_other_is_searched(tmp_path, monkeypatch):
    fake = FakeCulprits()
    monkeypatch.setattr(edge_culprits, "find_culprits", fake)

    def clone_known(package: str, dest: Path) -> Path:
        if package == "lightning":
            msg = "could not clone https://github.com/Lightning-AI/pytorch-lightning (offline); pass --git CLONE"
            raise ConfigError(msg)
        return dest / package

    monkeypatch.setattr(edge_culprits.history, "clone_known", clone_known)
    clones = GridClones(harness=True, clones_dir=tmp_path / "clones")
    brought, fixed = edge_culprits.edge_culprits(_search(tmp_path, clones), _report(MEASURED))
    assert brought.clone == str(tmp_path / "clones" / "deepspeed") and brought.commit is not None
    assert fixed.commit is None and "could not clone" in fixed.why


def test_no_edge_no_search(tmp_path, monkeypatch) -> None:
    report = dataclasses.replace(_report(MEASURED), edges=())
    clones = GridClones(named={"deepspeed": tmp_path / "ds"})
    assert edge_culprits.edge_culprits(_search(tmp_path, clones), report) == []


def test_git_values_name_their_package_or_are_the_one_bare_clone() -> None:
    bare, named = named_clones(["deepspeed=/c/ds", "Lightning=rel/pl", "./odd=name"])
    assert bare == Path("./odd=name") and named == {"deepspeed": Path("/c/ds"), "lightning": Path("rel/pl")}
    assert named_clones([]) == (None, {})


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (["/a", "/b"], "a second clone without a package"),
        (["deepspeed=/a", "DeepSpeed=/b"], "a clone of deepspeed was given twice"),
        (["torch=/a"], "torch has no clone here"),
        (["python=/a"], "python is the interpreter"),
        (["deepspeed="], "no clone after '='"),
    ],
)
def test_a_bad_git_value_is_refused_by_name(values: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        named_clones(values)


def _clone(path: Path) -> Path:
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    return path


def test_clones_are_checked_before_anything_runs(tmp_path: Path) -> None:
    ds = _clone(tmp_path / "ds")
    refuse_clones(None, {"deepspeed": ds}, varying=["deepspeed", "lightning"], grid=True)
    with pytest.raises(ConfigError, match=r"--git lightning=\S+/nowhere: no such folder"):
        refuse_clones(None, {"lightning": tmp_path / "nowhere"}, varying=["deepspeed", "lightning"], grid=True)
    with pytest.raises(ConfigError, match=r"--git tinypkg=\S+: tinypkg is not an axis this triage varies \(deepspeed"):
        refuse_clones(None, {"tinypkg": ds}, varying=["deepspeed", "lightning"], grid=True)
    with pytest.raises(ConfigError, match="--git deepspeed=CLONE --git lightning=CLONE"):
        refuse_clones(ds, {}, varying=["deepspeed", "lightning"], grid=True)
    with pytest.raises(ConfigError, match=r"--git lightning=CLONE$"):
        refuse_clones(ds, {}, varying=["torch", "lightning"], grid=True)  # torch has no clone to name
    refuse_clones(ds, {}, varying=["deepspeed"], grid=False)  # one range: the bare clone is its package's


def test_a_commit_found_past_commits_no_run_could_judge_says_so() -> None:
    report = _report(MEASURED)
    culprit = Culprit(
        last="0.1",
        first="0.2",
        kind="introduced",
        target=SearchTarget(outcome="OTHER_FAILURE", signature_id="ce31b496b3"),
        commit=Commit(sha="c" * 40, subject="Add tp_manager.py (#9084)", pull_request="acme/ds#9084"),
        last_good_commit=Commit(sha="d" * 40, subject="before", pull_request=None),
        skipped_between=("e" * 12,) * 22,
    )
    report = report.with_culprits([chosen_edges(report)[0].searched(None, culprit=culprit)])
    line = next(line for line in grid_markdown(report).splitlines() if "brought by" in line)
    assert "**brought by `cccccccccccc`** Add tp_manager.py (#9084) (acme/ds#9084); or one of the 22 commits" in line
    assert "between dddddddddddd and it, which no run could judge" in line
