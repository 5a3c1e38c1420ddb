"""The accuracy table: one row per entry run, the entries not run with why, and "k of n exact".

Written as Markdown (``corpus.md``, for people and issues) and JSON (``corpus.json``, for the nightly and for
comparing two runs). A wrong column is shown as wrong, with the truth beside what the harness said; an entry not
run is listed, never dropped.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from reprobisect.corpus.scoring import ColumnVerdict, Row
from reprobisect.util.files import write_atomic
from reprobisect.util.neutral import md_document, md_safe

__all__ = ["NotRun", "Table", "write_table"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class NotRun:
    """An entry this machine or this call did not run, and why (a GPU entry on a CPU, truth not measured)."""

    entry: str
    why: str


@dataclasses.dataclass(frozen=True, kw_only=True)
class Table:
    """Every row, every entry not run, and the command that made it."""

    rows: Sequence[Row]
    not_run: Sequence[NotRun]
    command: str

    @property
    def exact(self) -> int:
        """How many rows are exact."""
        return sum(row.exact for row in self.rows)

    @property
    def headline(self) -> str:
        """'k of n exact', n being the entries that ran."""
        skipped = f" ({len(self.not_run)} not run)" if self.not_run else ""
        return f"{self.exact} of {len(self.rows)} exact{skipped}"

    def to_dict(self) -> dict[str, Any]:
        """The JSON document: schema, headline, rows, not-run entries."""
        return {
            "schema": 1,
            "command": self.command,
            "exact": self.exact,
            "ran": len(self.rows),
            "headline": self.headline,
            "rows": [row.to_dict() for row in self.rows],
            "not_run": [dataclasses.asdict(n) for n in self.not_run],
        }


def _mark(verdict: ColumnVerdict) -> str:
    if verdict.ok is None:
        return "n/a"
    return "yes" if verdict.ok else f"**NO**: truth {md_safe(verdict.truth)}, found {md_safe(verdict.found)}"


def markdown(table: Table) -> str:
    """The table as a Markdown section."""
    lines = [
        f"## Corpus accuracy: {table.headline}",
        "",
        f"`{md_safe(table.command)}`",
        "",
        "| entry | ranges exact? | rule exact? | introducing PR right? | fixing PR right? "
        "| signature changes' PRs right? | edges' PRs right? | signature as recorded? | cells run | seconds | exact |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | ---: | ---: | --- |",
    ]
    for row in table.rows:
        cells = [md_safe(row.entry), *(_mark(v) for v in row.columns)]
        cells += [md_safe(row.cells) or "-", f"{row.seconds:.0f}", "yes" if row.exact else "**NO**"]
        lines.append("| " + " | ".join(cells) + " |")  # each cell md_safe: its pipes escaped once, not twice
    if table.not_run:
        lines += ["", "Not run:", *(f"- {md_safe(n.entry)}: {md_safe(n.why)}" for n in table.not_run)]
    details = [r for r in table.rows if r.exact]
    if details:
        lines += ["", "Exact rows, what was compared:"]
        lines += [_compared(r) for r in details]
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
