"""``reprobisect report``: records → runs.parquet, runs.csv, report.md, report.html and PNG plots.

Reads every record under ``--out`` (and each ``--merge`` folder, e.g. one per machine), optionally
compares them with a ``--baseline`` folder, and exits non-zero when ``--fail-on`` names a change found.
Unreadable record files are skipped with a warning naming them; the report is still written.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

import pandas as pd

from reprobisect.commands.declared import Flag, add_fields, option, read_fields
from reprobisect.commands.options import DEBUG, OUT, Subparsers, number_option
from reprobisect.errors import FAIL_EXIT, ConfigError, NothingToDoError
from reprobisect.minimize.sections import sections_under
from reprobisect.report.compare import Comparison, compare
from reprobisect.report.frame import (
    SkippedFileWarning,
    latest_runs,
    load_bisects,
    load_records,
    records_frame,
)
from reprobisect.report.grid_files import load_grids
from reprobisect.report.markdown import report_markdown
from reprobisect.report.views import ReportData
from reprobisect.util.bounds import Bound
from reprobisect.util.files import write_atomic

__all__ = ["ReportOptions", "run_from_args", "setup_arguments"]

PROG = "reprobisect report"  # who speaks in its warnings and errors
_FAIL_KINDS = {"regression": "timing-regression", "new-failure": "new-failure"}


def setup_arguments(subparsers: Subparsers) -> None:
    """Add ``report`` and its options (``ReportOptions``; none of the cell-building ones: it only reads records)."""
    parser = subparsers.add_parser(
        "report",
        help="records -> runs.parquet/csv, report.md/html, plots; --baseline DIR",
        description="Records -> runs.parquet, runs.csv, report.md, report.html and PNG plots.",
    )
    add_fields(parser, ReportOptions)
    parser.set_defaults(run=run_from_args, error_prefix=PROG)


def _load(roots: Sequence[Path], *, latest: bool = False) -> tuple[pd.DataFrame, list[str], list[Path]]:
    """Records of ``roots`` as a long frame, plus the warnings of skipped files (also printed); ``latest``: the
    newest record of each run only (``latest_runs``)."""
    missing = [root for root in roots if not root.is_dir()]
    if missing:
        msg = f"{missing[0]}: no such records folder (expected {missing[0] / 'records'}/…/*.json)"
        raise ConfigError(msg)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", SkippedFileWarning)
        loaded = load_records(roots)
        if latest:
            loaded, superseded = latest_runs(loaded)
            print(f"{PROG}: --latest: {superseded} older record(s) of runs recorded again left out", file=sys.stderr)
        frame = records_frame(loaded)
    skipped = []
    for warning in caught:
        if issubclass(warning.category, SkippedFileWarning):
            skipped.append(str(warning.message))
            print(f"{PROG}: warning: {warning.message}", file=sys.stderr)
        else:
            warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)
    return frame, skipped, [root.resolve() for root in roots]


_File = TypeVar("_File")  # a bisect's or a grid's result file, as its loader reads it


def _bisects(roots: Sequence[Path], skipped: list[str], load: Callable[[Sequence[Path]], list[_File]]) -> list[_File]:
    """Bisect (or grid) result files of ``roots``; unreadable ones are added to ``skipped`` and printed."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", SkippedFileWarning)
        found = load(roots)
    for warning in caught:
        skipped.append(str(warning.message))
        print(f"{PROG}: warning: {warning.message}", file=sys.stderr)
    return found


def _summary(data: ReportData, written: Sequence[Path]) -> str:
    frame = data.frame
    counts = frame["outcome"].value_counts()
    lines = [
        f"{len(frame)} runs in {frame['cell'].nunique()} cell(s): "
        + ", ".join(f"{n} {outcome}" for outcome, n in counts.items())
    ]
    if data.skipped:
        lines.append(f"{len(data.skipped)} unreadable file(s) skipped (see the warnings above)")
    if data.comparison is not None:
        flagged = ", ".join(f"{n} {k}" for k, n in data.comparison.counts().items() if n) or "nothing"
        lines.append(f"Compared with {data.baseline}: {flagged}")
        lines += [
            f"  {r['kind']}: {r['cell']} {r['form']} {r['fix']}: {r['baseline']} → {r['current']} {r['detail']}"
            for r in data.comparison.changes.to_dict("records")
        ]
    lines.append("Wrote " + ", ".join(str(p) for p in written))
    return "\n".join(lines)


