"""What a night found, as the terminal summary, ``nightly.json`` and an issue-ready Markdown body.

The body opens with a hidden marker (``<!-- reprobisect-nightly backend=cpu -->``) so a workflow can
find the one tracking issue it keeps updating, then says what regressed first: a maintainer reading it
on a phone should know in two lines whether to look further.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import pandas as pd

from reprobisect.nightly.main_follow_up import Finding
from reprobisect.nightly.main_text import finding_lines
from reprobisect.nightly.other_side import OtherSide
from reprobisect.nightly.slowdowns import Slowdown
from reprobisect.report.compare import Comparison
from reprobisect.report.frame import Bisect
from reprobisect.report.markdown import GITHUB_LIMIT, fit_limit, report_markdown, safe_frame
from reprobisect.report.verdicts import Key
from reprobisect.report.views import ReportData, reproduce_command
from reprobisect.util.neutral import md_document, md_safe, printable

__all__ = ["MARKER", "NightNews", "issue_body", "title_of"]

MARKER = "<!-- reprobisect-nightly backend={backend} -->"


@dataclasses.dataclass(frozen=True, kw_only=True)
class NightNews:
    """Everything one night found; rendered three ways, never recomputed."""

    at: str
    backend: str
    baseline: str
    since: str | None
    new_releases: list[str] = dataclasses.field(default_factory=list)
    skipped: list[str] = dataclasses.field(default_factory=list)
    newest: str | None = None
    up_to: str | None = None
    ran: list[str] = dataclasses.field(default_factory=list)
    refs: list[str] = dataclasses.field(default_factory=list)
    comparisons: Mapping[str, Comparison] = dataclasses.field(default_factory=dict)
    regressed: Mapping[str, list[Key]] = dataclasses.field(default_factory=dict)
    bisects: list[Bisect] = dataclasses.field(default_factory=list)
    runs_executed: int = 0
    runs_reused: int = 0
    advanced_to: str | None = None
    seeded: bool = False
    repros_not_run: list[str] = dataclasses.field(default_factory=list)  # asked for, not runnable here: why
    findings: list[Finding] = dataclasses.field(default_factory=list)  # with a clone: each regression's answers
    slowdowns: list[Slowdown] = dataclasses.field(default_factory=list)  # --slower-than: each flagged run's search
    other_sides: list[OtherSide] = dataclasses.field(default_factory=list)  # each regression with newer Lightning

    @property
    def is_regression(self) -> bool:
        """A run that passed on the baseline does not pass on a release run tonight, or (``--slower-than``) is
        slower with confidence."""
        return any(self.regressed.values()) or bool(self.confirmed_slowdowns())

    def confirmed_slowdowns(self) -> list[Slowdown]:
        """The flagged runs whose timing search found them slower beyond the threshold."""
        return [s for s in self.slowdowns if s.confirmed]

    @property
    def is_change(self) -> bool:
        """Any outcome or signature change against the baseline (a step-time change is reported, not counted:
        tonight's runner is not last night's)."""
        return self.outcome_changes() > 0

    def outcome_changes(self) -> int:
        """Runs whose outcome or signature changed (every kind but timing-regression)."""
        return int((self.changes()["kind"] != "timing-regression").sum())

    def slower(self) -> int:
        """Runs flagged as a step-time regression."""
        return int((self.changes()["kind"] == "timing-regression").sum())

    def changes(self) -> pd.DataFrame:
        """Every flagged change of every release run tonight, with a ``release`` and a ``regression`` column."""
        frames = []
        for release, comp in self.comparisons.items():
            bad = set(self.regressed.get(release, []))
            keys = zip(
                comp.changes["repro"], comp.changes["cell"], comp.changes["form"], comp.changes["fix"], strict=True
            )
            frames.append(comp.changes.assign(release=release, regression=[k in bad for k in keys]))
        if not frames:
            return pd.DataFrame(
                columns=[
                    "release",
                    "kind",
                    "repro",
                    "cell",
                    "form",
                    "fix",
                    "baseline",
                    "current",
                    "detail",
                    "regression",
                ]
            )
        return pd.concat(frames, ignore_index=True)

    def summary(self) -> dict[str, Any]:
        """``nightly.json``: what a workflow step reads (title, regressed) and what a dashboard would."""
        return {
            "title": title_of(self),
            "regressed": self.is_regression,
            "changed": self.is_change,
            "at": self.at,
            "backend": self.backend,
            "baseline": self.baseline,
            "baseline_since": self.since,
            "new_releases": self.new_releases,
            "ran": self.ran,
            "refs": self.refs,
            "not_run": self.skipped,
            "repros_not_run": self.repros_not_run,
            "regressions": [f.to_json() for f in self.findings],
            "slowdowns": [s.to_json() for s in self.slowdowns],
            "other_side": [side.to_json() for side in self.other_sides],
            "newest_on_index": self.newest,
            "up_to": self.up_to,
            "advanced_to": self.advanced_to,
            "seeded": self.seeded,
            "runs_executed": self.runs_executed,
            "runs_reused": self.runs_reused,
            "changes": self.changes().to_dict("records"),
            "bisects": [
                {
                    "repro": b.report.repro,
                    "form": b.report.form,
                    "fix": b.report.fix,
                    "range": [b.report.good, b.report.bad],
                    "transitions": [t.to_json() for t in b.report.transitions],
                    "file": b.path.name,
                }
                for b in self.bisects
            ],
        }

    def history(self) -> dict[str, Any]:
        """The line this night adds to the state's history."""
        changes = self.changes()
        return {
            "at": self.at,
            "baseline": self.baseline,
            "ran": self.ran,
            "seeded": self.seeded,
            "regressed": self.is_regression,
            "changes": len(changes),
            "advanced_to": self.advanced_to,
        }

    def terminal_summary(self) -> str:
        """A few lines for the end of the nightly's output."""
        lines = [title_of(self)]
        changes = self.changes()
        for row in changes.to_dict("records"):
            flag = "REGRESSION " if row["regression"] else ""
            lines.append(
                f"  {flag}{row['kind']}: deepspeed {row['release']} {row['repro']} {row['form']} "
                f"{row['fix']}: {row['baseline']} → {row['current']} {row['detail']}".rstrip()
            )
        for bisect in self.bisects:
            lines += [
                f"  bisect {bisect.report.repro} {bisect.report.form} {bisect.report.fix}: {t}"
                for t in _transitions(bisect)
            ]
        for slowdown in self.slowdowns:
            verdict = "SLOWER" if slowdown.confirmed else "cleared by its timing search"
            lines.append(f"  {verdict}: deepspeed {slowdown.release} {slowdown.title_words()}")
        lines += [printable(f"  which side: {_side_words(side)}") for side in self.other_sides]
        lines.append(f"{self.runs_executed} runs executed, {self.runs_reused} reused from records.")
        if self.advanced_to:
            lines.append(f"The baseline is now deepspeed {self.advanced_to}.")
        return "\n".join(lines)


