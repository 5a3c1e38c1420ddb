"""The views a maintainer reads, computed from the long frame (one row per run) of ``report.records_frame``.

Every view is a plain DataFrame so Markdown, HTML and tests share it. Repeats of one run (same repro,
cell, form and fix) are folded into one verdict by ``model.verdict``'s one rule.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd
from packaging.version import InvalidVersion, Version

from reprobisect.model.outcome import Outcome
from reprobisect.model.repro import repro_head
from reprobisect.report.frame import AXES, Bisect
from reprobisect.report.grid_files import GridFile
from reprobisect.report.spread import quantile
from reprobisect.report.verdicts import KEY, Key, verdicts
from reprobisect.util.neutral import command_line

if TYPE_CHECKING:
    from reprobisect.model.verdict import Verdict
    from reprobisect.report.compare import Comparison
    from reprobisect.report.logs import LogExcerpt

__all__ = [
    "OUTCOME_COLOURS",
    "WARM_UP_NOTE",
    "ReportData",
    "cell_labels",
    "env_errors",
    "first_releases",
    "fix_order",
    "outcome_matrix",
    "release_key",
    "reproduce_command",
    "sorted_cells",
    "step_stats",
    "sweep_tables",
    "sweep_transitions",
    "training_note",
    "varying_axes",
]


def release_key(version: str) -> tuple[int, Version | str]:
    """Sort key for releases: PEP 440 order, unparsable strings after every real version."""
    try:
        return (0, Version(version.strip("()")))
    except InvalidVersion:
        return (1, version)


def varying_axes(frame: pd.DataFrame) -> list[str]:
    """The axes with more than one release in the frame: the ones worth a row label or a plot."""
    return [axis for axis in AXES if frame[axis].nunique() > 1]


def sorted_cells(frame: pd.DataFrame) -> list[str]:
    """Cell ids ordered by torch, then deepspeed, then lightning release."""
    cells = frame.drop_duplicates("cell")
    order = sorted(
        zip(cells["cell"], *(cells[a] for a in AXES), strict=True),
        key=lambda row: tuple(release_key(v) for v in row[1:]),
    )
    return [row[0] for row in order]


def cell_labels(frame: pd.DataFrame) -> dict[str, str]:
    """Short row labels naming only what varies: ``0.17.0`` along one axis, ``torch 2.4.1 · deepspeed 0.17.0``
    along several, the full cell id when nothing varies."""
    axes = varying_axes(frame)
    labels: dict[str, str] = {}
    for values in frame.drop_duplicates("cell")[["cell", *AXES]].to_dict("records"):
        named = [str(values[axes[0]])] if len(axes) == 1 else [f"{a} {values[a]}" for a in axes]
        labels[str(values["cell"])] = " · ".join(named) or str(values["cell"])
    if len(set(labels.values())) < len(labels):  # cells that differ elsewhere (python, another package)
        return {cell: cell for cell in labels}
    return labels


def fix_order(fixes: Iterable[str]) -> list[str]:
    """``none`` (the unmodified repro) first, then the fixes alphabetically."""
    unique = sorted(set(fixes))
    return [f for f in unique if f == "none"] + [f for f in unique if f != "none"]


def training_note(runs: pd.DataFrame) -> str:
    """`` trains (claimed; D 5 %, G 2 %)`` where every run of a unit passed the repro's own training check
    (``--check-training``): "it ran" and "it trained" must not look alike in a table; the deviations from the ddp
    reference are the runs' medians. Empty without a verdict (a repro that does not check), or when any run lacks it.
    The verdict is what the run printed, never what the harness measured, so it is labelled a claim."""
    if "trains" not in runs or runs.empty or not (runs["trains"] == "yes").all():
        return ""
    parts = []
    for net in ("D", "G"):
        column = f"deviation_{net}"
        if column not in runs:
            continue
        values = pd.to_numeric(runs[column], errors="coerce").dropna()
        if len(values) == len(runs):
            parts.append(f"{net} {values.median():.0%}")
    return f" trains (claimed; {', '.join(parts)})" if parts else " trains (claimed)"


def outcome_matrix(frame: pd.DataFrame, repro: str, form: str) -> pd.DataFrame:
    """Cell × fix labels (glyph and signature id, and where the repro checks it, whether it trained) of one repro's
    form; cells in release order."""
    part = frame[(frame["repro"] == repro) & (frame["form"] == form)]
    folded = verdicts(part)
    labels = cell_labels(frame)
    rows = {
        labels[cell]: {
            fix: folded[(repro, cell, form, fix)].label
            + training_note(part[(part["cell"] == cell) & (part["fix"] == fix)])
            for fix in fix_order(part["fix"])
            if (repro, cell, form, fix) in folded
        }
        for cell in sorted_cells(part)
    }
    matrix = pd.DataFrame.from_dict(rows, orient="index", columns=fix_order(part["fix"])).fillna("")
    matrix.index.name = "cell"
    return matrix


def first_releases(frame: pd.DataFrame, axis: str) -> pd.DataFrame:
    """Along ``axis``, the first and last release showing each outcome, the other axes held fixed."""
    held = [a for a in AXES if a != axis]
    folded = verdicts(frame)
    rows: list[dict[str, Any]] = []
    for (repro, form, fix, *others), part in frame.groupby(["repro", "form", "fix", *held], sort=False):
        releases = sorted(set(part[axis]), key=release_key)
        cells = {rel: part.loc[part[axis] == rel, "cell"].iloc[0] for rel in releases}
        seen: dict[str, list[str]] = {}
        for rel in releases:
            verdict = folded[(str(repro), str(cells[rel]), str(form), str(fix))]
            seen.setdefault(verdict.outcome, []).append(rel)
        for outcome, rels in seen.items():
            rows.append(
                {
                    "repro": repro,
                    "form": form,
                    "fix": fix,
                    "held": ", ".join(f"{a} {v}" for a, v in zip(held, others, strict=True)),
                    "outcome": outcome,
                    "first": rels[0],
                    "last": rels[-1],
                    "releases": len(rels),
                    "of": len(releases),
                }
            )
    table = pd.DataFrame(rows, columns=["repro", "form", "fix", "held", "outcome", "first", "last", "releases", "of"])
    return _in_unit_order(table, "first")


def sweep_transitions(frame: pd.DataFrame, axis: str, folded: Mapping[Key, Verdict] | None = None) -> pd.DataFrame:
    """Along ``axis``, the other axes held fixed, every pair of neighbouring measured releases between which a unit's
    verdict changes: its outcome, its signature, or whether it trained. Where a matrix measured every release (a
    sweep, such as the GPU map of the GAN), these are the bisection's transitions — the first release of each new
    behaviour is ``to`` — without a probe more; where releases between the two were not measured, the change lies
    somewhere in ``(from, to]``. ``folded``: the frame's ``verdicts``, where the caller has them already."""
    held = [a for a in AXES if a != axis]
    folded = verdicts(frame) if folded is None else folded
    columns = ["repro", "form", "fix", "held", "from", "to", "before", "after"]
    rows: list[dict[str, Any]] = []
    for (repro, form, fix, *others), part in frame.groupby(["repro", "form", "fix", *held], sort=False):
        by_release = {str(rel): runs for rel, runs in part.groupby(axis, sort=False, dropna=False)}
        if len(by_release) < 2:  # one release: nothing to compare (most units along an axis that barely varies)
            continue
        releases = sorted(by_release, key=release_key)
        states = [_state(by_release[rel], folded, (str(repro), str(form), str(fix))) for rel in releases]
        rows += [
            {
                "repro": repro,
                "form": form,
                "fix": fix,
                "held": ", ".join(f"{a} {v}" for a, v in zip(held, others, strict=True)),
                "from": releases[i - 1],
                "to": releases[i],
                "before": states[i - 1],
                "after": states[i],
            }
            for i in range(1, len(releases))
            if states[i] != states[i - 1]
        ]
    table = pd.DataFrame(rows, columns=columns)
    return _in_unit_order(table, "to")


