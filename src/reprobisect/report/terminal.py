"""What a repro or matrix session prints at its end: a table that fits the terminal, the signatures in
full below it, and one line that says what to run next when the report's own symptom did not appear.

A maintainer reads this first, often in a 120-column terminal or a CI log: the table groups runs by cell
and form (so neither is repeated on every row), names each signature by its known name beside its id, and
cuts long text with "…" (the full text is in the legend and in the Markdown summary).
"""

from __future__ import annotations

import dataclasses
import textwrap
from collections.abc import Iterable, Mapping, Sequence

from packaging.version import InvalidVersion, Version

from reprobisect.model.classify import KnownSignature, known_name, known_signatures
from reprobisect.model.outcome import Outcome
from reprobisect.model.record import Record
from reprobisect.model.signature import PATCH_ERROR
from reprobisect.util.console import WIDTH, cut
from reprobisect.util.invocation import rerun_words
from reprobisect.util.neutral import command_line, printable

__all__ = ["NextStep", "next_step", "runs_table", "signature_legend"]

_SIGNATURE_CELL = 48  # an unknown signature's text is cut here; the legend below the table has it whole
_GAP = "  "
_HEADERS = ("fix", "outcome", "signature", "died at", "ms/step", "wall s")


def _signature_cell(record: Record) -> str:
    sig = record.signature
    if sig is None:
        return ""
    label = known_name(record) or sig.text
    return cut(f"{sig.id} {label}", _SIGNATURE_CELL)


