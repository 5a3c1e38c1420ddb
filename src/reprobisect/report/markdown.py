"""The report as Markdown small enough to paste into a GitHub issue or comment.

Sections, in the order a maintainer asks the questions: where did it run, what happened in each cell,
where does it change (bisect transitions, first release with each outcome), how fast, what could not run,
what changed since the baseline, and the exact command that reproduces each cell.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Sequence

import pandas as pd

from reprobisect.model.bisect_report import SeenState
from reprobisect.model.outcome import Outcome
from reprobisect.report.frame import AXES, Bisect
from reprobisect.report.timing_view import timing_markdown
from reprobisect.report.verdicts import KEY
from reprobisect.report.views import (
    WARM_UP_NOTE,
    ReportData,
    cell_labels,
    env_errors,
    first_releases,
    fix_order,
    outcome_matrix,
    reproduce_command,
    sorted_cells,
    step_stats,
    sweep_tables,
    varying_axes,
)
from reprobisect.util.neutral import md_document, md_safe

__all__ = [
    "GITHUB_LIMIT",
    "LEGEND",
    "environment_line",
    "fit_limit",
    "report_markdown",
    "report_markdowns",
    "safe_data",
    "safe_frame",
    "transition_lines",
]

GITHUB_LIMIT = 60_000  # GitHub refuses issue bodies and comments over 65,536 characters
LEGEND = " · ".join(f"{o.glyph} {o.value}" for o in Outcome) + "; (k/n): k of n repeats agree"


def safe_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with every text value passed through :func:`md_safe` (keys stay consistent: all change alike)."""
    out = frame.copy()
    for column in out.columns:
        if pd.api.types.is_object_dtype(out[column]) or pd.api.types.is_string_dtype(out[column]):
            out[column] = [md_safe(v) if isinstance(v, str) else v for v in out[column]]
    return out


def safe_data(data: ReportData) -> ReportData:
    """The report's data with everything that came from runs or record files made safe for Markdown."""
    comparison = data.comparison
    if comparison is not None:
        comparison = dataclasses.replace(comparison, changes=safe_frame(comparison.changes))
    return dataclasses.replace(
        data, frame=safe_frame(data.frame), comparison=comparison, skipped=[md_safe(s) for s in data.skipped]
    )


def fit_limit(text: str, limit: int) -> str:
    """``text`` cut at a line end to at most ``limit`` characters, saying so: GitHub refuses longer bodies."""
    if len(text) <= limit:
        return text
    note = "\n\n_Cut here to fit GitHub's limit; report.html and report.md beside it have everything._\n"
    head = text[: max(0, limit - len(note))]
    return head[: head.rfind("\n") + 1 or len(head)] + note


def _table(frame: pd.DataFrame, *, index: bool = False) -> str:
    return frame.to_markdown(index=index, floatfmt=".1f", missingval="–")


def environment_line(frame: pd.DataFrame) -> str:
    """Python, platform, GPU (as the harness measured them), the pins every cell shares and when the runs happened,
    in one line."""
    first = frame.iloc[0]
    parts = [f"python {first['python']}", first["platform"] or "platform unknown"]
    gpus = sorted({g for g in frame["gpu"] if g})
    parts.append(f"GPU {', '.join(gpus)}" if gpus else "CPU only")
    for axis in AXES:
        values = sorted(set(frame[axis]) - {""})
        if len(values) == 1:
            source = " (system)" if axis == "torch" and first["torch_source"] == "system" else ""
            parts.append(f"{axis} {values[0]}{source}")
    parts.append(f"harness {first['harness_version']}")
    started = sorted(s for s in frame["started_at"] if s)
    if started:
        parts.append(f"runs {_when(started[0])} → {_when(started[-1])}")
    return " · ".join(parts) + _claims(frame)


def _claims(frame: pd.DataFrame) -> str:
    """What runs said of where they ran where the harness measured otherwise: shown as their claim, never as the
    environment (a run could forge its exit event)."""
    claims = sorted({c for c in frame.get("claimed", ()) if c})
    return f" (runs claimed otherwise: {'; '.join(claims)})" if claims else ""


def _when(stamp: str) -> str:
    """``2026-12-02T13:16:45+00:00`` → ``2026-12-02 13:16 UTC`` (the records are written in UTC)."""
    return stamp[:16].replace("T", " ") + (" UTC" if stamp.endswith("+00:00") else "")


def _signature_lines(frame: pd.DataFrame) -> list[str]:
    sigs = frame[frame["signature_id"] != ""].drop_duplicates("signature_id")
    lines = []
    for row in sigs.to_dict("records"):
        known = f" — known `{row['known_signature']}`" if row["known_signature"] else ""
        upstream = f" ({row['upstream']})" if row["upstream"] else ""
        lines.append(f"- `{row['signature_id']}` {Outcome(row['outcome']).glyph} {row['signature']}{known}{upstream}")
    return lines


