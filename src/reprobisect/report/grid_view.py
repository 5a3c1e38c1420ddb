"""A grid search's answer for people: the picture (rows × columns, one glyph a cell) for the terminal, and the
issue-ready Markdown section with the rules, each region's signatures, the cells run against the grid, the
assumption and its check, the edges with the cells that prove them, and the grid as a table.

It reads the answer (model/grid_report.py's ``GridReport``: made by bisect/grid_answer.py, or read back from a
``grid-<slug>.json`` by ``from_json``, which refuses a file that is not one), never the search. Every text a run
produced (a signature) is neutralised for its reader; versions and axis names come from the command line and the
index, and are neutralised too.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import Any

from reprobisect.model.grid_report import CellAt, EdgeCulprit, EdgeStep, GridCell, GridRegion, GridReport
from reprobisect.util.neutral import md_document, md_safe, printable

__all__ = ["GLYPHS", "LEGEND", "edge_words", "grid_markdown", "grid_picture", "grid_section", "grid_terminal"]

# measured cells get the strong glyph, inferred ones the light one: the region is drawn, the cells run stand out
GLYPHS = {
    ("fails", "measured"): "✗",
    ("passes", "measured"): "✓",
    ("fails", "inferred"): "x",
    ("passes", "inferred"): "·",
    ("skipped", "skipped"): "?",
    ("not run", "not run"): " ",
}
LEGEND = "✗ fails (run) · ✓ passes (run) · x fails (inferred) · · passes (inferred) · ? skipped · blank: not run"
WIDTH = 120


def _glyph(cell: GridCell) -> str:
    return GLYPHS.get((cell.state, cell.how), "!")


def grid_picture(data: GridReport, *, width: int = WIDTH) -> list[str]:
    """The grid for a terminal, at most ``width`` columns: rows labelled with their versions, each column as wide as
    its version when they fit (else one character, the versions listed below), one glyph a cell."""
    rows = [printable(r) for r in data.rows]
    cols = [printable(c) for c in data.cols]
    grid = data.grid
    label = max(len(r) for r in rows) + 1
    cell_width = max(len(c) for c in cols) + 1
    if label + cell_width * len(cols) > width:
        return _narrow(data, rows, cols, label, width)
    head = f"{printable(data.row_axis)} ↓ {printable(data.col_axis)} →"
    lines = [head, " " * label + "".join(c.rjust(cell_width) for c in cols)]
    for row, cells in zip(rows, grid, strict=True):
        lines.append(row.ljust(label) + "".join(_glyph(cell).rjust(cell_width) for cell in cells))
    return [*lines, LEGEND]


def _narrow(data: GridReport, rows: Sequence[str], cols: Sequence[str], label: int, width: int) -> list[str]:
    """Too many columns for their versions: one character a column, in blocks that fit ``width``, each column
    numbered and the numbers' versions listed."""
    per_block = max(1, width - label - 1)
    lines = [f"{printable(data.row_axis)} ↓ {printable(data.col_axis)} → (columns numbered below)"]
    for start in range(0, len(cols), per_block):
        block = range(start, min(len(cols), start + per_block))
        lines.append(" " * label + "".join(str(i % 10) for i in block))
        for row, cells in zip(rows, data.grid, strict=True):
            lines.append(row.ljust(label) + "".join(_glyph(cells[i]) for i in block))
    lines.append("columns: " + ", ".join(f"{i}={c}" for i, c in enumerate(cols)))
    return [*lines, LEGEND]


def edge_words(data: GridReport, edge: EdgeStep) -> str:
    """``deepspeed 0.16.0 → 0.16.4 starts failing at lightning 2.5.0``: the edge's two versions oldest first (the
    order of the grid's axis), and which way the outcome changes across it."""
    versions = data.versions(edge.axis)
    passing, failing = edge.passing, edge.failing
    older_passes = passing in versions and failing in versions and versions.index(passing) < versions.index(failing)
    low, high, change = (passing, failing, "starts failing") if older_passes else (failing, passing, "stops failing")
    return f"{edge.axis} {low} → {high} {change} at {edge.at_axis} {edge.at}"


def said(value: object) -> str:
    """A value of the answer, safe to print."""
    return printable(str(value))


