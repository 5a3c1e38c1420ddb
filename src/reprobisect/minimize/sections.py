"""The Markdown section of a minimization (``minimize.md``): made from its summary, and read back for a report or a
triage summary. Apart from ``outputs`` so that ``report`` and ``triage`` read sections without importing what a
minimization runs (pyflakes, picire): a machine that only triages need not have them.

The script came from an issue and is untrusted text: in Markdown it sits in a fence longer than any run of
backticks it holds, each section read back is capped and neutralised again.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from reprobisect.util.files import inside
from reprobisect.util.neutral import md_document, md_safe

__all__ = ["SECTION_FILE", "section_markdown", "sections_under"]

_SECTION_CAP = 200_000  # characters of one section a report takes (the script and its diff are in it)

SECTION_FILE = "minimize.md"


def _fence(text: str, info: str) -> str:
    """``text`` in a code fence no backtick run inside it can close."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    ticks = "`" * max(3, longest + 1)
    body = text if text.endswith("\n") or not text else text + "\n"
    return f"{ticks}{info}\n{body}{ticks}\n"


def _verdict_cell(run: Mapping[str, Any] | None) -> str:
    if not run:
        return "not run"
    text = str(run["outcome"])
    if run.get("signature_text") and text != "PASS":
        shown = md_safe(str(run["signature_text"])).replace("`", "'")
        text += f" `{shown}`"
    return text


def section_markdown(summary: Mapping[str, Any], text: str, diff: str) -> str:
    """The Markdown section of one minimization (``report`` and ``triage`` include it as it is)."""
    original, minimized, reduction = summary["original"], summary["minimized"], summary["reduction"]
    lines = [
        f"## Minimized: {md_safe(Path(summary['script']).name)}",
        "",
        f"{original['lines']} → **{minimized['lines']} lines** ({reduction['lines']}× fewer), "
        f"{original['tokens']} → {minimized['tokens']} tokens ({reduction['tokens']}× fewer); "
        f"{summary['runs']} runs in {summary['seconds']:.0f} s"
        + (f" ({summary['runs_per_minute']} a minute" if summary["runs_per_minute"] else " (")
        + f", {summary['jobs']} at a time), {summary['candidates']} candidates of which "
        f"{summary['refused_without_a_run']} were refused without a run; stopped: {md_safe(summary['stopped'])}.",
        "",
        f"Target: {md_safe(summary['target'])} (form `{md_safe(summary['form'])}`).",
        "",
        "| cell | pins | original | minimized |",
        "| --- | --- | --- | --- |",
    ]
    for role in ("bad", "good"):
        cell = summary.get(role)
        if not cell:
            continue
        pins = ", ".join(f"{k} {v}" for k, v in cell["pins"].items()) or "default"
        lines.append(
            f"| {role} | {md_safe(pins)} | {_verdict_cell(cell['original'])} | {_verdict_cell(cell['minimized'])} |"
        )
    lines += ["", "Re-check it:", "", _fence("\n".join(summary["recheck"]), "bash")]
    if summary.get("plain_python"):  # older summaries have neither
        lines += ["Or outside the harness, in an environment with the bad (or good) pins:", ""]
        lines += [_fence(summary["plain_python"], "bash")]
    if summary.get("kept_for_plain_python"):
        lines += [f"Kept: {md_safe(summary['kept_for_plain_python'])}.", ""]
    lines += [_fence(text, "python")]
    lines += ["<details><summary>Diff against the original</summary>", "", _fence(diff, "diff"), "</details>", ""]
    return md_document("\n".join(lines))


def sections_under(roots: Sequence[Path], names: Sequence[str] = ()) -> list[str]:
    """The ``minimize.md`` sections under ``roots/minimize/`` (only those of repros ``names`` when given), for a
    report or a triage summary to include. A merged folder may come from anywhere: each section is capped, read
    without following a link out of its folder, and neutralised again."""
    found = []
    for root in roots:
        base = root / "minimize"
        if not base.is_dir():
            continue
        for folder in sorted(base.iterdir()):
            path = folder / SECTION_FILE
            if (names and folder.name not in names) or not path.is_file() or path.is_symlink():
                continue
            if not inside(base, f"{folder.name}/{SECTION_FILE}"):
                continue
            with path.open(encoding="utf-8", errors="replace") as handle:
                text = handle.read(_SECTION_CAP)
            found.append(md_document(text))
    return found