def sweep_tables(frame: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """``sweep_transitions`` along each axis that varies, where it found a change: what both reports show."""
    folded = verdicts(frame)
    tables = [(axis, sweep_transitions(frame, axis, folded)) for axis in varying_axes(frame)]
    return [(axis, table) for axis, table in tables if not table.empty]


def _state(runs: pd.DataFrame, folded: Mapping[Key, Verdict], unit: tuple[str, str, str]) -> str:
    """One release's verdict of a unit as a transition shows it: glyph, signature id and known name, training."""
    repro, form, fix = unit
    verdict = folded[(repro, str(runs["cell"].iloc[0]), form, fix)]
    known = sorted({str(k) for k in runs["known_signature"] if k})
    return verdict.label + (f" `{known[0]}`" if len(known) == 1 else "") + training_note(runs)


def _in_unit_order(table: pd.DataFrame, release: str) -> pd.DataFrame:
    """Rows by repro, form, held axes, fix (``none`` first) and then the release in column ``release``."""
    fixes = {fix: i for i, fix in enumerate(fix_order(table["fix"]))}
    order = sorted(
        range(len(table)),
        key=lambda i: (
            table["repro"].iloc[i],
            table["form"].iloc[i],
            table["held"].iloc[i],
            fixes[table["fix"].iloc[i]],
            release_key(table[release].iloc[i]),
        ),
    )
    return table.iloc[order].reset_index(drop=True)


WARM_UP_NOTE = "warm-up excluded: the first tenth of each run's steps, at least one"


def _pooled(lists: Iterable[Sequence[float]]) -> list[float]:
    return [t for times in lists for t in times]


def _runs_cv_pct(lists: Iterable[Sequence[float]]) -> float | None:
    """Coefficient of variation (%) of the runs' own median steps: how far repeats of one run agree."""
    medians = [statistics.median(times) for times in lists if len(times) > 0]
    if len(medians) < 2 or statistics.fmean(medians) == 0:
        return None
    return 100 * statistics.stdev(medians) / statistics.fmean(medians)


def step_stats(frame: pd.DataFrame) -> pd.DataFrame:
    """Per run key: pooled median, p10 and p90 of step times (warm-up excluded), how far the repeats' medians
    spread (CV %), first step, peak memory."""
    rows: list[dict[str, Any]] = []
    for (repro, cell, form, fix), part in frame.groupby(KEY, sort=False):
        steps = _pooled(part["step_ms"])
        first = [t for t in part["first_step_ms"] if pd.notna(t)]
        memory = [m for m in part["peak_mem_mib"] if pd.notna(m)]
        rows.append(
            {
                "repro": repro,
                "cell": cell,
                "form": form,
                "fix": fix,
                "runs": len(part),
                "steps": len(steps),
                "median_ms": statistics.median(steps) if steps else None,
                "p10_ms": quantile(steps, 1, 10),
                "p90_ms": quantile(steps, 9, 10),
                "runs_cv_pct": _runs_cv_pct(part["step_ms"]),
                "first_step_ms": statistics.median(first) if first else None,
                "peak_mem_mib": max(memory) if memory else None,
                "mem_kind": part["peak_mem_kind"].iloc[0],
            }
        )
    columns = [
        "repro",
        "cell",
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
        "mem_kind",
    ]
    return pd.DataFrame(rows, columns=columns)


def env_errors(frame: pd.DataFrame) -> pd.DataFrame:
    """ENV_ERROR runs with their reason: the known signature's name when there is one, else its text."""
    part = frame[frame["outcome"] == Outcome.ENV_ERROR.value]
    columns = ["repro", "cell", "form", "fix", "known_signature", "signature_id", "signature"]
    return part.drop_duplicates(["repro", "cell", "form", "fix"])[columns].reset_index(drop=True)


def reproduce_command(repro: str, cell: dict[str, Any] | pd.Series[Any], form: str, fix: str) -> str:
    """The command that re-runs exactly this cell, form and fix: the one its record keeps (a script's names the
    triage session, the script and its arguments), else the canonical repro's session with the cell's pins
    (``--torch`` only when torch is pinned), for records made before runs kept theirs."""
    kept = cell.get("rerun", "")
    if isinstance(kept, str) and kept:
        return kept
    args: list[str] = []
    if cell["torch_source"] != "system":
        args += ["--torch", str(cell["torch"])]
    for axis in AXES[1:]:
        if cell[axis]:
            args += [f"--{axis}", str(cell[axis])]
    args += ["--form", form, "--fix", fix]
    head = repro_head(repro)
    return command_line([*head, *args])


# Outcome colours shared by the HTML matrix and the plots: (strong, light background).
OUTCOME_COLOURS: dict[str, tuple[str, str]] = {
    Outcome.PASS.value: ("#2e7d32", "#dcf0dc"),
    Outcome.REPRODUCED.value: ("#c62828", "#fbdada"),
    Outcome.OTHER_FAILURE.value: ("#e65100", "#ffe6cc"),
    Outcome.TIMEOUT.value: ("#6a1b9a", "#ecdcf3"),
    Outcome.CRASH.value: ("#37474f", "#d5dbde"),
    Outcome.ENV_ERROR.value: ("#757575", "#eeeeee"),
}


@dataclasses.dataclass(frozen=True, kw_only=True)
class ReportData:
    """Everything one report shows; the Markdown and the HTML render the same data."""

    frame: pd.DataFrame
    sources: list[Path]
    bisects: list[Bisect] = dataclasses.field(default_factory=list)
    grids: list[GridFile] = dataclasses.field(default_factory=list)  # grid-*.json: a search of two packages
    comparison: Comparison | None = None
    baseline: Path | None = None
    skipped: list[str] = dataclasses.field(default_factory=list)
    plots: dict[str, bytes] = dataclasses.field(default_factory=dict)
    logs: Mapping[str, LogExcerpt] = dataclasses.field(default_factory=dict)  # run_id → its log's end (report.logs)