def _number(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _died_at(record: Record) -> str:
    """Where a failed run died; ``-`` when that is unknown (a script that reports no steps), blank for a pass."""
    if record.failing_step is not None:
        return cut(str(record.failing_step), len("after-steps"))
    return "" if record.outcome == Outcome.PASS.value else "-"


def _row(record: Record) -> tuple[str, ...]:
    outcome = Outcome(record.outcome)
    step_ms = None if record.step_median_seconds is None else record.step_median_seconds * 1000
    return (
        record.fix,
        f"{outcome.glyph} {outcome.value}",
        _signature_cell(record),
        _died_at(record),
        _number(step_ms),
        _number(record.wall_seconds),
    )


def _widths(rows: Sequence[tuple[str, ...]], width: int) -> list[int]:
    """Column widths; when a row is too wide the signature column gives way first (down to 20), then the fix."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(_HEADERS)]
    over = sum(widths) + len(_GAP) * (len(widths) + 1) - width
    for column, floor in ((2, 20), (0, len(_HEADERS[0]))):
        take = min(max(over, 0), max(widths[column] - floor, 0))
        widths[column] -= take
        over -= take
    return widths


def _format(cells: Sequence[str], widths: Sequence[int]) -> str:
    parts = [
        cut(c, w).ljust(w) if i < 3 else cut(c, w).rjust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))
    ]
    return (_GAP + _GAP.join(parts)).rstrip()


def _group_title(record: Record, *, with_repro: bool) -> str:
    cell = record.matrix_cell or str(record.cell.get("id", "?"))
    return f"{record.repro + ' · ' if with_repro else ''}{cell} · {record.form} ({record.precision})"


def runs_table(records: Sequence[Record], *, width: int = WIDTH) -> str:
    """Runs grouped by cell and form (and repro, when there are several), one row per fix and repeat, no line
    longer than ``width``."""
    if not records:
        return "(no runs)"
    groups: dict[str, list[Record]] = {}
    with_repro = len({r.repro for r in records}) > 1
    for record in records:
        groups.setdefault(_group_title(record, with_repro=with_repro), []).append(record)
    rows = {title: [_row(r) for r in group] for title, group in groups.items()}
    widths = _widths([row for group in rows.values() for row in group], width)
    lines = []
    for title, group_rows in rows.items():
        lines += ["", cut(title, width), _format(_HEADERS, widths)]
        lines += [_format(row, widths) for row in group_rows]
    return "\n".join(lines[1:])


def _known_by_name() -> dict[str, KnownSignature]:
    return {known.name: known for known in known_signatures()}


def signature_legend(records: Sequence[Record], *, width: int = WIDTH) -> list[str]:
    """Each signature of the table once, in full (wrapped), with its known name, note and upstream reports."""
    known = _known_by_name()
    seen: dict[str, Record] = {}
    for record in records:
        if record.signature is not None and record.signature.id not in seen:
            seen[record.signature.id] = record
    if not seen:
        return []
    lines = ["Signatures:"]
    for sig_id, record in seen.items():
        sig_text = record.signature.text if record.signature else ""
        name = known_name(record)
        text = f"{sig_id} {name + ': ' if name else ''}{sig_text}"
        entry = known.get(name or "")
        if entry is not None and entry.note:
            text += f" — {entry.note}"
        if record.upstream:
            text += f" (upstream: {', '.join(record.upstream)})"
        lines += textwrap.wrap(
            " ".join(printable(text).split()), width, initial_indent="  ", subsequent_indent=" " * 13
        )
    return lines


@dataclasses.dataclass(frozen=True, kw_only=True)
class NextStep:
    """Why the report's symptom did not show on this cell, and the commands that look for it elsewhere."""

    reason: str
    commands: tuple[str, ...]

    def lines(self, width: int = WIDTH) -> list[str]:
        """The reason wrapped to ``width``, then one command per line."""
        return [
            *textwrap.wrap(printable(self.reason), width),
            *(f"  {printable(command)}" for command in self.commands),
        ]


def _version(value: str | None) -> Version | None:
    try:
        return Version(value) if value else None
    except InvalidVersion:
        return None


def _last_reproduced(stored: Iterable[Record], forms: set[str]) -> Record | None:
    """The stored REPRODUCED run (of the same forms) with the newest DeepSpeed release."""
    best: tuple[Version, Record] | None = None
    for record in stored:
        if record.outcome != Outcome.REPRODUCED.value or record.form not in forms:
            continue
        version = _version(record.versions.get("deepspeed"))
        if version is not None and (best is None or version > best[0]):
            best = (version, record)
    return best[1] if best else None


def next_step(
    records: Sequence[Record],
    *,
    repro: str,
    expected: str | None,
    stored: Iterable[Record],
    rerun: Sequence[str],
    pins: Mapping[str, str] = {},
) -> NextStep | None:
    """When no run reproduced the expected signature: where it last did and what to run there.

    ``stored`` are earlier records of the repro (the user's own measurements come first); the packaged
    known signature's ``reproduced_on`` is the fallback. ``rerun``: the words that re-run this repro, arguments to
    follow (``util.invocation.rerun_head``: nox's session in a checkout, ``reprobisect repro NAME`` installed).
    """
    if not expected or not records or any(r.outcome == Outcome.REPRODUCED.value for r in records):
        return None
    here = records[0].versions.get("deepspeed") or str(records[0].cell.get("packages", {}).get("deepspeed", "?"))
    unapplied = sorted({r.fix for r in records if r.signature and r.signature.exception == PATCH_ERROR})
    failing = sorted({known_name(r) or r.signature.id for r in records if r.signature and r.fix not in unapplied})
    seen = f"; the runs here fail with {', '.join(failing)}" if failing else ""
    if unapplied:  # not a failure: the fix was never tried here
        seen += f"; not run: {', '.join(unapplied)} (the patch does not apply to this release)"
    head = f"Not reproduced: no run on deepspeed {here} failed with the report's signature {expected}{seen}."
    extra = [word for axis, value in pins.items() if axis != "deepspeed" for word in (f"--{axis}", value)]
    last = _last_reproduced(stored, {r.form for r in records})
    release: str | None
    if last is not None:
        release = last.versions["deepspeed"]
        source = f"your records ({last.cell.get('id')} · {last.form} · {last.fix})"
    else:
        entry = _known_by_name().get(expected)
        release = entry.reproduced_on.get("deepspeed") if entry is not None else None
        source = "the known signatures' record of it"
    if release is None:
        return NextStep(
            reason=f"{head} No stored record reproduces it; look across releases:",
            commands=(
                command_line(
                    rerun_words("matrix", ["matrix"], ["--repro", repro, "--deepspeed", ">=0.16,<0.20", *extra])
                ),
            ),
        )
    bisect = ["--repro", repro, "--axis", "deepspeed", "--good", here, "--bad", release, *extra, "--all-transitions"]
    return NextStep(
        reason=f"{head} It last reproduced on deepspeed {release} ({source}). Next:",
        commands=(
            command_line([*rerun, "--deepspeed", release, *extra]),
            command_line(rerun_words("bisect", ["bisect"], bisect)),
        ),
    )
