"""What a night of DeepSpeed's main found, as the terminal summary, ``nightly.json`` and the issue body.

The title names what a maintainer acts on: ``DeepSpeed main: gan fails since 1a2b3c4d5e6f (#7018)``: the repro,
the first commit with the failure and its pull request. The body then says, for each regression, which commit
introduced it, the minimized script inline, the fixes that pass tonight and the commands that re-run each step.
Nothing here runs or reads records: the night's answers (nightly/main_night.py, main_follow_up.py) come in ``MainNews``.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from typing import Any

from reprobisect.nightly.main_follow_up import Finding
from reprobisect.nightly.slowdowns import Slowdown
from reprobisect.report.markdown import GITHUB_LIMIT, fit_limit
from reprobisect.report.verdicts import Key
from reprobisect.util.neutral import md_document, md_safe

__all__ = ["MAIN_MARKER", "MainNews", "finding_lines", "main_body", "main_title"]

MAIN_MARKER = "<!-- reprobisect-nightly backend={backend} track=main -->"


@dataclasses.dataclass(frozen=True, kw_only=True)
class MainNews:
    """Everything one night of main found; rendered three ways, never recomputed."""

    at: str
    backend: str
    ref: str
    clone: str
    after: str  # tonight's commit
    before: str | None = None  # last night's; None on the first night
    seeded: bool = False
    changes: Sequence[Mapping[str, Any]] = ()  # outcome and signature changes (report/compare.py rows)
    flaky: Mapping[Key, str] = dataclasses.field(default_factory=dict)
    findings: Sequence[Finding] = ()
    not_followed: int = 0  # regressions beyond --max-bisects
    runs_executed: int = 0
    runs_reused: int = 0
    repros_not_run: Sequence[str] = ()  # asked for, not runnable on this machine: why
    slowdowns: Sequence[Slowdown] = ()  # --slower-than: each run flagged slower, searched over tonight's commits

    @property
    def is_regression(self) -> bool:
        """A run that passed on last night's main does not pass on tonight's (flaky runs never count), or
        (``--slower-than``) is slower with confidence."""
        return bool(self.findings) or self.not_followed > 0 or any(s.confirmed for s in self.slowdowns)

    @property
    def moved(self) -> bool:
        """Main is at another commit than last night."""
        return self.before is not None and self.before != self.after

    def summary(self) -> dict[str, Any]:
        """``nightly.json``: the fields of the body, for a workflow step or a dashboard."""
        return {
            "track": "main",
            "title": main_title(self),
            "regressed": self.is_regression,
            "changed": bool(self.changes),
            "at": self.at,
            "backend": self.backend,
            "ref": self.ref,
            "clone": self.clone,
            "commit": self.after,
            "baseline_commit": self.before,
            "seeded": self.seeded,
            "moved": self.moved,
            "runs_executed": self.runs_executed,
            "runs_reused": self.runs_reused,
            "changes": [dict(c) for c in self.changes],
            "flaky": [{"repro": k[0], "form": k[2], "fix": k[3], "states": v} for k, v in self.flaky.items()],
            "regressions": [f.to_json() for f in self.findings],
            "not_followed": self.not_followed,
            "repros_not_run": list(self.repros_not_run),
            "slowdowns": [s.to_json() for s in self.slowdowns],
        }

    def history(self) -> dict[str, Any]:
        """The line this night adds to the state's history."""
        return {
            "at": self.at,
            "track": "main",
            "baseline": self.before,
            "ran": [self.after] if self.seeded or self.moved else [],
            "seeded": self.seeded,
            "regressed": self.is_regression,
            "changes": len(self.changes),
            "advanced_to": self.after if self.seeded or self.moved else None,
        }

    def terminal_summary(self) -> str:
        """A few lines for the end of the night's output."""
        lines = [main_title(self)]
        for finding in self.findings:
            commit = finding.commit
            lines.append(
                f"  {'/'.join(finding.key[i] for i in (0, 2, 3))}: {finding.before} → {finding.after}; introduced by "
                + (f"{commit['sha'][:12]} {commit['subject']}" if commit else f"? ({finding.commit_why})")
            )
        lines += [f"  flaky {k[0]} {k[2]} {k[3]}: {v}" for k, v in self.flaky.items()]
        for slowdown in self.slowdowns:
            verdict = "SLOWER" if slowdown.confirmed else "cleared by its timing search"
            lines.append(f"  {verdict}: {slowdown.title_words()}")
        lines.append(f"{self.runs_executed} runs executed, {self.runs_reused} reused from records.")
        return "\n".join(lines)


def pr_number(pull_request: str | None) -> str | None:
    """``#7018`` of ``deepspeedai/DeepSpeed#7018``."""
    found = re.search(r"#(\d+)$", pull_request or "")
    return f"#{found.group(1)}" if found else None


