"""Score a grid search's answer against an interaction entry's truth: the rules cell by cell, the signatures of the
cells the harness ran, the pull requests at the edges, the cells run.

The answer is the ``grid-<slug>.json`` triage writes (bisect/grid_answer.py): every cell's state (measured,
inferred, skipped or not run), the regions with the signatures of the failing cells run in them, the edges. Its
rules are right when the cells they say fail — measured or inferred — are exactly the truth's failing cells, read
in the truth's own orientation whichever axis the harness made its rows; a cell it left unknown (skipped, not run,
or missing from its grid) makes them inexact, as a release it could not judge makes a one-package entry's ranges
inexact. Pure functions over the typed answer (model/grid_report.py), so each way of being wrong is planted in a
unit test (tests/unit/test_corpus_interaction.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from reprobisect.corpus.scoring import NOT_APPLICABLE, ColumnVerdict, Row, named, prs_verdict, signature_agrees
from reprobisect.corpus.truth_model import EdgeChange, Interaction, Truth
from reprobisect.model.grid_report import EdgeCulprit, GridCell, GridReport

__all__ = ["edge_culprits", "grid_cells", "score_grid"]

Cell = tuple[str, str]  # (row release, column release) in the truth's orientation: (package's, partner's)
_KNOWN = ("fails", "passes")


def grid_cells(truth: Truth, interaction: Interaction, answer: GridReport) -> dict[Cell, GridCell]:
    """Every cell of the answer's grid, keyed in the truth's orientation; empty when its axes are not the truth's."""
    if {answer.row_axis, answer.col_axis} != {truth.package, interaction.partner}:
        return {}
    flipped = answer.row_axis != truth.package
    found: dict[Cell, GridCell] = {}
    # not strict: a grid shorter than its axes (an answer made in code, not read back) leaves those cells unjudged
    for row, line in zip(answer.rows, answer.grid, strict=False):
        for col, state in zip(answer.cols, line, strict=False):
            found[(col, row) if flipped else (row, col)] = state
    return found


def _names(cells: Sequence[Cell]) -> str:
    shown = ", ".join("|".join(cell) for cell in cells[:8])
    return shown + (f" and {len(cells) - 8} more" if len(cells) > 8 else "")


def _rule(truth: Truth, interaction: Interaction, answer: GridReport, cells: Mapping[Cell, GridCell]) -> ColumnVerdict:
    """The harness's rules against the truth's regions, cell by cell (what each cell's state says, measured or
    inferred: the rules are drawn from exactly those)."""
    grid = [(r, c) for r in truth.releases for c in interaction.partner_releases]
    expected = truth.failing_cells()
    unknown = [cell for cell in grid if cell not in cells or cells[cell].state not in _KNOWN]
    stated = {cell for cell in grid if cell in cells and cells[cell].fails}
    wrong = [cell for cell in grid if cell not in unknown and (cell in stated) != (cell in expected)]
    found = "; ".join(region.rule for region in answer.regions) or "no failing cell"
    if wrong:
        found += f" (wrong cells: {_names(wrong)})"
    if unknown:
        found += f" (not judged: {_names(unknown)})"
    return ColumnVerdict(ok=not wrong and not unknown, truth="; ".join(interaction.rules()), found=found)


def _signature_texts(answer: GridReport) -> dict[str, str]:
    """Each failure signature's text by its id, from the regions (every failing cell run lies in one)."""
    return {s.id: s.text for region in answer.regions for s in region.signatures if s.id and s.text}


def _signature(interaction: Interaction, answer: GridReport, cells: Mapping[Cell, GridCell]) -> ColumnVerdict:
    """On every cell the harness ran, its outcome and signature against the hand run's exit and last line."""
    texts = _signature_texts(answer)
    ran = [cell for cell, state in cells.items() if state.how == "measured" and cell in interaction.cells]
    wrong = []
    for cell in ran:
        state = cells[cell]
        outcome, text = state.outcome or "MISSING", texts.get(str(state.signature_id))
        if not signature_agrees(interaction.cells[cell].last_line, outcome, text):
            wrong.append(f"{'|'.join(cell)}: {outcome} {text or ''}".rstrip())
    lines = {row.last_line for row in interaction.cells.values() if row.last_line}
    return ColumnVerdict(
        ok=not wrong and bool(ran),
        truth=f"{len(lines)} failure line(s); on the {len(ran)} cell(s) run",
        found=("as recorded" if ran else "no cell run") if not wrong else "; ".join(wrong)[:600],
    )


def edge_culprits(answer: GridReport, changes: Sequence[EdgeChange]) -> list[EdgeCulprit | None] | None:
    """For each truth change, the commit search the answer made for the same step of an edge (None: it made none
    there), or None when it searched no edge at all (not asked): one search per axis and pair of releases
    (bisect/edge_culprits.py), each standing for the ``at`` releases of the other axis in its ``edges_at``."""
    searches = answer.culprits or ()
    if not searches:
        return None
    return [
        next(
            (
                s
                for s in searches
                if (s.axis, s.passing, s.failing) == (change.package, change.passing, change.failing)
                and change.at in (s.edges_at or (s.at,))
            ),
            None,
        )
        for change in changes
    ]


def _edges(interaction: Interaction, answer: GridReport) -> ColumnVerdict:
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


def _named(search: EdgeCulprit | None) -> str:
    """What an edge's commit search named, said as a release transition's is."""
    if search is None:
        return "no transition found"
    return named(search.commit, search.why or None)


def _cells_run(answer: GridReport) -> str:
    return f"{answer.cells_run} of {answer.cells_in_grid}"


def score_grid(truth: Truth, answer: GridReport, seconds: float) -> Row:
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