def title_of(news: NightNews) -> str:
    """One line: the issue title and the first line a maintainer reads."""
    where = f"({news.backend})"
    if news.seeded:
        return f"Nightly {where}: deepspeed {news.baseline} is the new baseline"
    if not news.ran:
        return f"Nightly {where}: no DeepSpeed release newer than {news.baseline}"
    ran = ", ".join(news.ran)
    regressions = sum(len(keys) for keys in news.regressed.values())
    if regressions:
        culprit = next((f.commit for f in news.findings if f.commit), None)
        named = f"; introduced by {culprit['sha'][:12]}" if culprit else ""
        pr = culprit.get("pull_request") if culprit else None
        named += f" (#{str(pr).rpartition('#')[2]})" if pr else ""
        return f"Nightly {where}: deepspeed {ran} regressed {regressions} run(s) that passed on {news.baseline}{named}"
    confirmed = news.confirmed_slowdowns()
    if confirmed:
        return f"Nightly {where}: deepspeed {ran} slower than {news.baseline}: {confirmed[0].title_words()}" + (
            f" and {len(confirmed) - 1} more" if len(confirmed) > 1 else ""
        )
    slower = f"; {news.slower()} run(s) slower" if news.slower() else ""
    changed = news.outcome_changes()
    if changed:
        return f"Nightly {where}: deepspeed {ran} changed {changed} outcome(s) against {news.baseline}{slower}"
    return f"Nightly {where}: deepspeed {ran} behaves like {news.baseline}{slower}"


