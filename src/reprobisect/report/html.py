"""The report as one self-contained HTML page: it must open from a mail attachment or a CI artifact.

No network and no CDN: the CSS and the small sorting script (``static/``) are inlined, plots are ``data:``
URIs, and each run's traceback and the tail of its log sit in a ``<details>`` element one click from the
matrix. The page is laid out by Jinja2 templates (``templates/``) with autoescaping on: every piece of text
from a record or a log is escaped, because logs are written by code under test. Only the package's own CSS
and JS are inlined unescaped. This module shapes the views into rows; it reads no record or log (the logs
come in ``ReportData.logs``, read by ``report.logs`` before rendering).
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import math
from collections.abc import Iterable, Mapping
from importlib import resources
from typing import Any

import jinja2
import pandas as pd
from markupsafe import Markup

from reprobisect.model.bisect_report import SeenState
from reprobisect.model.outcome import Outcome
from reprobisect.model.verdict import SEVERITY
from reprobisect.report.frame import Bisect
from reprobisect.report.grid_view import grid_section
from reprobisect.report.logs import LOG_TAIL_LINES, LogExcerpt
from reprobisect.report.markdown import LEGEND, environment_line, transition_lines
from reprobisect.report.timing_view import HEADER, table_rows, timing_plot, timing_search
from reprobisect.report.verdicts import KEY, verdicts
from reprobisect.report.views import (
    OUTCOME_COLOURS,
    WARM_UP_NOTE,
    ReportData,
    cell_labels,
    env_errors,
    fix_order,
    reproduce_command,
    sorted_cells,
    step_stats,
    sweep_tables,
    training_note,
    varying_axes,
)
from reprobisect.util.neutral import html_text

__all__ = ["report_html"]

_NOT_READ = LogExcerpt(tail="(log not read for this report)", lines=0, traceback="")
_NAV = {
    "comparison": "comparison",
    "transitions": "transitions",
    "grids": "two packages",
    "sweeps": "verdict changes",
    "env-errors": "ENV_ERROR",
    "skipped": "skipped files",
    "plots": "plots",
    "steps": "step times",
    "runs": "runs",
    "details": "tracebacks and logs",
}


@dataclasses.dataclass(frozen=True)
class TableCell:
    """A plain table cell as shown: its text (``–`` when blank) and, if it should not sort by its text, a key."""

    text: str
    sort: str | None = None


def _blank(value: object) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def _s(value: object) -> str:
    """Text for the template: blanks (None, NaN, NA) as nothing, never as ``None`` or ``<NA>``."""
    return "" if _blank(value) else str(value)


def _cell(value: object, *, sort: object = None) -> TableCell:
    text = f"{value:.1f}" if isinstance(value, float) and not _blank(value) else value
    return TableCell("–" if _blank(text) else str(text), None if sort is None else _s(sort))


def _cells(row: Mapping[str, Any], *columns: str, **renamed: str) -> dict[str, TableCell]:
    """``{name: TableCell}`` from a frame row: ``columns`` keep the frame's names, ``renamed`` maps template → frame."""
    return {name: _cell(row[column]) for name, column in {**{c: c for c in columns}, **renamed}.items()}


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    return [{str(k): v for k, v in r.items()} for r in frame.to_dict("records")]


def _signatures(part: pd.DataFrame) -> list[dict[str, str]]:
    sigs = part[part["signature_id"] != ""].drop_duplicates("signature_id")
    keys = {"outcome": "outcome", "id": "signature_id", "text": "signature", "known": "known_signature"}
    return [{name: _s(r[col]) for name, col in keys.items()} | {"upstream": _s(r["upstream"])} for r in _records(sigs)]


def _matrix(frame: pd.DataFrame, repro: str, form: str) -> dict[str, Any]:
    """One repro and form: cells (release order) × fixes, each a folded verdict or None where nothing ran."""
    part = frame[(frame["repro"] == repro) & (frame["form"] == form)]
    folded, labels = verdicts(part), cell_labels(frame)
    fixes = fix_order(part["fix"])
    rows = [
        {
            "cell": str(cell),
            "label": labels[cell],
            "verdicts": [folded.get((repro, cell, form, f)) for f in fixes],
            # "it ran" and "it trained" must not look alike: the repro's own training check, where it has one
            "notes": [training_note(part[(part["cell"] == cell) & (part["fix"] == f)]) for f in fixes],
        }
        for cell in sorted_cells(part)
    ]
    return {
        "repro": repro,
        "form": form,
        "precision": ", ".join(sorted(set(part["precision"]))),
        "head": [" · ".join(varying_axes(frame)) or "cell", *fixes],
        "rows": rows,
        "signatures": _signatures(part),
    }


def _matrices(frame: pd.DataFrame) -> list[dict[str, Any]]:
    return [_matrix(frame, str(repro), str(form)) for (repro, form), _ in frame.groupby(["repro", "form"], sort=True)]


