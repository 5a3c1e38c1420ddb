"""The typed grid answer (model/grid_report.py, issue #53 item 2): it writes the very JSON the grid answers held
before (keys and their order, led by ``schema_version``), reads back what it wrote, and refuses by file, key and
value any other text a records folder may hold — never another exception."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reprobisect.bisect.edge_culprits import chosen_edges
from reprobisect.bisect.grid import grid_search
from reprobisect.bisect.grid_answer import grid_report
from reprobisect.bisect.search import ProbeResult
from reprobisect.errors import ConfigError
from reprobisect.model.culprit import Commit, Culprit, SearchTarget
from reprobisect.model.grid_report import GRID_SCHEMA_VERSION, GridReport

ROOT = Path(__file__).resolve().parents[2]
REAL = (
    ROOT
    / "reports/cpu/2026-12-07-interaction-elastic-culprits/ia-ds-elastic-socket-port"
    / "grid-script-issue-cpu-deepspeed-deepspeed-torch.json"
)
ROWS, COLS = ("0.1", "0.2", "0.3", "0.4"), ("1.0", "1.1", "1.2")
CELLS = [(r, c) for r in ROWS for c in COLS]
_text = st.text(max_size=12)
_maybe = st.none() | _text


def _answer(failing: set[tuple[str, str]], skipped: set[tuple[str, str]]) -> GridReport:
    """The harness's own grid search over a probe planted with ``failing`` and ``skipped`` cells."""

    def probe(cells: Sequence[tuple[str, str]]) -> list[ProbeResult]:
        return [
            ProbeResult(version="x", outcome="ENV_ERROR", signature="no wheel")
            if cell in skipped
            else ProbeResult(version="x", outcome="REPRODUCED", signature_id="s1", signature="TypeError: x")
            if cell in failing
            else ProbeResult(version="x", outcome="PASS")
            for cell in cells
        ]

    result = grid_search("deepspeed", list(ROWS), "lightning", list(COLS), probe)
    return grid_report(result, repro="script-issue", form="cpu-shim", held={"torch": "2.13.0"})


_commit = st.none() | st.builds(Commit, sha=_text, subject=_text, pull_request=_maybe)


@st.composite
def _answers(draw: st.DrawFn) -> GridReport:
    """Real answers of planted grids, with or without the commit searches behind their edges (found, not found, or
    not searched)."""
    failing = draw(st.sets(st.sampled_from(CELLS)))
    skipped = draw(st.sets(st.sampled_from(CELLS), max_size=2))
    answer = _answer(failing, skipped)
    if draw(st.booleans()):
        return answer
    culprits = []
    for choice in chosen_edges(answer):
        older, newer = (choice.passing, choice.failing) if choice.breaking else (choice.failing, choice.passing)
        culprit = Culprit(
            last=older,
            first=newer,
            kind="introduced" if choice.breaking else "fixed",
            target=draw(st.none() | st.builds(SearchTarget, outcome=_text, signature_id=_maybe)),
            commit=draw(_commit),
            last_good_commit=draw(_commit),
            commits=draw(st.none() | st.integers(0, 99)),
            probes=draw(st.integers(0, 99)),
            skipped_between=tuple(draw(st.lists(_text, max_size=2))),
            why=draw(_maybe),
            rerun=draw(_maybe),
            release_sources=tuple(draw(st.lists(_text, max_size=2))),
        )
        kept = draw(st.sampled_from(["found", "no clone", "not borne out"]))
        if kept == "found":
            culprits.append(choice.searched(Path("/c"), measured_now=draw(st.booleans()), culprit=culprit))
        elif kept == "no clone":
            culprits.append(choice.searched(None, unsearched=draw(_maybe)))
        else:
            culprits.append(choice.searched(Path("/c"), measured_now=True, unsearched=draw(_text)))
    return answer.with_culprits(culprits)


def _through_a_file(report: GridReport) -> GridReport:
    return GridReport.from_json(json.loads(json.dumps(report.to_json())), where="grid-x.json")


@given(_answers())
def test_any_answer_reads_back_as_itself(answer: GridReport) -> None:
    assert _through_a_file(answer) == answer


