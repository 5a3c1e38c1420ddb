"""The Markdown summary each session writes (``summary-matrix.md``, ``summary-<repro>.md``) and points at.

It is the file a maintainer opens first and pastes into an issue, so every piece of text a run produced (a
signature, a platform string) goes through ``util.neutral.md_safe`` and the whole through ``md_document``,
as report.md does: no escape sequence, control character, ``@mention``, ``<!--`` or tag survives in it.
Its environment is the first record's, as the harness measured it (``run.measured``); what runs claimed
otherwise is shown as their claim.
"""

from __future__ import annotations

from collections.abc import Sequence

from reprobisect.model.record import Record
from reprobisect.report.frame import claimed_text, runs_frame
from reprobisect.report.markdown import safe_frame
from reprobisect.util.neutral import md_code, md_document, md_safe

__all__ = ["markdown_summary"]

_COLUMNS = [
    "form",
    "fix",
    "precision",
    "outcome",
    "signature_id",
    "failing_step",
    "median_step_ms",
    "peak_mem_mib",
    "wall_s",
    "torch",
    "deepspeed",
    "lightning",
]


def markdown_summary(records: Sequence[Record], *, title: str, command: str) -> str:
    """Issue-ready Markdown: environment, the table, the signatures in full, and the command."""
    frame = runs_frame(records)
    lines = [f"## {md_safe(title)}", "", f"Reproduce: {md_code(command)}", ""]
    if frame.empty:
        return md_document("\n".join([*lines, "(no runs)", ""]))
    first = records[0]
    gpu = first.gpu or {}
    env = f"python {first.python}; {first.platform or 'platform unknown'}"
    if gpu:
        env += f"; GPU {gpu.get('name')} (driver {gpu.get('driver')}, CUDA {gpu.get('cuda')})"
    claims = sorted({text for r in records if (text := claimed_text(r.config.get("claimed")))})
    if claims:
        env += f" (runs claimed otherwise: {'; '.join(claims)})"
    lines += [f"Environment: {md_safe(env)}. Cell `{md_safe(str(first.cell.get('id')))}`.", ""]
    lines += [safe_frame(frame[_COLUMNS]).to_markdown(index=False), ""]
    lines += _signature_lines(records)
    return md_document("\n".join(lines))


def _signature_lines(records: Sequence[Record]) -> list[str]:
    signatures = {r.signature.id: (r, r.signature) for r in records if r.signature}
    if not signatures:
        return []
    lines = ["Signatures:", ""]
    for sig_id, (r, sig) in signatures.items():
        frames = " → ".join(sig.frames)
        upstream = ", ".join(r.upstream) or "none"
        known = f" (known: `{r.known_signature}`; upstream {upstream})" if r.known_signature else ""
        text = md_safe(f"{sig.text}{known}")
        lines.append(f"- `{sig_id}` {text}" + (f"<br>frames: {md_safe(frames)}" if frames else ""))
    return [*lines, ""]
