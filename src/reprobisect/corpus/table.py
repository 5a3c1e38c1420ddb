"""The accuracy table: one row per entry run, the entries not run with why, and "k of n exact".

Written as Markdown (``corpus.md``, for people and issues) and JSON (``corpus.json``, for the nightly and for
comparing two runs). A wrong column is shown as wrong, with the truth beside what the harness said; an entry not
run is listed, never dropped; an entry whose triage crashed is a wrong row saying so. The header says which code
made the table (its commit, ``+dirty`` when changed), when, the whole run's wall time and where it went (cells
made, op builds, commit wheels built, runs: each entry's tally, ``util/tally.py``).

The verdict columns are the row's own (every :class:`ColumnVerdict` field of ``Row``, in ``TITLES``' order and
then in the row's): a column the scoring adds shows here and in the JSON without a change to this module.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from reprobisect.corpus.scoring import ColumnVerdict, Row
from reprobisect.util.files import write_atomic
from reprobisect.util.neutral import md_document, md_safe
from reprobisect.util.tally import KINDS, PROBES, RUNS, Spent

__all__ = [
    "TITLES",
    "Header",
    "NotRun",
    "Ran",
    "Table",
    "markdown",
    "runs_text",
    "title",
    "verdict_columns",
    "where_text",
    "write_table",
]

# the heading of each known column; another ColumnVerdict field of Row is headed by its name
TITLES = {
    "ranges": "ranges exact?",
    "rule": "rule exact?",
    "introduced": "introducing PR right?",
    "fixed": "fixing PR right?",
    "changed": "signature changes' PRs right?",
    "edges": "edges' PRs right?",
    "signature": "signature as recorded?",
}


def verdict_columns(row: Row) -> list[tuple[str, ColumnVerdict]]:
    """The row's verdicts by field name: the known columns in ``TITLES``' order, any other after them."""
    named = [(f.name, getattr(row, f.name)) for f in dataclasses.fields(row)]
    verdicts = [(name, value) for name, value in named if isinstance(value, ColumnVerdict)]
    order = {name: i for i, name in enumerate(TITLES)}
    return sorted(verdicts, key=lambda pair: order.get(pair[0], len(order)))


def title(name: str) -> str:
    """A column's heading."""
    return TITLES.get(name, name.replace("_", " ") + "?")


@dataclasses.dataclass(frozen=True, kw_only=True)
class NotRun:
    """An entry this machine or this call did not run, and why (a GPU entry on a CPU, truth not measured)."""

    entry: str
    why: str


@dataclasses.dataclass(frozen=True, kw_only=True)
class Ran:
    """An entry that ran: its scored row, where its time went (its process's tally) and, when its triage crashed,
    the error (the row is then wrong in every column)."""

    row: Row
    spent: Mapping[str, Spent] = dataclasses.field(default_factory=dict)
    crashed: str | None = None

    @property
    def exact(self) -> bool:
        """The row exact, and not crashed."""
        return self.crashed is None and self.row.exact

    def to_dict(self) -> dict[str, Any]:
        """The row's JSON, with its runs, where its time went and the crash, if any."""
        return {**self.row.to_dict(), "exact": self.exact, "where": _where_dict(self.spent), "crashed": self.crashed}


@dataclasses.dataclass(frozen=True, kw_only=True)
class Header:
    """What made the table: the code, when, on which backend, how many entries at a time, the whole wall time."""

    commit: str
    date: str
    backend: str
    entry_jobs: int
    wall_seconds: float


@dataclasses.dataclass(frozen=True, kw_only=True)
class Table:
    """Every row, every entry not run, the command that made it and its header."""

    rows: Sequence[Ran]
    not_run: Sequence[NotRun]
    command: str
    header: Header

    @property
    def exact(self) -> int:
        """How many rows are exact."""
        return sum(ran.exact for ran in self.rows)

    @property
    def headline(self) -> str:
        """'k of n exact', n being the entries that ran."""
        skipped = f" ({len(self.not_run)} not run)" if self.not_run else ""
        return f"{self.exact} of {len(self.rows)} exact{skipped}"

    @property
    def spent(self) -> dict[str, Spent]:
        """Where the entries' time went, summed over them."""
        return {kind: _sum([ran.spent.get(kind, Spent()) for ran in self.rows]) for kind in _kinds(self.rows)}

    def to_dict(self) -> dict[str, Any]:
        """The JSON document: schema, header, headline, rows, not-run entries."""
        return {
            "schema": 2,
            "command": self.command,
            **dataclasses.asdict(self.header),
            "exact": self.exact,
            "ran": len(self.rows),
            "headline": self.headline,
            "where": _where_dict(self.spent),
            "rows": [ran.to_dict() for ran in self.rows],
            "not_run": [dataclasses.asdict(n) for n in self.not_run],
        }