def _transitions(bisect: Bisect) -> list[str]:
    out = []
    for t in bisect.report.transitions:
        before, after = t.before, t.after
        out.append(
            f"{t.last} {before.outcome} {before.signature_id or ''} → {t.first} "
            f"{after.outcome} {after.signature_id or ''}".replace("  ", " ").strip()
        )
    return out or ["no transition inside the range (the change did not reproduce on re-run: flaky?)"]


def _side_words(side: OtherSide) -> str:
    """``gan cpu-deepspeed none on deepspeed 0.16.4: fails with lightning ≤ …``: one regression's side."""
    repro, _, form, fix = side.key
    return f"{repro} {form} {fix} on deepspeed {side.deepspeed}: {side.sentence()}"


def _side_lines(sides: list[OtherSide]) -> list[str]:
    """The section that says, for each regression, whether a newer Lightning passes: whose fix it is."""
    if not sides:
        return []
    head = "### Lightning or DeepSpeed (each regression run again with newer Lightning releases)"
    return [head, "", *(md_safe(f"- {_side_words(side)}") for side in sides), ""]


def _slowdown_lines(slowdowns: list[Slowdown]) -> list[str]:
    """Each flagged run's timing search: its section when it found a slowdown, one line when it cleared it."""
    lines = [line for s in slowdowns if s.confirmed for line in [s.markdown(), ""]]
    cleared = [s for s in slowdowns if not s.confirmed]
    if cleared:
        lines += [
            "Flagged slower by one run each, then cleared by a timing search run here (not slower beyond the "
            "threshold with confidence):",
            "",
        ]
        lines += [md_safe(f"- deepspeed {s.release}: {s.title_words()} ({s.search.path.name})") for s in cleared]
        lines.append("")
    return lines


def _cell_row(frame: pd.DataFrame, release: str, repro: str, form: str, fix: str) -> pd.Series[Any] | None:
    rows = frame[
        (frame["deepspeed"] == release) & (frame["repro"] == repro) & (frame["form"] == form) & (frame["fix"] == fix)
    ]
    return None if rows.empty else rows.iloc[0]