def grid_terminal(data: GridReport, *, width: int = WIDTH) -> list[str]:
    """The answer for a terminal, in plain words: the rules with their signatures, the cells run against the grid,
    the assumption and its check, the edges proven by cells run, then the picture."""
    lines = [f"Grid: {said(data.repro)} ({said(data.form)}) across {said(data.row_axis)} × {said(data.col_axis)}"]
    for region in data.regions:
        lines.append(f"  {said(region.rule)}  ({region.cells} cells, {region.cells_run} run)")
        for signature in region.signatures:
            text = said(signature.text or "")[:200]
            lines.append(f"    {said(signature.outcome)} {said(signature.id or 'no signature')}: {text}")
    if not data.regions:
        lines.append("  no cell fails")
    lines.append(f"  {data.cells_run} of {data.cells_in_grid} cells run in {data.waves} waves")
    lines += [f"  assumed: {said(data.assumption)}", f"  checked: {said(data.checked)}"]
    if data.fallback:
        lines.append(f"  fallback: {said(data.fallback)}")
    for edge in [e for e in data.edges if e.measured][:10]:
        lines.append(f"  edge: {said(edge_words(data, edge))} (both cells run)")
    for culprit in (data.culprits or ())[:10]:
        lines.append(f"  commit: {said(edge_words(data, culprit))}{said(_also(culprit))}: {said(_found(culprit))}")
    skipped = sum(1 for row in data.grid for cell in row if cell.state == "skipped")
    if skipped:
        lines.append(f"  {skipped} cells skipped (no verdict; in no rule)")
    wrapped = [part for line in lines for part in textwrap.wrap(line, width, subsequent_indent="      ")]
    return wrapped + grid_picture(data, width=width)


def _also(culprit: EdgeCulprit) -> str:
    """The other edges one search stands for: `` (searched there; it answers for lightning 2.5.2, 2.5.3 too)``."""
    others = culprit.edges_at[1:]
    return f" (searched there; it answers for {culprit.at_axis} {', '.join(others)} too)" if others else ""


def _found(culprit: EdgeCulprit, *, markdown: bool = False) -> str:
    """``brought by 1a2b3c4d5e6f subject (owner/repo#123)``, or why no commit is named (texts not yet neutralised)."""
    commit = culprit.commit
    if commit is None:
        return f"commit unknown — {culprit.why}"
    by = f"{culprit.direction} by"
    sha = commit.sha[:12]
    pr = f" ({commit.pull_request})" if commit.pull_request else ""
    skipped = len(culprit.skipped_between)
    if skipped:  # the change lies in those commits or is the one named: the search could not tell
        last = culprit.last_good_commit.sha[:12] if culprit.last_good_commit is not None else ""
        pr += f"; or one of the {skipped} commits between {last} and it, which no run could judge"
    if markdown:
        return f"**{md_safe(by)} `{md_safe(sha)}`** {md_safe(commit.subject)}{md_safe(pr)}"
    return f"{by} {sha} {commit.subject}{pr}"


def _culprits(data: GridReport) -> list[str]:
    """The commit behind each edge searched (one search per axis and pair of releases), or the hint that clones
    would name them."""
    culprits = data.culprits
    if culprits is None:
        axes = " ".join(f"--git {md_safe(a)}=CLONE" for a in (data.row_axis, data.col_axis))
        return [f"The commit behind each edge: add {axes} (or --culprits).", ""] if data.edges else []
    lines = ["The commit behind each edge (one search per package and pair of releases, the other package held):"]
    for culprit in culprits[:20]:
        found = _found(culprit, markdown=True) if culprit.commit is not None else md_safe(_found(culprit))
        sources = "".join(f"; {md_safe(note)}" for note in culprit.release_sources)
        lines.append(f"- {md_safe(edge_words(data, culprit) + _also(culprit))}: {found}{sources}")
    return [*lines, ""]


def _cell_text(cell: CellAt) -> str:
    return ", ".join(f"{md_safe(k)} {md_safe(v)}" for k, v in cell.items())


def _headline(data: GridReport) -> list[str]:
    """The rules, each with its signatures; or that nothing fails."""
    regions = data.regions
    if not regions:
        return [f"Not affected: no cell of the {data.cells_in_grid} fails (of those run and inferred).", ""]
    lines = []
    for region in regions:
        run = f"{region.cells} cells, {region.cells_run} run, {region.edges_proven} edges proven"
        lines.append(f"- **{md_safe(region.rule)}** ({run})")
        for signature in region.signatures:
            sid = md_safe(signature.id or "no signature")
            text = md_safe(signature.text or "")[:300]
            lines.append(f"  - {md_safe(signature.outcome)} `{sid}` in {signature.cells} cells run: {text}")
    return [*lines, ""]


def _edges(data: GridReport) -> list[str]:
    """The edges proven by two neighbouring cells run; the count of those inferred."""
    proven = [e for e in data.edges if e.measured]
    lines = [f"Edges proven by cells run ({len(proven)} of {len(data.edges)}; the others are inferred):"]
    for edge in proven[:20]:
        lines.append(
            f"- {md_safe(edge_words(data, edge))}: ({_cell_text(edge.passing_cell)}) passes, "
            f"({_cell_text(edge.failing_cell)}) fails"
        )
    if len(proven) > 20:
        lines.append(f"- … {len(proven) - 20} more in the JSON")
    return [*lines, ""]