def _kinds(rows: Sequence[Ran]) -> list[str]:
    seen = {kind for ran in rows for kind in ran.spent}
    return [*[k for k in KINDS if k in seen], *sorted(seen - set(KINDS))]


def _sum(parts: Sequence[Spent]) -> Spent:
    return Spent(sum(p.count for p in parts), sum(p.seconds for p in parts))


def _where_dict(spent: Mapping[str, Spent]) -> dict[str, dict[str, float]]:
    return {kind: {"count": s.count, "seconds": round(s.seconds, 1)} for kind, s in spent.items()}


def where_text(spent: Mapping[str, Spent]) -> str:
    """``cells made 3 in 12 s · runs 40 in 300 s``; ``nothing counted`` when empty."""
    parts = [f"{kind} {s.count} in {s.seconds:.0f} s" for kind, s in spent.items() if s.count]
    return " · ".join(parts) or "nothing counted"


def _mark(verdict: ColumnVerdict) -> str:
    if verdict.ok is None:
        return "n/a"
    return "yes" if verdict.ok else f"**NO**: truth {md_safe(verdict.truth)}, found {md_safe(verdict.found)}"


def runs_text(ran: Ran) -> str:
    """``cells run / probes``: the runs of release cells and of a culprit search's commits; an interaction entry's
    grid cells run of its size beside them (``6 of 9 cells``)."""
    runs = f"{ran.spent.get(RUNS, Spent()).count} / {ran.spent.get(PROBES, Spent()).count}"
    return f"{runs} ({md_safe(ran.row.cells)} cells)" if ran.row.cells else runs


def _header_lines(table: Table) -> list[str]:
    head = table.header
    at_a_time = f"{head.entry_jobs} entries at a time" if head.entry_jobs > 1 else "one entry at a time"
    return [
        f"## Corpus accuracy: {table.headline}",
        "",
        f"- code: `{md_safe(head.commit)}` · {md_safe(head.date)} · backend {md_safe(head.backend)} · {at_a_time}",
        f"- wall time: {head.wall_seconds:.0f} s; where it went (summed over entries; work done side by side counts "
        f"each time): {where_text(table.spent)}",
        f"- command: `{md_safe(table.command)}`",
        "",
    ]


def markdown(table: Table) -> str:
    """The table as a Markdown section."""
    names = [name for name, _ in verdict_columns(table.rows[0].row)] if table.rows else list(TITLES)
    heads = ["entry", *(title(name) for name in names), "seconds", "runs (cells / probes)", "exact"]
    lines = [*_header_lines(table), "| " + " | ".join(heads) + " |"]
    lines.append("| --- | " + "--- | " * len(names) + "---: | ---: | --- |")
    for ran in table.rows:
        marks = dict(verdict_columns(ran.row))
        entry = md_safe(ran.row.entry) + (" (crashed)" if ran.crashed else "")
        cells = [entry, *(_mark(marks[name]) if name in marks else "n/a" for name in names)]
        cells += [f"{ran.row.seconds:.0f}", runs_text(ran), "yes" if ran.exact else "**NO**"]
        lines.append("| " + " | ".join(cells) + " |")
    if table.not_run:
        lines += ["", "Not run:", *(f"- {md_safe(n.entry)}: {md_safe(n.why)}" for n in table.not_run)]
    crashed = [ran for ran in table.rows if ran.crashed]
    if crashed:
        lines += ["", "Crashed (the triage raised; the entry's log says where):"]
        lines += [f"- {md_safe(ran.row.entry)}: {md_safe(ran.crashed or '')}" for ran in crashed]
    exact = [ran.row for ran in table.rows if ran.exact]
    if exact:
        lines += ["", "Exact rows, what was compared:"]
        lines += [_compared(r) for r in exact]
    return md_document("\n".join([*lines, ""]))


def _compared(row: Row) -> str:
    """What an exact row was compared on, in one line."""
    if row.rule.ok is not None:  # an interaction entry: its rules, cell by cell
        edges = f"; edges: {md_safe(row.edges.truth)}" if row.edges.ok else ""
        return f"- {md_safe(row.entry)}: {md_safe(row.rule.truth)} ({md_safe(row.cells)} cells run){edges}"
    changed = f"; changed: {md_safe(row.changed.truth)}" if row.changed.ok else ""
    return (
        f"- {md_safe(row.entry)}: {md_safe(row.ranges.truth)}; {md_safe(row.introduced.truth)} → "
        f"{md_safe(row.fixed.truth)}{changed}"
    )


def write_table(table: Table, out: Path) -> tuple[Path, Path]:
    """Write ``corpus.md`` and ``corpus.json`` under ``out``; return their paths."""
    out.mkdir(parents=True, exist_ok=True)
    md, js = out / "corpus.md", out / "corpus.json"
    write_atomic(md, markdown(table), what="the corpus table")
    write_atomic(js, json.dumps(table.to_dict(), indent=2) + "\n", what="the corpus table")
    return md, js