def _matrix_sections(frame: pd.DataFrame) -> list[str]:
    out: list[str] = []
    for (repro, form), part in frame.groupby(["repro", "form"], sort=True):
        precision = ", ".join(sorted(set(part["precision"])))
        matrix = outcome_matrix(frame, str(repro), str(form))
        matrix.index.name = " · ".join(varying_axes(frame)) or "cell"
        out += [f"## {repro} · {form} ({precision})", "", _table(matrix, index=True), "", LEGEND, ""]
        sig_lines = _signature_lines(part)
        if sig_lines:
            out += ["Signatures:", "", *sig_lines, ""]
    return out


def _outcome_text(side: SeenState) -> str:
    glyph = Outcome(side.outcome).glyph + " " if side.outcome in Outcome.__members__ else ""
    sig = f" `{side.signature_id}`" if side.signature_id else ""
    return f"{glyph}{side.outcome}{sig}"


def transition_lines(bisect: Bisect) -> list[str]:
    """One line per transition of one bisect file, with its range, probes and skipped releases."""
    d = bisect.report
    fix = f", fix {d.fix}" if d.fix else ""
    head = (
        f"**{d.repro} · {d.form}** ({d.precision}{fix}) along **{d.axis}**, {d.good} … {d.bad}, {d.mode}: "
        f"{d.runs} runs over {d.releases_in_range} releases"
    )
    skipped = ", ".join(s.version for s in d.skipped)
    if skipped:
        head += f"; skipped {skipped}"
    lines = [f"- {head} (`{bisect.path.name}`)"]
    for t in d.transitions:
        between = ", ".join(t.skipped_between)
        lines.append(
            f"  - last `{t.last}` → first `{t.first}`: {_outcome_text(t.before)} → {_outcome_text(t.after)}"
            + (f" (untested between: {between})" if between else "")
        )
    if not d.transitions:
        lines.append("  - no transition: one outcome over the whole range")
    return lines


def _first_release_sections(frame: pd.DataFrame) -> list[str]:
    out: list[str] = []
    for axis in varying_axes(frame):
        table = first_releases(frame, axis)
        table = table.assign(outcome=[f"{Outcome(o).glyph} {o}" for o in table["outcome"]])
        columns = ["repro", "form", "fix", "outcome", "first", "last", "releases", "of"]
        held = set(table["held"])
        title = f"### First release with each outcome along {axis}" + (f" ({held.pop()})" if len(held) == 1 else "")
        out += [title, "", _table(table[columns if len(set(frame["repro"])) > 1 else columns[1:]]), ""]
    return out


def _sweep_transition_sections(frame: pd.DataFrame) -> list[str]:
    """Where each unit's verdict changes between neighbouring measured releases (``sweep_tables``)."""
    out: list[str] = []
    for axis, table in sweep_tables(frame):
        held = set(table["held"])
        title = f"### Where the verdict changes along {axis}" + (f" ({held.pop()})" if len(held) == 1 else "")
        columns = ["repro", "form", "fix", "from", "to", "before", "after"]
        note = f"`to` is the first measured {axis} release that behaves as `after`."
        out += [title, "", note, "", _table(table[columns if len(set(frame["repro"])) > 1 else columns[1:]]), ""]
    return out


def _step_section(frame: pd.DataFrame) -> list[str]:
    stats = step_stats(frame)
    stats = stats[stats["steps"] > 0]
    if stats.empty:
        return []
    labels = cell_labels(frame)
    stats = stats.assign(cell=[labels[c] for c in stats["cell"]])
    mem = "peak RSS MiB" if set(stats["mem_kind"]) == {"rss"} else "peak MiB (GPU, else RSS)"
    stats = stats.rename(
        columns={
            "peak_mem_mib": mem,
            "median_ms": "median ms",
            "p10_ms": "p10 ms",
            "p90_ms": "p90 ms",
            "runs_cv_pct": "runs' CV %",
            "first_step_ms": "first step ms",
        }
    )
    columns = [
        "cell",
        "form",
        "fix",
        "runs",
        "steps",
        "median ms",
        "p10 ms",
        "p90 ms",
        "runs' CV %",
        "first step ms",
        mem,
    ]
    return [f"## Step times ({WARM_UP_NOTE})", "", _table(stats[columns]), ""]


def _env_section(frame: pd.DataFrame) -> list[str]:
    errors = env_errors(frame)
    if errors.empty:
        return []
    labels = cell_labels(frame)
    lines = ["## Cells that could not run (ENV_ERROR, no verdict)", ""]
    for row in errors.to_dict("records"):
        reason = f"known `{row['known_signature']}`: " if row["known_signature"] else ""
        lines.append(f"- {labels[row['cell']]} · {row['form']} · {row['fix']}: {reason}{row['signature']}")
    return [*lines, ""]