def _failed(comparison: Comparison | None, fail_on: Sequence[str]) -> list[str]:
    if comparison is None:
        return []
    counts = comparison.counts()
    return [name for name in fail_on if counts[_FAIL_KINDS[name]]]


MERGE = Flag.of("--merge", type=Path, nargs="+", default=[], metavar="DIR", read=tuple)
LATEST = Flag.of("--latest", action="store_true")
BASELINE = Flag.of("--baseline", type=Path)
THRESHOLD = Flag.of(
    "--threshold", type=number_option("--threshold", Bound(1, 100, whole=False, above=True)), default=1.10
)
NOISE_K = Flag.of("--noise-k", type=number_option("--noise-k", Bound(0, 1000, whole=False)), default=3.0)
FAIL_ON = Flag.of("--fail-on", action="append", choices=sorted(_FAIL_KINDS), default=[], read=tuple)
REPORT_DEST = Flag.of("--dest", type=Path)  # None: OUT/report
MARKDOWN = Flag.of("--markdown", action="store_true")


@dataclasses.dataclass(frozen=True, kw_only=True)
class ReportOptions:
    """``report``'s command line, read once: which records, compared with what, written where. Each option declared
    here once, as its field, in the order ``--help`` lists them (commands/declared.py)."""

    out: Path = option(OUT, help="records root (default: reports)")
    merge: tuple[Path, ...] = option(
        MERGE, help="more records roots (other machines) merged into one report; a run_id seen twice once"
    )
    latest: bool = option(
        LATEST,
        help="one record per run (repro, cell, form, fix, repeat): the one that finished last; older records of a "
        "run recorded again (another session, a fix changed since) are left out",
    )
    baseline: Path | None = option(BASELINE, help="records root to compare with")
    threshold: float = option(THRESHOLD, help="median step-time ratio above which a slow-down may count (default 1.10)")
    noise_k: float = option(NOISE_K, help="a slow-down must also exceed k × the measured noise (default 3)")
    fail_on: tuple[str, ...] = option(FAIL_ON, help="exit 1 when the baseline comparison finds this (repeatable)")
    dest: Path | None = option(REPORT_DEST, help="where the report files go (default: OUT/report)")
    markdown: bool = option(MARKDOWN, help="print the whole Markdown, not a summary")
    debug: bool = option(DEBUG, help="show tracebacks of harness errors")

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> ReportOptions:
        """The command line as parsed."""
        return read_fields(cls, args)


def run_from_args(args: argparse.Namespace) -> int:
    """Write the report; ``FAIL_EXIT`` when ``--fail-on`` names a change the comparison found, else 0."""
    # imported here: the writer draws the plots (matplotlib), which no other command's start needs
    from reprobisect.report.write import plots_for, write_report

    options = ReportOptions.from_args(args)
    if options.fail_on and options.baseline is None:
        msg = f"--fail-on {options.fail_on[0]} needs --baseline DIR to compare with"
        raise ConfigError(msg)
    roots = [options.out, *options.merge]
    frame, skipped, sources = _load(roots, latest=options.latest)
    if frame.empty:
        msg = f"no readable records under {', '.join(str(r / 'records') for r in roots)}"
        raise NothingToDoError(msg)
    bisects = _bisects(roots, skipped, load_bisects)
    grids = _bisects(roots, skipped, load_grids)
    comparison = None
    if options.baseline is not None:
        base_frame, base_skipped, _ = _load([options.baseline])
        skipped += base_skipped
        if base_frame.empty:  # comparing with nothing would pass every --fail-on silently
            msg = f"--baseline {options.baseline}: no readable records under {options.baseline / 'records'}"
            raise NothingToDoError(msg)
        comparison = compare(frame, base_frame, threshold=options.threshold, k=options.noise_k)
    data = ReportData(
        frame=frame,
        sources=sources,
        bisects=bisects,
        grids=grids,
        comparison=comparison,
        baseline=options.baseline.resolve() if options.baseline else None,
        skipped=skipped,
        plots=plots_for(frame),
    )
    dest = options.dest or options.out / "report"
    written = write_report(data, dest)
    sections = sections_under(roots)
    if sections:  # minimizations of scripts beside these records: a maintainer pastes them with the report
        markdown = dest / "report.md"
        write_atomic(markdown, markdown.read_text(encoding="utf-8") + "\n" + "\n".join(sections), what="the report")
    print(report_markdown(data) if options.markdown else _summary(data, written))
    failed = _failed(comparison, options.fail_on)
    if failed:
        print(f"{PROG}: failing on {', '.join(failed)}", file=sys.stderr)
        return FAIL_EXIT
    return 0
