"""Score a grid search's answer against an interaction entry's truth: the rules cell by cell, the signatures of the
cells the harness ran, the pull requests at the edges, the cells run.

The answer is the ``grid-<slug>.json`` triage writes (bisect/grid_answer.py): every cell's state (measured,
inferred, skipped or not run), the regions with the signatures of the failing cells run in them, the edges. Its
rules are right when the cells they say fail — measured or inferred — are exactly the truth's failing cells, read
in the truth's own orientation whichever axis the harness made its rows; a cell it left unknown (skipped, not run,
or missing from its grid) makes them inexact, as a release it could not judge makes a one-package entry's ranges
inexact. Pure functions over plain data, so each way of being wrong is planted in a unit test
(tests/unit/test_corpus_interaction.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from reprobisect.corpus.scoring import NOT_APPLICABLE, ColumnVerdict, Row, named, prs_verdict, signature_agrees
from reprobisect.corpus.truth_model import EdgeChange, Interaction, Truth
from reprobisect.model.culprit import Commit

__all__ = ["edge_culprits", "grid_cells", "score_grid"]

Cell = tuple[str, str]  # (row release, column release) in the truth's orientation: (package's, partner's)
_KNOWN = ("fails", "passes")


def _listed(value: object) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else []


def grid_cells(truth: Truth, interaction: Interaction, answer: Mapping[str, Any]) -> dict[Cell, Mapping[str, Any]]:
    """Every cell of the answer's grid, keyed in the truth's orientation; empty when its axes are not the truth's."""
    row_axis, col_axis = answer.get("row_axis"), answer.get("col_axis")
    rows, cols, grid = _listed(answer.get("rows")), _listed(answer.get("cols")), answer.get("grid")
    if {row_axis, col_axis} != {truth.package, interaction.partner} or not isinstance(grid, list):
        return {}
    flipped = row_axis != truth.package
    found: dict[Cell, Mapping[str, Any]] = {}
    for r, line in enumerate(grid[: len(rows)]):
        for c, state in enumerate(line[: len(cols)] if isinstance(line, list) else []):
            if isinstance(state, Mapping):
                found[(cols[c], rows[r]) if flipped else (rows[r], cols[c])] = state
    return found


def _names(cells: Sequence[Cell]) -> str:
    shown = ", ".join("|".join(cell) for cell in cells[:8])
    return shown + (f" and {len(cells) - 8} more" if len(cells) > 8 else "")


def _rule(
    truth: Truth, interaction: Interaction, answer: Mapping[str, Any], cells: Mapping[Cell, Any]
) -> ColumnVerdict:
    """The harness's rules against the truth's regions, cell by cell (what each cell's state says, measured or
    inferred: the rules are drawn from exactly those)."""
    grid = [(r, c) for r in truth.releases for c in interaction.partner_releases]
    expected = truth.failing_cells()
    unknown = [cell for cell in grid if cell not in cells or cells[cell].get("state") not in _KNOWN]
    stated = {cell for cell in grid if cell in cells and cells[cell].get("state") == "fails"}
    wrong = [cell for cell in grid if cell not in unknown and (cell in stated) != (cell in expected)]
    regions = answer.get("regions")
    rules = [str(r.get("rule")) for r in regions if isinstance(r, Mapping)] if isinstance(regions, list) else []
    found = "; ".join(rules) or "no failing cell"
    if wrong:
        found += f" (wrong cells: {_names(wrong)})"
    if unknown:
        found += f" (not judged: {_names(unknown)})"
    return ColumnVerdict(ok=not wrong and not unknown, truth="; ".join(interaction.rules()), found=found)


def _signature_texts(answer: Mapping[str, Any]) -> dict[str, str]:
    """Each failure signature's text by its id, from the regions (every failing cell run lies in one)."""
    texts: dict[str, str] = {}
    regions = answer.get("regions")
    for region in regions if isinstance(regions, list) else []:
        signatures = region.get("signatures") if isinstance(region, Mapping) else None
        for entry in signatures if isinstance(signatures, list) else []:
            if isinstance(entry, Mapping) and entry.get("id") and entry.get("text"):
                texts[str(entry["id"])] = str(entry["text"])
    return texts