def _commands_section(frame: pd.DataFrame) -> list[str]:
    lines: list[str] = []
    runs = frame.drop_duplicates(KEY)
    for repro in sorted(set(runs["repro"])):  # one command per repro and cell: repros may share a cell
        for cell in sorted_cells(frame):
            part = runs[(runs["cell"] == cell) & (runs["repro"] == repro)]
            for form in sorted(set(part["form"])):
                for fix in fix_order(part.loc[part["form"] == form, "fix"]):
                    row = part[(part["form"] == form) & (part["fix"] == fix)].iloc[0]
                    lines.append(reproduce_command(repro, row, form, fix))
    return ["<details><summary>Reproduce each cell</summary>", "", "```bash", *lines, "```", "", "</details>", ""]


def _comparison_section(data: ReportData) -> list[str]:
    comp = data.comparison
    if comp is None:
        return []
    counts = comp.counts()
    flagged = ", ".join(f"{n} {kind}" for kind, n in counts.items() if n) or "nothing"
    lines = [
        f"## Compared with baseline `{data.baseline}`",
        "",
        f"Flagged: **{flagged}** ({len(comp.timings)} timings compared; a slow-down counts when the median "
        f"step time ratio > {comp.threshold:.2f} and the difference > {comp.k:g} × noise).",
        "",
    ]
    overall = comp.overall_ratio
    if overall is not None and not 1 / comp.threshold <= overall <= comp.threshold:
        lines += [
            f"Every timed run moved: median ratio ×{overall:.2f}. A busier or different machine slows "
            "every run alike; compare timings made under the same conditions.",
            "",
        ]
    if not comp.changes.empty:
        labels = {**cell_labels(data.frame)}
        changes = comp.changes.assign(cell=[labels.get(c, c) for c in comp.changes["cell"]])
        lines += [_table(changes[["kind", "cell", "form", "fix", "baseline", "current", "detail"]]), ""]
    if comp.only_baseline or comp.only_current:
        lines += [
            f"Not compared: {len(comp.only_baseline)} run(s) only in the baseline, "
            f"{len(comp.only_current)} only in the current records.",
            "",
        ]
    return lines


def _fit(sections: Sequence[tuple[str, list[str]]], limit: int) -> str:
    """Join sections; drop the optional ones (named) from the end until the text fits GitHub's limit."""
    kept = list(sections)
    dropped: list[str] = []
    while len("\n".join(line for _, s in kept for line in s)) > limit and any(name for name, _ in kept):
        index = max(i for i, (name, _) in enumerate(kept) if name)
        dropped.append(kept.pop(index)[0])
    note = [f"_Left out to fit an issue: {', '.join(dropped)}; see report.html._", ""] if dropped else []
    return fit_limit(md_document("\n".join([line for _, s in kept for line in s] + note)), limit)


def report_markdown(data: ReportData, *, limit: int = GITHUB_LIMIT) -> str:
    """The whole report as Markdown: environment, matrices, transitions, timings, comparison, commands.

    Safe to post as an issue body: text from runs and records goes through :func:`md_safe`, and the whole
    is at most ``limit`` characters."""
    return _fit(_sections(data), limit)


def report_markdowns(data: ReportData, *, limit: int = GITHUB_LIMIT) -> tuple[str, str | None]:
    """``report_markdown``'s text and, where fitting it to ``limit`` left sections out, the whole text (else None);
    the sections are made once for both."""
    sections = _sections(data)
    short, whole = _fit(sections, limit), _fit(sections, sys.maxsize)
    return short, (whole if whole != short else None)


def _sections(data: ReportData) -> list[tuple[str, list[str]]]:
    """The report's sections in order, each with the name it is left out by (``""``: never left out)."""
    data = safe_data(data)
    frame = data.frame
    repros = ", ".join(sorted(set(frame["repro"]))) or "no runs"
    head = [f"# reprobisect report: {repros}", ""]
    if frame.empty:
        return [("", [*head, "No readable records were found.", *_skipped(data.skipped)])]
    head += [
        f"**Environment**: {environment_line(frame)}.",
        "",
        f"{len(frame)} runs in {frame['cell'].nunique()} cell(s) from {len(data.sources)} folder(s).",
        "",
    ]
    transitions = [line for b in data.bisects for line in transition_lines(b)]
    timings = [line for b in data.bisects for line in timing_markdown(b.report, b.path.name)]
    return [
        ("", head),
        ("", _matrix_sections(frame)),
        ("", _comparison_section(data)),
        ("", ["## Transitions (bisect)", "", *transitions, ""] if transitions else []),
        ("", ["## Slower, not broken (timing bisect)", "", *timings] if timings else []),
        ("", _env_section(frame)),
        ("", _skipped(data.skipped)),
        ("transitions", _sweep_transition_sections(frame)),
        ("first releases", _first_release_sections(frame)),
        ("step times", _step_section(frame)),
        ("commands", _commands_section(frame)),
    ]


def _skipped(skipped: Sequence[str]) -> list[str]:
    if not skipped:
        return []
    return [f"Skipped {len(skipped)} unreadable file(s):", "", *(f"- {s}" for s in skipped), ""]