def test_a_real_file_from_before_the_schema_reads_and_writes_back_what_it_held() -> None:
    """A real grid answer with the commit behind its edge, written before ``schema_version``: every value comes
    back, in its order, and the key leads."""
    data = json.loads(REAL.read_text())
    answer = GridReport.from_json(data, where=str(REAL))
    written = answer.to_json()
    assert list(written) == ["schema_version", *data] and {k: written[k] for k in data} == data
    assert written["schema_version"] == GRID_SCHEMA_VERSION
    along_torch, fixed = answer.culprits or ()
    assert along_torch.culprit is None and along_torch.why is not None and "torch has no clone" in along_torch.why
    assert fixed.commit is not None and fixed.commit.pull_request == "deepspeedai/DeepSpeed#5654"
    assert fixed.culprit is not None and (fixed.culprit.last, fixed.culprit.first) == ("0.14.3", "0.14.4")


def test_a_cell_not_searched_writes_the_keys_it_always_wrote() -> None:
    answer = _answer({("0.3", "1.0"), ("0.4", "1.0")}, set())
    [choice, *_] = chosen_edges(answer)
    entry = choice.searched(None, unsearched="no clone of deepspeed was given").to_json()
    assert list(entry)[8:] == ["clone", "commit", "last_good_commit", "commits", "probes", "why", "rerun"]
    assert (entry["probes"], entry["why"], entry["commit"]) == (0, "no clone of deepspeed was given", None)


def test_a_newer_schema_is_refused_and_says_to_upgrade() -> None:
    data = {**json.loads(REAL.read_text()), "schema_version": GRID_SCHEMA_VERSION + 1}
    with pytest.raises(ConfigError, match=r"schema_version 2, this harness reads 1; upgrade reprobisect"):
        GridReport.from_json(data, where="grid-new.json")


def _planted(key: str, value: Any) -> dict[str, Any]:
    """The real answer with ``value`` at ``key``: a top-level key, or ``grid.0.1.state`` style into it."""
    data = json.loads(REAL.read_text())
    *path, last = key.split(".")
    place: Any = data
    for step in path:
        place = place[int(step)] if isinstance(place, list) else place[step]
    place[int(last) if isinstance(place, list) else last] = value
    return data


@pytest.mark.parametrize(
    ("key", "value", "said"),
    [
        ("kind", "bisect", "'kind' is 'bisect'; expected 'grid'"),
        ("cells_run", -1, "'cells_run' is -1; expected a count"),
        ("rows", ["0.14.3"], "'grid' is"),  # one row named, two in the grid: not rows × cols
        ("grid.0", [], "'grid' is"),
        ("grid.0.0.state", "maybe", "grid[0][0] 'state' is 'maybe'; expected one of 'fails', 'passes'"),
        ("grid.1.0.because", "x", "grid[1][0] 'because' is 'x'; expected a list of objects"),
        ("regions.0.rows", ["0.14.4"], "regions[0] 'rows' is ['0.14.4']; expected two versions"),
        ("edges.0.measured", "yes", "edges[0] 'measured' is 'yes'; expected true or false"),
        ("edges.0.passing_cell", {"torch": 2}, "edges[0] 'passing_cell' is {'torch': 2}; expected an object"),
        ("culprits.0.direction", "sideways", "culprits[0] 'direction' is 'sideways'; expected one of"),
        ("culprits.0.kind", "maybe", "culprit 'kind' is 'maybe'"),
        ("fixes", {"compat": [3, 2]}, "'fixes' is {'compat': [3, 2]}; expected an object of fix names"),
        ("contradictions", [1], "contradictions[0] must be a JSON object"),
    ],
)
def test_a_wrong_value_is_named_with_its_file_and_key(key: str, value: Any, said: str) -> None:
    with pytest.raises(ConfigError) as caught:
        GridReport.from_json(_planted(key, value), where="grid-bad.json")
    assert str(caught.value).startswith("grid-bad.json") and said in str(caught.value)


_json_number = st.integers(-(10**6), 10**6) | st.floats(allow_nan=False, allow_infinity=False, width=32)
_json = st.recursive(
    st.none() | st.booleans() | _json_number | _text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=12,
)
_KEYS = [
    *sorted(json.loads(REAL.read_text())),
    "grid.0.0",
    "grid.1.1.outcome",
    "grid.0.1.because",
    "regions.0.signatures",
    "edges.0",
    "culprits.0.commit",
    "culprits.0.edges_at",
    "culprits.0.measured_now",
]


@given(st.sampled_from(_KEYS), _json)
def test_any_value_under_any_key_is_an_answer_or_a_config_error(key: str, value: object) -> None:
    try:
        GridReport.from_json(_planted(key, value), where="grid-merged.json")
    except ConfigError as exc:
        assert str(exc).startswith("grid-merged.json")


@given(_json)
def test_any_json_at_all_is_an_answer_or_a_config_error(value: object) -> None:
    with contextlib.suppress(ConfigError):
        GridReport.from_json(value, where="grid-merged.json")
