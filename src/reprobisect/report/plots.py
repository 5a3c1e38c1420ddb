"""PNG plots of a report (matplotlib, Agg backend): step time along a release axis, an outcome band.

Plots return PNG bytes so the CLI can write them beside the report and the HTML can inline them as
``data:`` URIs (the page must open on a machine without network).
"""

from __future__ import annotations

import io
from typing import Any

import matplotlib as mpl

mpl.use("Agg")  # no display on CI machines and cluster nodes; must precede pyplot
import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle

from reprobisect.model.outcome import Outcome
from reprobisect.report.frame import AXES
from reprobisect.report.spread import spread
from reprobisect.report.verdicts import verdicts
from reprobisect.report.views import OUTCOME_COLOURS, fix_order, release_key

__all__ = ["outcome_band", "step_time_plot"]

_SHORT = {  # words, not glyphs: the default font lacks some of the table glyphs
    Outcome.PASS.value: "pass",
    Outcome.REPRODUCED.value: "repro",
    Outcome.OTHER_FAILURE.value: "other",
    Outcome.TIMEOUT.value: "timeout",
    Outcome.CRASH.value: "crash",
    Outcome.ENV_ERROR.value: "env",
}


def _png(figure: Figure) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    plt.close(figure)
    return buffer.getvalue()


def _series(frame: pd.DataFrame, axis: str) -> dict[str, pd.DataFrame]:
    """One series per repro/form/fix (and values of the other axes when they vary too)."""
    held = [a for a in AXES if a != axis and frame[a].nunique() > 1]
    single = _single_form(frame)
    out: dict[str, pd.DataFrame] = {}
    for key, part in frame.groupby(["repro", "form", "fix", *held], sort=False):
        repro, form, fix, *others = (str(v) for v in key)
        name = fix if single else f"{repro}/{form}/{fix}"
        label = " ".join([name, *(f"{a} {v}" for a, v in zip(held, others, strict=True))])
        out[label] = part
    return dict(sorted(out.items()))


def _single_form(frame: pd.DataFrame) -> bool:
    """Only one repro and form in the frame: labels can name the fix alone."""
    return len(frame.drop_duplicates(["repro", "form"])) == 1


def step_time_plot(frame: pd.DataFrame, axis: str) -> bytes | None:
    """Median step time per release along ``axis`` with its p10–p90 band; None when no run has steps."""
    releases = sorted(set(frame[axis]), key=release_key)
    figure, ax = plt.subplots(figsize=(max(5.0, 1.3 * len(releases) + 3), 3.6))
    spans: list[float] = []
    for label, part in _series(frame, axis).items():
        points: list[tuple[int, float, float, float]] = []
        for x, release in enumerate(releases):
            times = [t for steps in part.loc[part[axis] == release, "step_ms"] for t in steps]
            if times:
                points.append((x, *spread(times)))
        if not points:
            continue
        xs, med, lo, hi = (list(column) for column in zip(*points, strict=True))
        line = ax.plot(xs, med, marker="o", label=label)[0]
        ax.fill_between(xs, lo, hi, alpha=0.18, color=line.get_color(), linewidth=0)
        ax.vlines(xs, lo, hi, color=line.get_color(), alpha=0.5, linewidth=1)
        spans += [*lo, *hi]
    if not spans:
        plt.close(figure)
        return None
    _axis_style(ax, releases, axis)
    ax.set_ylabel("step time, ms (median, p10–p90)")
    if max(spans) > 20 * max(min(spans), 1e-3):
        ax.set_yscale("log")  # a contended machine's seconds-long steps would flatten the others to zero
    else:
        ax.set_ylim(bottom=0)
    what = f" ({frame['repro'].iloc[0]} · {frame['form'].iloc[0]})" if _single_form(frame) else ""
    ax.set_title(f"Step time along {axis}{what}, warm-up steps excluded", fontsize=10)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    return _png(figure)


def _axis_style(ax: Any, releases: list[str], axis: str) -> None:
    ax.set_xticks(range(len(releases)), releases)
    ax.set_xlim(-0.5, len(releases) - 0.5)
    ax.set_xlabel(axis)
    ax.grid(axis="y", alpha=0.3)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)


def outcome_band(frame: pd.DataFrame, axis: str) -> bytes:
    """A coloured cell per release × form/fix: where along ``axis`` each outcome starts and stops."""
    releases = sorted(set(frame[axis]), key=release_key)
    folded = verdicts(frame)
    rows = sorted({(r, fo) for r, fo in zip(frame["repro"], frame["form"], strict=True)})
    labels = [
        (repro, form, fix)
        for repro, form in rows
        for fix in fix_order(frame.loc[(frame["repro"] == repro) & (frame["form"] == form), "fix"])
    ]
    figure, ax = plt.subplots(figsize=(max(4.0, 1.1 * len(releases) + 3), 0.4 * len(labels) + 1.2))
    for y, (repro, form, fix) in enumerate(labels):
        for x, release in enumerate(releases):
            part = frame[
                (frame["repro"] == repro) & (frame["form"] == form) & (frame["fix"] == fix) & (frame[axis] == release)
            ]
            if part.empty:
                continue
            verdict = folded[(repro, str(part["cell"].iloc[0]), form, fix)]
            strong, _ = OUTCOME_COLOURS[verdict.outcome]
            ax.add_patch(
                Rectangle(
                    (x - 0.48, y - 0.45),
                    0.96,
                    0.9,
                    facecolor=strong,
                    linewidth=0,
                    edgecolor="white",
                    hatch="///" if verdict.flaky else None,
                )
            )
            text = _SHORT[verdict.outcome] + (f"\n{verdict.signature_id}" if verdict.signature_id else "")
            text += f" ({verdict.agree}/{verdict.runs})" if verdict.flaky else ""
            ax.text(x, y, text, ha="center", va="center", fontsize=6.5, color="white", linespacing=1.1)
    single = len(rows) == 1
    ax.set_yticks(range(len(labels)), [fi if single else f"{r}/{fo}/{fi}" for r, fo, fi in labels], fontsize=8)
    if single:
        ax.set_ylabel(f"{rows[0][0]} · {rows[0][1]}: fix", fontsize=8)
    ax.set_ylim(len(labels) - 0.5, -0.5)
    _axis_style(ax, releases, axis)
    ax.grid(visible=False)
    present = [o for o in OUTCOME_COLOURS if (frame["outcome"] == o).any()]
    ax.legend(
        handles=[Patch(color=OUTCOME_COLOURS[o][0], label=o) for o in present],
        fontsize=7,
        loc="upper left",
        bbox_to_anchor=(1.01, 1.0),
        frameon=False,
    )
    ax.set_title(f"Outcome per release along {axis}", fontsize=10)
    return _png(figure)
