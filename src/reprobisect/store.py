"""Where records and logs live, written atomically the moment a run ends.

Layout under the output folder (``reports/`` by default)::

    records/<repro>/<cell id>/<form>__<fix>__r<repeat>.json
    logs/<repro>/<cell id>/<form>__<fix>__r<repeat>__<run id>.log

A record is written to a temporary file in the same folder, flushed, fsynced and renamed into place,
so a crash or Ctrl-C leaves either the old record or the new one, never half of one.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path

from reprobisect.errors import RecordError, StorageError
from reprobisect.record import Record

__all__ = ["Store"]


class Store:
    """Records and logs of runs under one output folder."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()

    def _stem(self, repro: str, cell_id: str, form: str, fix: str, repeat: int) -> Path:
        return Path(repro) / cell_id / f"{form}__{fix}__r{repeat}"

    def record_path(self, repro: str, cell_id: str, form: str, fix: str, repeat: int = 0) -> Path:
        """Where the record of this run lives."""
        return self.root / "records" / self._stem(repro, cell_id, form, fix, repeat).with_suffix(".json")

    def log_path(self, repro: str, cell_id: str, form: str, fix: str, repeat: int, run_id: str) -> Path:
        """Where the log of this run lives: one file per run, so concurrent harnesses never share one."""
        stem = self._stem(repro, cell_id, form, fix, repeat)
        return self.root / "logs" / stem.with_name(f"{stem.name}__{run_id}.log")

    def write(self, record: Record) -> Path:
        """Write ``record`` atomically and return its path."""
        path = self.record_path(record.repro, record.cell["id"], record.form, record.fix, record.repeat)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        except OSError as exc:
            msg = f"{path}: cannot write this record ({exc.strerror or exc}); the records written before it are intact"
            raise StorageError(msg) from exc
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(record.to_json())
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, path)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            msg = f"{path}: cannot write this record ({exc.strerror or exc}); the records written before it are intact"
            raise StorageError(msg) from exc
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        return path

    def find(self, spec_key: str, repro: str, cell_id: str, form: str, fix: str, repeat: int = 0) -> Record | None:
        """The stored record of exactly this run (same inputs), or None."""
        path = self.record_path(repro, cell_id, form, fix, repeat)
        if not path.is_file():
            return None
        try:
            record = Record.load(path)
        except RecordError as exc:
            warnings.warn(f"ignoring {exc}", stacklevel=2)
            return None
        return record if record.spec_key == spec_key else None

    def iter_records(self, repro: str | None = None) -> Iterator[Record]:
        """Every readable record (of one repro, or all); unreadable files are skipped with a warning."""
        base = self.root / "records"
        pattern = f"{repro}/*/*.json" if repro else "*/*/*.json"
        for path in sorted(base.glob(pattern)):
            try:
                yield Record.load(path)
            except RecordError as exc:
                warnings.warn(f"skipping {exc}", stacklevel=2)
