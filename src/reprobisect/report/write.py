"""Every report file of a ReportData written into one folder: the ``report`` command and the nightly share it."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pandas as pd

from reprobisect.report.frame import write_csv, write_frame
from reprobisect.report.html import report_html
from reprobisect.report.logs import log_excerpts
from reprobisect.report.markdown import GITHUB_LIMIT, report_markdowns
from reprobisect.report.plots import outcome_band, step_time_plot
from reprobisect.report.views import ReportData, varying_axes
from reprobisect.util.files import write_atomic

__all__ = ["plots_for", "write_report"]


def plots_for(frame: pd.DataFrame) -> dict[str, bytes]:
    """Step time and outcome band along each axis that varies (the first axis when none does)."""
    axes = varying_axes(frame) or [a for a in ("deepspeed", "lightning", "torch") if (frame[a] != "").any()][:1]
    plots: dict[str, bytes] = {}
    for axis in axes:
        steps = step_time_plot(frame, axis)
        if steps is not None:
            plots[f"steps-{axis}.png"] = steps
        plots[f"outcomes-{axis}.png"] = outcome_band(frame, axis)
    return plots


def write_report(data: ReportData, dest: Path, *, markdown_limit: int = GITHUB_LIMIT) -> list[Path]:
    """Every report file of ``data`` into ``dest``: runs.parquet/csv, plots, report.md/html, changes/timings.

    The runs' logs are read here, before rendering (unless ``data`` brings its own excerpts), so that the
    renderers only lay out what ``data`` holds. report.md fits an issue (``markdown_limit`` characters); where that
    left sections out (a map of hundreds of runs: first releases, step times), report-full.md has them all, for a
    repository or a reader without a browser.
    """
    if not data.logs:
        data = dataclasses.replace(data, logs=log_excerpts(data.frame))
    written = write_frame(data.frame, dest)
    for name, png in data.plots.items():
        write_atomic(dest / name, png, what="a plot")
        written.append(dest / name)
    markdown, page = dest / "report.md", dest / "report.html"
    short, full = report_markdowns(data, limit=markdown_limit)
    write_atomic(markdown, short, what="the Markdown report")
    write_atomic(page, report_html(data), what="the HTML report")
    written += [markdown, page]
    if full is not None:
        write_atomic(dest / "report-full.md", full, what="the whole Markdown report")
        written.append(dest / "report-full.md")
    else:  # an earlier report's, which would now tell another story than report.md
        (dest / "report-full.md").unlink(missing_ok=True)
    if data.comparison is not None:
        for name, table in (("changes.csv", data.comparison.changes), ("timings.csv", data.comparison.timings)):
            written.append(write_csv(table, dest / name, what="the comparison"))
    return written
