"""Where records and logs live, written atomically the moment a run ends.

Layout under the output folder (``reports/`` by default)::

    records/<repro>/<cell id>/<form>__<fix>__r<repeat>.json
    logs/<repro>/<cell id>/<form>__<fix>__r<repeat>__<run id>.log

A record is written to a temporary file in the same folder, flushed, fsynced and renamed into place,
so a crash or Ctrl-C leaves either the old record or the new one, never half of one.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator
from pathlib import Path

from reprobisect.errors import RecordError, StorageError
from reprobisect.model.outcome import Outcome
from reprobisect.model.record import MAX_RECORD_BYTES, SCHEMA_VERSION, Record
from reprobisect.util.files import write_atomic
from reprobisect.util.safe_read import UnsafeFileError, load_json_file

__all__ = ["Store"]


def _schema_of(path: Path) -> int | None:
    """The schema_version of the record file at ``path``, None when there is none or it cannot be read (a FIFO
    planted there is not waited on: ``util.safe_read``)."""
    if not os.path.lexists(path):
        return None
    try:
        version = load_json_file(path, root=path.parent, max_bytes=MAX_RECORD_BYTES).get("schema_version")
    except (UnsafeFileError, AttributeError):
        return None
    return version if isinstance(version, int) and not isinstance(version, bool) else None


class Store:
    """Records and logs of runs under one output folder."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()

    def _stem(self, repro: str, cell_id: str, form: str, fix: str, repeat: int) -> Path:
        """``repro/cell/form__fix__rN``: each part one plain name, so no record or log lands outside the
        root (a record from elsewhere may name anything; the config's names are checked earlier)."""
        for kind, name in (("repro", repro), ("cell id", cell_id), ("form", form), ("fix", fix)):
            if not name or "/" in name or "\\" in name or "\0" in name or name in (".", "..") or name.startswith("-"):
                msg = f"{self.root}: a record's {kind} {name[:80]!r} is not a plain file name; not written"
                raise StorageError(msg)
        return Path(repro) / cell_id / f"{form}__{fix}__r{repeat}"

    def record_path(self, repro: str, cell_id: str, form: str, fix: str, repeat: int = 0) -> Path:
        """Where the record of this run lives (the suffix added, never swapped: fix names may hold dots)."""
        stem = self._stem(repro, cell_id, form, fix, repeat)
        return self.root / "records" / stem.with_name(f"{stem.name}.json")

    def log_path(self, repro: str, cell_id: str, form: str, fix: str, repeat: int, run_id: str) -> Path:
        """Where the log of this run lives: one file per run, so concurrent harnesses never share one."""
        stem = self._stem(repro, cell_id, form, fix, repeat)
        return self.root / "logs" / stem.with_name(f"{stem.name}__{run_id}.log")

    def write(self, record: Record) -> Path:
        """Write ``record`` atomically and return its path.

        A record of a newer schema at that path is left alone (StorageError): an older harness must not
        overwrite what a newer one wrote and that it cannot read.
        """
        path = self.record_path(record.repro, record.cell["id"], record.form, record.fix, record.repeat)
        newer = _schema_of(path)
        if newer is not None and newer > SCHEMA_VERSION:
            msg = (
                f"{path}: holds a record of schema {newer}, newer than this harness's {SCHEMA_VERSION}; "
                "update the harness or write to another --out"
            )
            raise StorageError(msg)
        return write_atomic(path, record.to_json(), what="this record")

    def find(self, spec_key: str, repro: str, cell_id: str, form: str, fix: str, repeat: int = 0) -> Record | None:
        """The stored record of exactly this run (same inputs), or None; None too where the record is an
        ENV_ERROR (a port taken by another run, a cell that broke): no verdict on the bug, so a re-run retries it."""
        path = self.record_path(repro, cell_id, form, fix, repeat)
        if not path.is_file():
            return None
        try:
            record = Record.load(path, root=self.root)
        except RecordError as exc:
            warnings.warn(f"ignoring {exc}", stacklevel=2)
            return None
        if record.outcome == Outcome.ENV_ERROR:
            return None
        return record if record.spec_key == spec_key else None

    def iter_records(self, repro: str | None = None) -> Iterator[Record]:
        """Every readable record (of one repro, or all); unreadable files are skipped with a warning."""
        base = self.root / "records"
        pattern = f"{repro}/*/*.json" if repro else "*/*/*.json"
        for path in sorted(base.glob(pattern)):
            try:
                yield Record.load(path, root=self.root)
            except RecordError as exc:
                warnings.warn(f"skipping {exc}", stacklevel=2)