def _table(data: GridReport) -> list[str]:
    cols = [md_safe(c) for c in data.cols]
    corner = f"{md_safe(data.row_axis)} \\\\ {md_safe(data.col_axis)}"
    lines = [f"| {corner} | " + " | ".join(cols) + " |", "|---|" + "---|" * len(cols)]
    for row, cells in zip(data.rows, data.grid, strict=True):
        lines.append(f"| {md_safe(row)} | " + " | ".join(_glyph(c) for c in cells) + " |")
    return [*lines, "", LEGEND, ""]


def grid_markdown(data: GridReport, *, name: str = "", rerun: str = "") -> str:
    """The issue-ready section of a grid search (``name``: its JSON file; ``rerun``: the command that re-runs it)."""
    axes = f"{md_safe(data.row_axis)} × {md_safe(data.col_axis)}"
    lines = [f"### The answer: {md_safe(data.repro)} ({md_safe(data.form)}) across {axes}", ""]
    lines += _headline(data)
    held = ", ".join(f"{md_safe(k)} {md_safe(v)}" for k, v in data.cell.items())
    verdict = "held" if data.assumption_held else "broken"
    lines += [
        f"**{data.cells_run} of {data.cells_in_grid} cells run** ({data.waves} waves; the rest inferred), "
        f"searched along {md_safe(data.searched_along)}; other axes held: {held or 'none'}.",
        "",
        f"Assumed: {md_safe(data.assumption)}.",
        f"Checked: **{verdict}** {md_safe(data.checked.removeprefix(verdict).lstrip())}.",
    ]
    if data.fallback:
        lines.append(f"Fallback: {md_safe(data.fallback)}.")
    lines += ["", *(_edges(data) if data.edges else []), *_culprits(data)]
    skipped = [
        (row, col, cell)
        for row, cells in zip(data.rows, data.grid, strict=True)
        for col, cell in zip(data.cols, cells, strict=True)
        if cell.state == "skipped"
    ]
    if skipped:
        lines.append(f"Skipped (no verdict, in no rule): {len(skipped)} cells")
        lines += [f"- {md_safe(r)} × {md_safe(c)}: {md_safe(str(cell.why))}" for r, c, cell in skipped[:10]]
        lines.append("")
    for fix, (passed, judged) in data.fixes.items():
        lines.append(f"- fix `{md_safe(str(fix))}`: passes on {passed} of {judged} failing cells run")
    lines += _table(data)
    if name:
        lines.append(f"Every cell's state, with the cells each inference rests on: `{md_safe(name)}`.")
    commands = [rerun] if rerun else []
    commands += [c.rerun for c in data.culprits or () if c.rerun]
    if commands:
        lines += ["", "Re-run (records are reused):", "", "```", *commands, "```"]
    return md_document("\n".join([*lines, ""]))


def _css(cell: GridCell) -> str:
    """The class of a drawn cell: ``g-fails-measured``, ``g-passes-inferred``, ``g-not-run-not-run``."""
    return f"g-{cell.state.replace(' ', '-')}-{cell.how.replace(' ', '-')}"


def _signatures(region: GridRegion) -> list[str]:
    return [said(s.id or s.text or "no signature")[:200] for s in region.signatures]


def grid_section(data: GridReport) -> dict[str, Any]:
    """What the HTML page draws of one grid answer: its title, the rules with their signatures, the cells run of
    the grid, and the table: one glyph a cell, its state and how it is known as the cell's class (the page colours
    the failing region, the cells run in strong colours and the inferred ones light), and the commit behind each
    edge searched. Plain strings: the page's template escapes them."""
    rows = [
        {"version": said(version), "cells": [{"glyph": _glyph(c), "css": _css(c)} for c in cells]}
        for version, cells in zip(data.rows, data.grid, strict=True)
    ]
    regions = [{"rule": said(r.rule), "signatures": _signatures(r)} for r in data.regions]
    commits = [f"{edge_words(data, c)}{_also(c)}: {_found(c)}" for c in data.culprits or ()]
    axes = f"{said(data.row_axis)} × {said(data.col_axis)}"
    return {
        "title": f"{said(data.repro)} ({said(data.form)}) across {axes}",
        "row_axis": said(data.row_axis),
        "col_axis": said(data.col_axis),
        "cols": [said(c) for c in data.cols],
        "rows": rows,
        "regions": regions,
        "run": f"{said(data.cells_run)} of {said(data.cells_in_grid)} cells run",
        "commits": [said(c) for c in commits],
        "legend": LEGEND,
    }