def _comparison(data: ReportData) -> dict[str, Any] | None:
    comp = data.comparison
    if comp is None:
        return None
    labels = cell_labels(data.frame)
    changes = [
        {
            "row_class": f"ch-{_s(r['kind'])}",
            "cell": _cell(labels.get(r["cell"], r["cell"])),
            **_cells(r, "kind", "form", "fix", "baseline", "current", "detail"),
        }
        for r in _records(comp.changes)
    ]
    timing_columns = ("form", "fix", "baseline_ms", "current_ms", "step_noise_ms", "repeat_noise_ms", "band_ms")
    timings = [
        {
            "row_class": "regression" if r["regression"] else "",
            "cell": _cell(labels.get(r["cell"], r["cell"])),
            "ratio": _cell(round(r["ratio"], 3)),
            "regression": _cell("yes" if r["regression"] else "no"),
            **_cells(r, *timing_columns),
        }
        for r in _records(comp.timings)
    ]
    overall = comp.overall_ratio
    moved = overall is not None and not 1 / comp.threshold <= overall <= comp.threshold
    return {
        "baseline": _s(data.baseline),
        "flagged": ", ".join(f"{n} {k}" for k, n in comp.counts().items() if n) or "nothing",
        "threshold": f"{comp.threshold:.2f}",
        "k": f"{comp.k:g}",
        "only_baseline": len(comp.only_baseline),
        "only_current": len(comp.only_current),
        "moved": f"{overall:.2f}" if moved and overall is not None else None,
        "changes": changes,
        "timings": timings,
    }


def _side(side: SeenState) -> dict[str, Any]:
    """One end of a transition: a coloured chip (outcome, glyph, signature)."""
    return {
        "outcome": side.outcome,
        "glyph": Outcome(side.outcome).glyph + " " if side.outcome in Outcome.__members__ else "",
        "signature": _s(side.signature or ""),
        "signature_id": _s(side.signature_id or ""),
    }


def _bisect(bisect: Bisect) -> dict[str, Any]:
    """A bisect's range and each transition as ``last → first: from → to``."""
    head, *_ = transition_lines(bisect)
    transitions = [
        {"last": _s(t.last), "first": _s(t.first), "from": _side(t.before), "to": _side(t.after)}
        for t in bisect.report.transitions
    ]
    summary = head.removeprefix("- ").replace("**", "").replace("`", "")
    return {"summary": summary, "transitions": transitions, "timing": _timing(bisect)}


def _timing(bisect: Bisect) -> dict[str, Any] | None:
    """A timing search's table, plot and fairness, or None for a search on outcomes."""
    search = timing_search(bisect.report)
    if search is None:
        return None
    return {
        "rule": f"{search.metric}: slower = more than {search.threshold_percent:g} % above the good end with 95 % "
        f"confidence; {search.min_repeats} to {search.max_repeats} runs a version",
        "head": list(HEADER),
        "rows": [[_cell(text) for text in row] for row in table_rows(search)],
        "plot": timing_plot(search),
        "unlike": list(search.unlike),
        "busy": search.busy,
    }