def _signature(interaction: Interaction, answer: Mapping[str, Any], cells: Mapping[Cell, Any]) -> ColumnVerdict:
    """On every cell the harness ran, its outcome and signature against the hand run's exit and last line."""
    texts = _signature_texts(answer)
    ran = [cell for cell, state in cells.items() if state.get("how") == "measured" and cell in interaction.cells]
    wrong = []
    for cell in ran:
        state = cells[cell]
        outcome, text = str(state.get("outcome", "MISSING")), texts.get(str(state.get("signature_id")))
        if not signature_agrees(interaction.cells[cell].last_line, outcome, text):
            wrong.append(f"{'|'.join(cell)}: {outcome} {text or ''}".rstrip())
    lines = {row.last_line for row in interaction.cells.values() if row.last_line}
    return ColumnVerdict(
        ok=not wrong and bool(ran),
        truth=f"{len(lines)} failure line(s); on the {len(ran)} cell(s) run",
        found=("as recorded" if ran else "no cell run") if not wrong else "; ".join(wrong)[:600],
    )


def edge_culprits(answer: Mapping[str, Any], changes: Sequence[EdgeChange]) -> list[Mapping[str, Any] | None] | None:
    """For each truth change, the commit search the answer made for the same step of an edge (None: it made none
    there), or None when it searched no edge at all (not asked). The one place that knows where a grid answer keeps
    them: ``culprits``, one per search (bisect/edge_culprits.py), each with its ``axis``, its ``passing`` and
    ``failing`` releases, the ``at`` releases of the other axis it stands for (``edges_at``) and the commit found,
    shaped as ``find_culprits``' dicts."""
    searches = [c for c in answer.get("culprits") or [] if isinstance(c, Mapping)]
    if not searches:
        return None
    found: list[Mapping[str, Any] | None] = []
    for change in changes:
        found.append(
            next(
                (
                    s
                    for s in searches
                    if (s.get("axis"), s.get("passing"), s.get("failing"))
                    == (change.package, change.passing, change.failing)
                    and change.at in [str(a) for a in s.get("edges_at") or [s.get("at")]]
                ),
                None,
            )
        )
    return found


def _edges(interaction: Interaction, answer: Mapping[str, Any]) -> ColumnVerdict:
    """The pull request behind each ``[[change]]``, against the culprit the answer names at that step."""
    if not interaction.changes:
        return NOT_APPLICABLE
    labels = [f"{c.package} {c.before} → {c.after} at {c.at}" for c in interaction.changes]
    culprits = edge_culprits(answer, interaction.changes)
    if culprits is None:
        wanted = ", ".join(f"{label}: {c.pr}" for label, c in zip(labels, interaction.changes, strict=True))
        # as the one-package columns under --no-culprits: a pull request the truth names and nobody looked for is
        # not found, so the row is not exact (a row is exact only when everything the truth knows was matched)
        return ColumnVerdict(ok=False, truth=wanted, found="not asked: the grid answer names no commit per edge")
    pairs = [(c.pr, _named(culprit)) for c, culprit in zip(interaction.changes, culprits, strict=True)]
    return prs_verdict(pairs, labels)


def _named(search: Mapping[str, Any] | None) -> str:
    """What an edge's commit search named, read from the grid answer's JSON and said as a release transition's is."""
    if search is None:
        return "no transition found"
    commit, why = search.get("commit"), search.get("why")
    found = None
    if isinstance(commit, Mapping) and commit:
        pr = commit.get("pull_request")
        sha, subject = str(commit.get("sha")), str(commit.get("subject"))
        found = Commit(sha=sha, subject=subject, pull_request=str(pr) if pr else None)
    return named(found, str(why) if why else None)


def _cells_run(answer: Mapping[str, Any]) -> str:
    run, size = answer.get("cells_run"), answer.get("cells_in_grid")
    return f"{run} of {size}" if isinstance(run, int) and isinstance(size, int) else "?"


def score_grid(truth: Truth, answer: Mapping[str, Any], seconds: float) -> Row:
    """An interaction entry's row: rule, signature and edges' pull requests scored; the one-package columns n/a."""
    interaction = truth.interaction
    if interaction is None:
        msg = f"{truth.name}: not an interaction entry"
        raise ValueError(msg)
    cells = grid_cells(truth, interaction, answer)
    return Row(
        entry=truth.name,
        ranges=NOT_APPLICABLE,
        introduced=NOT_APPLICABLE,
        fixed=NOT_APPLICABLE,
        signature=_signature(interaction, answer, cells),
        seconds=round(seconds, 1),
        rule=_rule(truth, interaction, answer, cells),
        edges=_edges(interaction, answer),
        cells=_cells_run(answer),
    )