def main_title(news: MainNews) -> str:
    """One line: the issue title. A regression's names the repro, the commit and its pull request."""
    head = f"DeepSpeed {news.ref}"
    if news.seeded:
        return f"{head}: {news.after[:12]} is the baseline for {news.ref} ({news.backend})"
    if not news.moved:
        return f"{head}: still {news.after[:12]}, nothing new since last night ({news.backend})"
    if news.findings:
        first = news.findings[0]
        more = len(news.findings) + news.not_followed - 1
        tail = f", and {more} more regression(s)" if more else ""
        if first.commit is None:
            span = f"{(news.before or '')[:12]}..{news.after[:12]} (commit not found)"
            return f"{head}: {first.key[0]} fails since {span}{tail}"
        pr = pr_number(first.commit.get("pull_request"))
        return f"{head}: {first.key[0]} fails since {first.commit['sha'][:12]}{f' ({pr})' if pr else ''}{tail}"
    slower = [s for s in news.slowdowns if s.confirmed]
    if slower:
        others = f", and {len(slower) - 1} more" if len(slower) > 1 else ""
        return f"{head}: slower than last night's {(news.before or '')[:12]}: {slower[0].title_words()}{others}"
    flaky = f"; {len(news.flaky)} flaky run(s)" if news.flaky else ""
    if news.changes:
        return f"{head}: {news.after[:12]} changed {len(news.changes)} outcome(s) against last night{flaky}"
    return f"{head}: {news.after[:12]} behaves like {(news.before or '')[:12]}{flaky}"


def _head(news: MainNews) -> list[str]:
    lines = [
        MAIN_MARKER.format(backend=news.backend),
        f"## {main_title(news)}",
        "",
        f"Night of {news.at}, backend `{news.backend}`, clone `{news.clone}`. Tonight's {news.ref}: `{news.after}`"
        + (f"; last night's: `{news.before}`." if news.before else "."),
        f"{news.runs_executed} runs executed, {news.runs_reused} reused from records.",
        *(md_safe(f"Not run on this machine: {why}.") for why in news.repros_not_run),
        "",
    ]
    if news.seeded:
        lines += [f"First night of {news.ref}: its runs are the baseline the next night compares with.", ""]
    elif not news.moved:
        lines += [f"{news.ref} has not moved since last night: nothing ran.", ""]
    return lines


def _commit_lines(finding: Finding) -> list[str]:
    commit, good = finding.commit, finding.last_good
    if commit is None:
        return [f"**Introduced by**: not found ({finding.commit_why})."]
    pr = f" ({commit['pull_request']})" if commit.get("pull_request") else ""
    lines = [f"**Introduced by** `{commit['sha'][:12]}` {commit['subject']}{pr}"]
    if good:
        lines.append(f"(last good commit `{good['sha'][:12]}` {good['subject']}; {finding.probes} probes).")
    return [" ".join(lines)]


def _fix_lines(finding: Finding) -> list[str]:
    passing = finding.passing()
    tried = ", ".join(f"{name} {outcome}" for name, outcome in finding.fixes.items())
    named = [f"`{n}`" + (f" (DeepSpeed back at {finding.good_end})" if n == finding.back_fix else "") for n in passing]
    if not passing:
        return [f"**Fixes that pass tonight**: none ({tried or 'none tried'})."]
    return [f"**Fixes that pass tonight**: {', '.join(named)} (tried: {tried})."]


def _minimized_lines(finding: Finding) -> list[str]:
    found = finding.minimized
    if found is None:
        return [f"**Minimized script**: none ({finding.minimize_why})."]
    tells = f"fails tonight and passes on {finding.good_end}" if found["tells_apart"] else "does not tell them apart"
    return [
        f"**Minimized script** ({found['original']} → {found['minimized']}; {found['stopped']}; it {tells}: "
        + "; ".join(found["runs"])
        + f"), `{found['path']}`:",
        "",
        "```python",
        str(found["text"]).rstrip().replace("```", "'''"),
        "```",
    ]


def finding_lines(finding: Finding) -> list[str]:
    repro, _, form, fix = finding.key
    minimize = [str(finding.minimized["rerun"])] if finding.minimized and finding.minimized.get("rerun") else []
    commands = [*finding.rerun, *([finding.bisect_rerun] if finding.bisect_rerun else []), *minimize]
    lines = [
        md_safe(f"### {repro} · {form} · fix {fix}: {finding.before} → {finding.after}"),
        "",
        md_safe(_commit_lines(finding)[0]),
        "",
        md_safe(_fix_lines(finding)[0]),
        "",
        *_minimized_lines(finding),
        "",
    ]
    if commands:
        lines += ["Re-run:", "", "```bash", *(c.replace("`", "'") for c in commands), "```", ""]
    return lines


def main_body(news: MainNews, *, limit: int = GITHUB_LIMIT) -> str:
    """The Markdown a workflow posts as the issue: head, each regression with its answers, flaky and other
    changes, cut to fit GitHub's limit."""
    lines = _head(news)
    for finding in news.findings:
        lines += finding_lines(finding)
    if news.not_followed:
        lines += [f"{news.not_followed} more regression(s) not followed up (--max-bisects).", ""]
    for slowdown in news.slowdowns:
        if slowdown.confirmed:
            lines += [slowdown.markdown(), ""]
        else:
            lines += [md_safe(f"Flagged slower, then cleared by a timing search here: {slowdown.title_words()}."), ""]
    if news.flaky:
        lines += ["### Flaky (repeats disagree: not a regression, no commit searched)", ""]
        lines += [md_safe(f"- {k[0]} · {k[2]} · fix {k[3]}: {v}") for k, v in news.flaky.items()]
        lines.append("")
    others = [c for c in news.changes if (c["repro"], c["cell"], c["form"], c["fix"]) not in news.flaky]
    if others and news.moved:
        lines += ["### Every outcome change", ""]
        lines += [
            md_safe(f"- {c['kind']}: {c['repro']} · {c['form']} · fix {c['fix']}: {c['baseline']} → {c['current']}")
            for c in others
        ]
        lines.append("")
    return fit_limit(md_document("\n".join(lines)), limit - 200)
