"""``corpus.html``: the accuracy table and its trend over the whole runs, one self-contained page beside corpus.md.

Why a page of its own beside ``corpus.md`` rather than a section of ``reprobisect report``: ``report`` reads the
records of one store, and the corpus table is made by ``reprobisect corpus`` from many entries' triages and its
history file; a maintainer who opens the weekly job's artefact (``reports/corpus``) finds the table and its trend
there, together. No JavaScript and no network: the chart is an inline SVG (``report/trend.py``); every text is
escaped (entry names, verdict texts and the history's labels come from files).
"""

from __future__ import annotations

import html
from pathlib import Path

from reprobisect.corpus.run_history import History
from reprobisect.corpus.scoring import ColumnVerdict
from reprobisect.corpus.table import Table, runs_text, title, verdict_columns, where_text
from reprobisect.report.trend import Series, trend_svg
from reprobisect.util.files import write_atomic
from reprobisect.util.neutral import html_text

__all__ = ["page_html", "trend", "write_page"]

_STYLE = (
    "body{font-family:sans-serif;max-width:80em;margin:1em auto;padding:0 1em}table{border-collapse:collapse}"
    "td,th{border:1px solid #ccc;padding:2px 6px;vertical-align:top;font-size:90%}.no{background:#fdd}"
    ".yes{background:#dfd}"
)


def _esc(text: str) -> str:
    return html.escape(html_text(text), quote=True)


def trend(history: History) -> str:
    """The history as two panels: share of entries exact (k of n) and wall time, one point per whole run."""
    points = history.points
    tips = [f"{p.date} {p.commit[:12]} {p.backend}: {p.k} of {p.n}" for p in points]
    exact = Series(
        title="entries exact (k of n)",
        top=1.0,
        values=[p.k / p.n if p.n else 0.0 for p in points],
        tips=tips,
        shown=lambda v: f"{100 * v:.0f} %",
    )
    wall = Series(
        title="wall time of the whole run",
        top=max((p.wall_seconds for p in points), default=0.0),
        values=[p.wall_seconds for p in points],
        tips=tips,
        shown=lambda v: f"{v / 60:.0f} min" if v >= 600 else f"{v:.0f} s",
    )
    return trend_svg([exact, wall], empty="no whole corpus run recorded yet")


def _mark(verdict: ColumnVerdict | None) -> str:
    if verdict is None or verdict.ok is None:
        return "n/a"
    return "yes" if verdict.ok else f'<b class="no">NO</b>: truth {_esc(verdict.truth)}, found {_esc(verdict.found)}'


def _rows(table: Table) -> list[str]:
    names = [name for name, _ in verdict_columns(table.rows[0].row)] if table.rows else []
    heads = ["entry", *(title(n) for n in names), "seconds", "runs (cells / probes)", "exact"]
    lines = ["<table>", "<tr>" + "".join(f"<th>{_esc(h)}</th>" for h in heads) + "</tr>"]
    for ran in table.rows:
        marks = dict(verdict_columns(ran.row))
        cells = [_esc(ran.row.entry + (" (crashed)" if ran.crashed else ""))]
        for name in names:
            cells.append(_mark(marks.get(name)))
        cells += [f"{ran.row.seconds:.0f}", _esc(runs_text(ran)), "yes" if ran.exact else '<b class="no">NO</b>']
        lines.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    return [*lines, "</table>"]


def page_html(table: Table, history: History) -> str:
    """The whole page."""
    head = table.header
    skipped = f"{history.skipped} line(s) of the history skipped: {history.why}" if history.why else ""
    body = [
        f"<h1>Corpus accuracy: {_esc(table.headline)}</h1>",
        f"<p>code <code>{_esc(head.commit)}</code> · {_esc(head.date)} · backend {_esc(head.backend)} · "
        f"wall time {head.wall_seconds:.0f} s · where it went: {_esc(where_text(table.spent))}</p>",
        f"<p><code>{_esc(table.command)}</code></p>",
        *_rows(table),
    ]
    if table.not_run:
        body += ["<p>Not run:</p><ul>", *(f"<li>{_esc(n.entry)}: {_esc(n.why)}</li>" for n in table.not_run), "</ul>"]
    body += [f"<h2>Trend over whole runs ({len(history.points)})</h2>", trend(history), f"<p>{_esc(skipped)}</p>"]
    return "\n".join(
        ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8"><title>Corpus accuracy</title>',
         f"<style>{_STYLE}</style></head><body>", *body, "</body></html>", ""]
    )  # fmt: skip


def write_page(table: Table, history: History, out: Path) -> Path:
    """Write ``corpus.html`` under ``out``; return its path."""
    path = out / "corpus.html"
    write_atomic(path, page_html(table, history), what="the corpus page")
    return path