def _table(changes: pd.DataFrame, baseline: str) -> list[str]:
    head = f"| | release | repro | form | fix | {baseline} (baseline) | now | change |"
    lines = [head, "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for row in changes.to_dict("records"):
        flag = "**regression**" if row["regression"] else ""
        kind = f"{row['kind']} {row['detail']}".strip()
        lines.append(
            f"| {flag} | {row['release']} | {row['repro']} | {row['form']} | {row['fix']} | "
            f"{row['baseline']} | {row['current']} | {kind} |"
        )
    return lines


def _signatures(frame: pd.DataFrame, changes: pd.DataFrame) -> list[str]:
    ids = {label.split()[-1] for label in [*changes["baseline"], *changes["current"]] if len(label.split()) > 1}
    part = frame[frame["signature_id"].isin(ids)].drop_duplicates("signature_id")
    return [f"- `{row['signature_id']}` {row['signature']}" for row in part.to_dict("records")]


def _commands(frame: pd.DataFrame, changes: pd.DataFrame, limit: int = 8) -> list[str]:
    commands: list[str] = []
    for row in changes.to_dict("records"):
        cell = _cell_row(frame, row["release"], row["repro"], row["form"], row["fix"])
        if cell is not None:
            command = reproduce_command(str(row["repro"]), cell, str(row["form"]), str(row["fix"]))
            if command not in commands:
                commands.append(command)
    return commands[:limit]


def _head(news: NightNews) -> list[str]:
    since = f" (baseline since {news.since})" if news.since else ""
    lines = [
        MARKER.format(backend=news.backend),
        f"## {title_of(news)}",
        "",
        f"Night of {news.at}, backend `{news.backend}`. Baseline: deepspeed **{news.baseline}**{since}.",
    ]
    lines += [md_safe(f"Not run on this machine: {why}.") for why in news.repros_not_run]
    if news.seeded:
        return [
            *lines,
            f"First night: the slice ran on deepspeed {news.baseline} ({news.runs_executed} runs "
            f"executed, {news.runs_reused} reused); later nights compare new releases with it.",
            "",
        ]
    if not news.ran:
        up_to = f", considering releases up to {news.up_to}" if news.up_to else ""
        return [
            *lines,
            f"No DeepSpeed release newer than {news.baseline} on the configured index (newest there: "
            f"{news.newest}{up_to}). Nothing ran.",
            "",
        ]
    lines.append(
        f"Ran: deepspeed {', '.join(news.ran)}"
        + (f" (git refs: {', '.join(news.refs)})" if news.refs else "")
        + f"; {news.runs_executed} runs executed, {news.runs_reused} reused from records."
    )
    if news.skipped:
        lines.append(f"Newer releases not run tonight (--max-releases): {', '.join(news.skipped)}.")
    if news.advanced_to:
        lines.append(f"The baseline is now deepspeed {news.advanced_to}.")
    return [*lines, ""]


def issue_body(news: NightNews, report: ReportData | None, *, limit: int = GITHUB_LIMIT) -> str:
    """The Markdown a workflow posts as the tracking issue (or a comment on it): head, changes, bisection,
    commands, signatures, then the full report folded away, cut to fit GitHub's limit."""
    lines = _head(news)
    changes = safe_frame(news.changes())
    if news.ran and not news.outcome_changes():
        timing = "" if changes.empty else " (step-time changes below: timings of two nights compare two runners' loads)"
        lines += [f"Every run has the outcome and signature it had on the baseline{timing}.", ""]
    if not changes.empty:
        first = changes.sort_values("regression", ascending=False, kind="stable")  # regressions on top
        lines += ["### What changed", "", *_table(first, news.baseline), ""]
    lines += _side_lines(news.other_sides)
    for finding in news.findings:  # with a clone: the pull request, a minimized script, the fixes that pass
        lines += finding_lines(finding)
    lines += _slowdown_lines(news.slowdowns)
    if news.bisects:
        lines += ["### Bisection (every transition between the baseline and the release)", ""]
        for bisect in news.bisects:
            done = bisect.report
            lines += [
                md_safe(
                    f"- {done.repro} · {done.form} · fix {done.fix} "
                    f"({done.good} .. {done.bad}): " + "; ".join(_transitions(bisect))
                )
            ]
        lines.append("")
    if report is not None and not changes.empty:
        commands = [command.replace("`", "'") for command in _commands(report.frame, news.changes())]
        if commands:
            lines += ["### Reproduce", "", "```bash", *commands, "```", ""]
        signatures = _signatures(safe_frame(report.frame), changes)
        if signatures:
            lines += ["### Signatures", "", *signatures, ""]
    head = fit_limit(md_document("\n".join(lines)), limit - 200)
    if report is None:
        return head
    room = limit - len(head) - 200
    if room < 1000:
        return head
    full = report_markdown(report, limit=room)
    return "\n".join([head, "<details><summary>Full report</summary>", "", full, "", "</details>", ""])