def _sweeps(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """Where each unit's verdict changes between neighbouring releases (``sweep_tables``), in plain text (the
    Markdown's code marks dropped)."""
    columns = ("repro", "form", "fix", "held", "from", "to", "before", "after")
    return [
        {"axis": axis, "rows": [{k: _cell(str(r[k]).replace("`", "")) for k in columns} for r in _records(table)]}
        for axis, table in sweep_tables(frame)
    ]


def _env_errors(frame: pd.DataFrame) -> list[dict[str, str]]:
    return [
        {
            "cell": _s(r["cell"]),
            "form": _s(r["form"]),
            "fix": _s(r["fix"]),
            "why": _s(r["known_signature"] or r["signature"]),
        }
        for r in _records(env_errors(frame))
    ]


def _plots(plots: Mapping[str, bytes]) -> list[dict[str, str]]:
    return [
        {"name": name, "uri": f"data:image/png;base64,{base64.b64encode(png).decode()}"} for name, png in plots.items()
    ]


def _steps(frame: pd.DataFrame) -> list[dict[str, TableCell]]:
    stats = step_stats(frame)
    labels = cell_labels(frame)
    columns = (
        "form",
        "fix",
        "runs",
        "steps",
        "median_ms",
        "p10_ms",
        "p90_ms",
        "runs_cv_pct",
        "first_step_ms",
        "peak_mem_mib",
    )
    return [
        {"cell": _cell(labels[r["cell"]], sort=r["cell"]), **_cells(r, *columns)}
        for r in _records(stats[stats["steps"] > 0])
    ]


_RUN_COLUMNS = {
    "run": "run_id",
    "form": "form",
    "fix": "fix",
    "repeat": "repeat",
    "signature": "signature_id",
    "failing_step": "failing_step",
    "median_ms": "median_step_ms",
    "p90_ms": "p90_step_ms",
    "first_step_ms": "first_step_ms",
    "peak_mib": "peak_mem_mib",
    "wall_s": "wall_s",
}


def _runs(runs: Iterable[dict[str, Any]], labels: Mapping[str, str]) -> list[dict[str, Any]]:
    return [
        {
            "id": _s(r["run_id"]),
            "outcome": _s(r["outcome"]),
            "glyph": _s(r["glyph"]),
            "severity": SEVERITY[r["outcome"]],
            "cell": _cell(labels[r["cell"]], sort=r["cell"]),
            **_cells(r, **_RUN_COLUMNS),
        }
        for r in runs
    ]


def _details(runs: Iterable[dict[str, Any]], logs: Mapping[str, LogExcerpt]) -> list[dict[str, Any]]:
    """Each run's summary, command, record and the end of its log, as ``report.logs`` read it."""
    shown = ("run_id", "outcome", "glyph", "cell", "form", "fix", "repeat", "signature_id", "record_file", "log_file")
    details = []
    for r in runs:
        log = logs.get(str(r["run_id"]), _NOT_READ)
        details.append(
            {c: _s(r[c]) for c in shown}
            | {
                "command": reproduce_command(r["repro"], r, r["form"], r["fix"]),
                "signature": _s(r["signature"] or "none"),
                "traceback": log.traceback or "(no Python traceback in the log)",
                "tail": log.tail,
                "lines": log.lines,
                "shown": min(log.lines, LOG_TAIL_LINES),
            }
        )
    return details


def _page(data: ReportData) -> dict[str, Any]:
    """Everything the template lays out, for a frame with runs."""
    frame = data.frame
    runs = _records(frame.sort_values([*KEY, "repeat"]))
    sections = {
        "matrices": _matrices(frame),
        "sweeps": _sweeps(frame),
        "comparison": _comparison(data),
        "plots": _plots(data.plots),
        "steps": _steps(frame),
        "runs": _runs(runs, cell_labels(frame)),
        "details": _details(runs, data.logs),
    }
    return sections | {
        "environment": environment_line(frame),
        "cells": frame["cell"].nunique(),
        "sources": ", ".join(str(s) for s in data.sources),
    }


def _nav(context: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Links to the sections this page has (a report without a baseline has no comparison)."""
    present = {
        "comparison": context["comparison"] is not None,
        "transitions": bool(context["bisects"]),
        "grids": bool(context["grids"]),
        "sweeps": bool(context["sweeps"]),
        "env-errors": bool(context["env_errors"]),
        "skipped": bool(context["skipped"]),
        "plots": bool(context["plots"]),
        "steps": bool(context["steps"]),
        "runs": True,
        "details": True,
    }
    return [(anchor, name) for anchor, name in _NAV.items() if present[anchor]]


@functools.cache
def _environment() -> jinja2.Environment:
    """Autoescaping on, and an undefined name is an error rather than an empty string."""
    return jinja2.Environment(
        loader=jinja2.PackageLoader("reprobisect.report", "templates"),
        autoescape=True,
        finalize=_shown,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )


def _shown(value: object) -> object:
    """Every value a template prints: text from records and logs with its control characters shown, not passed
    (``util.neutral.html_text``); the package's own CSS and JS (``Markup``) as they are."""
    return html_text(value) if isinstance(value, str) and not isinstance(value, Markup) else value


@functools.cache
def _static(name: str) -> Markup:
    """The package's own CSS or JS, inlined as is: trusted text written with this code, never data."""
    text = (resources.files("reprobisect.report") / "static" / name).read_text(encoding="utf-8")
    return Markup(text)  # noqa: S704 -- a file of this package, not text from a record or a log


def report_html(data: ReportData, *, title: str | None = None) -> str:
    """The whole page; opens offline, sorts on a click, and opens a run's details from its link.

    It renders ``data`` alone: the logs it shows are ``data.logs`` (``report.write.write_report`` fills them).
    """
    frame = data.frame
    title = title or f"reprobisect report: {', '.join(sorted(set(frame['repro']))) or 'no runs'}"
    context: dict[str, Any] = {
        "title": title,
        "css": _static("report.css"),
        "js": _static("report.js"),
        "colours": list(OUTCOME_COLOURS.items()),
        "legend": LEGEND,
        "warm_up_note": WARM_UP_NOTE,
        "severity": SEVERITY,
        "bisects": [_bisect(b) for b in data.bisects],
        "grids": [grid_section(g.report) for g in data.grids],
        "sweeps": [],
        "env_errors": _env_errors(frame),
        "skipped": [str(s) for s in data.skipped],
        "runs": [],
    }
    if not frame.empty:
        context |= _page(data)
        context["nav"] = _nav(context)
    return _environment().get_template("report.html.j2").render(context)
