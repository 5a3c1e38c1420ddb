"""An interaction entry's truth: a bug between two packages, measured by hand on every cell of their grid.

Its truth is the grid itself (``[cells]``, one hand run per pair of releases, written by ``tools/corpus_truth.py``)
and the rules a person reads from it (``[[region]]``: rectangles of listed releases, written as the harness writes
its own rules), with the pull request on each side of an edge where known (``[[change]]``). All of it is held
against the cells, because the scoring compares the harness's rules with these cell by cell: a region one cell off
would score a wrong answer as right. Every error names the file, the key, the value and the fix
(/work/briefs/interaction-schema.md is the format; corpus/README.md says it for contributors).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from reprobisect.corpus.truth_fields import change, check_keys, measured_row, releases
from reprobisect.corpus.truth_model import AXES, EFFECTS, EdgeChange, Interaction, MeasuredRelease, Region, fail

__all__ = ["CELL_SEPARATOR", "INTERACTION_KEYS", "MAX_REGIONS", "parse_interaction", "parse_rule"]

CELL_SEPARATOR = "|"  # a cell's key: "ROW_RELEASE|COLUMN_RELEASE"
MAX_REGIONS = 64
MAX_RULE = 400  # characters of one rule
INTERACTION_KEYS = ("partner", "partner_releases", "region", "change", "cells")
_REGION = {"rule": str, "signature": str}
_CHANGE = {
    "package": str, "before": str, "after": str, "at": str, "effect": str,
    "pr": str, "commit": str, "parent": str, "how": str,
}  # fmt: skip
_PREFIXES = ("fails where ",)
_EVERYWHERE = ("everywhere", "fails everywhere in the grid")
_BETWEEN = re.compile(r"(?P<low>\S+)\s*(?:<=|≤)\s*(?P<axis>[a-z]+)\s*<\s*(?P<high>\S+)")
_ONE_SIDE = re.compile(r"(?P<axis>[a-z]+)\s*(?P<op><|>=|≥|=)\s*(?P<value>\S+)")


def parse_rule(rule: str, axes: Mapping[str, Sequence[str]], where: str, key: str) -> dict[str, tuple[int, int]]:
    """The spans (inclusive index pairs into each axis's listed releases) a rule names: clauses joined by ``and``,
    each ``AXIS < v``, ``AXIS >= v`` (or ``≥``), ``AXIS = v`` or ``a <= AXIS < b`` (or ``≤``), an axis not named
    spanned whole; an optional ``fails where`` before them, as the harness prints its rules."""
    text = " ".join(rule.split())
    if not text or len(text) > MAX_RULE or not text.isprintable():
        raise fail(where, key, rule, f"must be a rule of at most {MAX_RULE} characters ('deepspeed >= 0.14.1')")
    for prefix in _PREFIXES:
        text = text.removeprefix(prefix)
    spans = {axis: (0, len(values) - 1) for axis, values in axes.items()}
    if text in _EVERYWHERE:
        return spans
    named: set[str] = set()
    for clause in text.split(" and "):
        axis, span = _clause(clause.strip(), axes, where, key)
        if axis in named:
            raise fail(where, key, rule, f"names {axis} twice; one clause per axis ('a <= {axis} < b' for a span)")
        named.add(axis)
        spans[axis] = span
    return spans


def _clause(clause: str, axes: Mapping[str, Sequence[str]], where: str, key: str) -> tuple[str, tuple[int, int]]:
    """One clause's axis and span."""
    between, one_side = _BETWEEN.fullmatch(clause), _ONE_SIDE.fullmatch(clause)
    match = between or one_side
    if match is None:
        right = "each clause must be 'AXIS < v', 'AXIS >= v', 'AXIS = v' or 'a <= AXIS < b', joined by ' and '"
        raise fail(where, key, clause, right)
    axis = match["axis"]
    if axis not in axes:
        raise fail(where, key, clause, f"names the axis {axis!r}; the grid's axes are {' and '.join(axes)}")
    listed = axes[axis]

    def index(value: str) -> int:
        if value not in listed:
            raise fail(where, key, clause, f"{value!r} is not a listed release of {axis} ({', '.join(listed)})")
        return listed.index(value)

    if between is not None:
        low, high = index(between["low"]), index(between["high"])
        span = (low, high - 1)
    else:
        at, op = index(one_side["value"]), one_side["op"]  # type: ignore[index]
        span = {"<": (0, at - 1), "=": (at, at)}.get(op, (at, len(listed) - 1))
    if span[0] > span[1]:
        raise fail(where, key, clause, f"holds no listed release of {axis}; widen it or drop the region")
    return axis, span


def _region(table: Any, axes: Mapping[str, Sequence[str]], where: str, n: int) -> Region:
    key = f"region[{n}]"
    if not isinstance(table, dict):
        raise fail(where, key, table, "must be a table ([[region]] with rule and signature)")
    check_keys(table, _REGION, where, key + ".")
    if "rule" not in table:
        raise fail(where, f"{key}.rule", None, "missing; the rule a person reads from the grid ('lightning < 2.4.0')")
    spans = parse_rule(table["rule"], axes, where, f"{key}.rule")
    row_axis, col_axis = axes
    return Region(rule=table["rule"], rows=spans[row_axis], cols=spans[col_axis], signature=table.get("signature", ""))


def _edge_change(table: Any, axes: Mapping[str, Sequence[str]], where: str, n: int) -> EdgeChange:
    """A ``[[change]]``: adjacent listed releases of its package, ``at`` a listed release of the other axis."""
    key = f"change[{n}]"
    if not isinstance(table, dict):
        raise fail(where, key, table, "must be a table ([[change]] with package, before, after, at, effect, pr)")
    check_keys(table, _CHANGE, where, key + ".")
    package = table.get("package")
    if not isinstance(package, str) or package not in axes:
        raise fail(where, f"{key}.package", package, f"must be one of the grid's axes: {', '.join(axes)}")
    listed = axes[package]
    other = next(axis for axis in axes if axis != package)
    before, after = table.get("before"), table.get("after")
    if before not in listed or after not in listed or listed.index(after) != listed.index(before) + 1:
        right = f"before and after must be adjacent listed releases of {package}, increasing ({', '.join(listed)})"
        raise fail(where, f"{key}.before/after", f"{before} → {after}", right)
    if table.get("at") not in axes[other]:
        right = f"must be a listed release of {other} ({', '.join(axes[other])}), where the change was checked"
        raise fail(where, f"{key}.at", table.get("at"), right)
    if table.get("effect") not in EFFECTS:
        right = "must be 'breaks' (before passes, after fails) or 'fixes' (before fails, after passes)"
        raise fail(where, f"{key}.effect", table.get("effect"), right)
    fields = ("package", "before", "after", "at", "effect")
    pr = change({k: v for k, v in table.items() if k not in fields}, where, key)
    return EdgeChange(pr=pr.pr, commit=pr.commit, parent=pr.parent, how=pr.how, **{k: table[k] for k in fields})


def _cells(
    table: Mapping[str, Any], axes: Mapping[str, Sequence[str]], where: str
) -> dict[tuple[str, str], MeasuredRelease]:
    """``[cells]``: each key a listed row release and a listed column release, each value a hand run."""
    rows, cols = axes.values()
    found = {}
    for name, row in table.items():
        row_release, sep, col_release = name.partition(CELL_SEPARATOR)
        if not sep or row_release not in rows or col_release not in cols:
            right = f"a cell is 'ROW|COLUMN' of listed releases ({'/'.join(axes)}, e.g. '{rows[0]}|{cols[0]}')"
            raise fail(where, f"cells.{name!r}", row, right)
        found[(row_release, col_release)] = measured_row(row, where, f"cells.{name!r}")
    return found


def parse_interaction(data: Mapping[str, Any], package: str, rows: tuple[str, ...], where: str) -> Interaction:
    """The interaction keys of a truth whose row axis is ``package`` with releases ``rows``, checked against each
    other and against the cells measured."""
    partner = data.get("partner")
    if partner not in AXES or partner == package:
        right = f"must be the grid's other axis: one of {', '.join(a for a in AXES if a != package)}"
        raise fail(where, "partner", partner, right)
    if "partner_releases" not in data:
        raise fail(where, "partner_releases", None, f"missing; the releases of {partner} measured, increasing")
    axes = {package: rows, partner: releases(data["partner_releases"], where, "partner_releases")}
    regions = data.get("region", [])
    if not 1 <= len(regions) <= MAX_REGIONS:
        right = f"an interaction entry needs 1 to {MAX_REGIONS} [[region]] tables, together exactly the failing cells"
        raise fail(where, "region", regions, right)
    changes = data.get("change", [])
    if len(changes) > MAX_REGIONS:
        raise fail(where, "change", len(changes), f"at most {MAX_REGIONS} [[change]] tables")
    interaction = Interaction(
        partner=partner,
        partner_releases=axes[partner],
        regions=tuple(_region(t, axes, where, n) for n, t in enumerate(regions)),
        changes=tuple(_edge_change(t, axes, where, n) for n, t in enumerate(changes)),
        cells=_cells(data.get("cells", {}), axes, where),
    )
    _check_changes_distinct(interaction, where)
    _check_cells(interaction, rows, where)
    return interaction


def _check_changes_distinct(interaction: Interaction, where: str) -> None:
    seen: set[tuple[str, str, str]] = set()
    for n, edge in enumerate(interaction.changes):
        step = (edge.package, edge.before, edge.at)
        if step in seen:
            raise fail(where, f"change[{n}]", f"{edge.before} → {edge.after} at {edge.at}", "names a step twice")
        seen.add(step)


def _name(cell: tuple[str, str]) -> str:
    return CELL_SEPARATOR.join(cell)


def _check_cells(interaction: Interaction, rows: tuple[str, ...], where: str) -> None:
    """Measured cells (all or none: none is an entry not measured yet): the failing ones exactly the regions'
    union, and each change's two cells passing and failing as its effect says."""
    cells = interaction.cells
    if not cells:
        return
    grid = [(r, c) for r in rows for c in interaction.partner_releases]
    missing = [_name(cell) for cell in grid if cell not in cells]
    if missing:
        shown = ", ".join(missing[:6]) + (f" and {len(missing) - 6} more" if len(missing) > 6 else "")
        right = f"{len(cells)} of {len(grid)} cells measured; measure the rest: python tools/corpus_truth.py FOLDER"
        raise fail(where, "cells", shown, right)
    stated = {
        (r, c)
        for i, r in enumerate(rows)
        for j, c in enumerate(interaction.partner_releases)
        if any(region.holds(i, j) for region in interaction.regions)
    }
    failing = {cell for cell in grid if cells[cell].exit != 0}
    if failing != stated:
        wrong = sorted(failing ^ stated, key=grid.index)
        said = [f"{_name(c)} {'fails' if c in failing else 'passes'}" for c in wrong[:6]]
        right = f"the cells say {', '.join(said)}; the regions' rules together must cover exactly the failing cells"
        raise fail(where, "region", interaction.rules(), right)
    for n, edge in enumerate(interaction.changes):
        for release, fails in ((edge.passing, False), (edge.failing, True)):
            cell = (release, edge.at) if edge.package != interaction.partner else (edge.at, release)
            if (cells[cell].exit != 0) != fails:
                ran = f"exit {cells[cell].exit}"
                right = f"{edge.effect!r} says {_name(cell)} {'fails' if fails else 'passes'}; its run says {ran}"
                raise fail(where, f"change[{n}].effect", edge.effect, right)
