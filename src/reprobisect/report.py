"""Tables and Markdown from records; the only module that imports pandas."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from reprobisect.outcome import Outcome
from reprobisect.record import Record

__all__ = ["markdown_summary", "runs_frame", "runs_table"]

_MIB = 1024 * 1024


def _version(record: Record, name: str) -> str:
    """The version the run imported; the cell's pin in parentheses when the run never imported it."""
    if name in record.versions:
        return record.versions[name]
    pinned = record.cell.get("packages", {}).get(name)
    return f"({pinned})" if pinned else ""


def runs_frame(records: Sequence[Record]) -> pd.DataFrame:
    """One row per run with the columns a maintainer reads first."""
    rows = []
    for r in records:
        sig = r.signature or {}
        gpu_peak = r.peak_gpu_memory_bytes
        rows.append({
            "cell": r.cell.get("id"),
            "form": r.form,
            "fix": r.fix,
            "precision": r.precision,
            "outcome": r.outcome,
            "signature_id": sig.get("id", ""),
            "signature": sig.get("text", ""),
            "failing_step": "" if r.failing_step is None else str(r.failing_step),
            "median_step_ms": None if r.step_median_seconds is None else round(r.step_median_seconds * 1000, 1),
            "peak_mem_mib": round((gpu_peak if gpu_peak else (r.peak_rss_bytes or 0)) / _MIB) or None,
            "peak_mem_kind": "gpu" if gpu_peak else "rss",
            "wall_s": round(r.wall_seconds, 1),
            "torch": _version(r, "torch"),
            "deepspeed": _version(r, "deepspeed"),
            "lightning": _version(r, "lightning"),
            "versions_source": r.versions_source,
            "repeat": r.repeat,
            "log": r.log_path,
        })
    return pd.DataFrame(rows)


def runs_table(records: Sequence[Record]) -> str:
    """The terminal table printed at the end of a repro session."""
    frame = runs_frame(records)
    if frame.empty:
        return "(no runs)"
    frame = frame.assign(
        outcome=[f"{Outcome(o).glyph} {o}" for o in frame["outcome"]],
        signature=[
            f"{i} {t[:70]}" if i else "" for i, t in zip(frame["signature_id"], frame["signature"], strict=True)
        ],
    )
    columns = ["form", "fix", "outcome", "signature", "failing_step", "median_step_ms", "peak_mem_mib",
               "wall_s", "torch", "deepspeed", "lightning"]
    return frame[columns].astype(object).where(frame[columns].notna(), "-").to_string(index=False)


def markdown_summary(records: Sequence[Record], *, title: str, command: str) -> str:
    """Issue-ready Markdown: environment, the table, the signatures in full, and the command."""
    frame = runs_frame(records)
    lines = [f"## {title}", "", f"Reproduce: `{command}`", ""]
    if frame.empty:
        return "\n".join([*lines, "(no runs)", ""])
    first = records[0]
    gpu = first.gpu or {}
    env = f"python {first.python}; {first.platform or 'platform unknown'}"
    if gpu:
        env += f"; GPU {gpu.get('name')} (driver {gpu.get('driver')}, CUDA {gpu.get('cuda')})"
    lines += [f"Environment: {env}. Cell `{first.cell.get('id')}`.", ""]
    table = frame[["form", "fix", "precision", "outcome", "signature_id", "failing_step", "median_step_ms",
                   "peak_mem_mib", "wall_s", "torch", "deepspeed", "lightning"]]
    lines += [table.to_markdown(index=False), ""]
    signatures = {r.signature["id"]: r for r in records if r.signature}
    if signatures:
        lines += ["Signatures:", ""]
        for sig_id, r in signatures.items():
            assert r.signature is not None
            frames = " → ".join(r.signature.get("frames", []))
            upstream = ", ".join(r.upstream) or "none"
            known = f" (known: `{r.known_signature}`; upstream {upstream})" if r.known_signature else ""
            lines.append(f"- `{sig_id}` {r.signature['text']}{known}" + (f"<br>frames: {frames}" if frames else ""))
        lines.append("")
    return "\n".join(lines)
