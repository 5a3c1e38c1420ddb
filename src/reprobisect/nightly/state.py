"""The nightly's memory between runs: one folder that a CI workflow carries from night to night.

``<state>/state.json`` names the baseline DeepSpeed release, when it became the baseline, the slice it
was run with, a short history of nights and the folder (``baseline-<release>-<time>/``) that holds the
baseline release's records and logs, laid out like any ``--out`` folder, so that tonight's runs are
compared with real records (outcomes, signatures and step times), not with a summary. Nothing lives only
in memory: a workflow uploads the folder as an artifact and downloads it the next night.

A new baseline is written beside the old one, then ``state.json`` is replaced atomically to name it, and
only then is the old folder removed: a night stopped at any point leaves a state that names a whole folder.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import reprlib
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from reprobisect.errors import ConfigError, StorageError
from reprobisect.model.record import Record
from reprobisect.model.store import Store
from reprobisect.report.archive import ARCHIVE
from reprobisect.util.files import inside, write_atomic
from reprobisect.util.git_names import is_commit_hash, ref_problem
from reprobisect.util.safe_read import UnsafeFileError, load_json_file

__all__ = [
    "HISTORY_KEPT",
    "STATE_SCHEMA",
    "NightlyState",
    "baseline_records",
    "baseline_root",
    "commit_state",
    "copy_runs",
    "load_state",
    "main_root",
    "records_under",
    "save_state",
    "stage_baseline",
]

STATE_SCHEMA = 1
STATE_FILE = "state.json"
BASELINE_DIR = "baseline"
HISTORY_KEPT = 90  # nights; older entries are dropped so the artifact stays small
MAX_STATE_BYTES = 16 * 1024 * 1024  # 90 nights of history are some hundred KiB


@dataclasses.dataclass(frozen=True, kw_only=True)
class NightlyState:
    """What the last night left: the baseline release (None before the first night) and the history."""

    backend: str | None = None
    baseline: str | None = None
    since: str | None = None
    slice: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    history: tuple[Mapping[str, Any], ...] = ()
    baseline_dir: str = BASELINE_DIR
    # DeepSpeed's main as last night ran it: {"commit", "ref", "since", "dir", "clone"}; None before its first night.
    # Its own records folder, beside the release baseline's: main is compared with last night's main, not a release.
    main: Mapping[str, str] | None = None

    def to_json(self) -> str:
        """Stable, readable JSON."""
        data = {"schema": STATE_SCHEMA, **dataclasses.asdict(self), "history": list(self.history)[-HISTORY_KEPT:]}
        return json.dumps(data, indent=2, sort_keys=True) + "\n"


def baseline_root(state_dir: Path, state: NightlyState) -> Path:
    """The records root (``records/``, ``logs/``) of the baseline release."""
    return state_dir / state.baseline_dir


def main_root(state_dir: Path, state: NightlyState) -> Path | None:
    """The records root of last night's main, or None before main's first night."""
    return state_dir / state.main["dir"] if state.main else None


def _main_of(path: Path, state_dir: Path, value: object) -> Mapping[str, str] | None:
    """The state's ``main`` entry, checked: a full commit hash, a ref name git takes, and a folder inside the state.
    Both reach git (the commit is tonight's good end): ``--upload-pack=…`` or ``HEAD~1`` must not
    (``util.git_names``)."""
    if value is None:
        return None
    keys = ("commit", "dir", "clone")
    if not isinstance(value, dict) or not all(isinstance(value.get(k), str) and value.get(k) for k in keys):
        msg = f"{path}: key 'main' must hold {', '.join(keys)} (strings), got {_cut(value)}"
        raise ConfigError(msg)
    if not all(isinstance(v, str) for v in value.values()):
        msg = f"{path}: key 'main' must hold strings only, got {_cut(value)}"
        raise ConfigError(msg)
    if not is_commit_hash(value["commit"]):
        msg = (
            f"{path}: key 'main.commit' is {_cut(value['commit'])}; it must be a full commit hash (40 or 64 hex digits)"
        )
        raise ConfigError(msg)
    problem = ref_problem(value.get("ref", "HEAD"))
    if problem is not None:
        msg = f"{path}: key 'main.ref' is {_cut(value.get('ref'))}; {problem}"
        raise ConfigError(msg)
    if Path(value["dir"]).name != value["dir"] or not (state_dir / value["dir"] / "records").is_dir():
        msg = f"{path}: main's records folder {_cut(value['dir'])} is not in {state_dir}; restore the state whole"
        raise ConfigError(msg)
    return {str(k): str(v) for k, v in value.items()}


def _cut(value: object) -> str:
    """A refused value as an error line shows it: its repr (control characters escaped, big containers abridged),
    cut to 80 characters."""
    shown = reprlib.repr(value)
    return shown if len(shown) <= 80 else shown[:79] + "…"


def _read_state(path: Path, state_dir: Path) -> dict[str, Any]:
    """``state.json`` parsed, of this harness's schema: a FIFO, a device, a link out of the state folder, JSON nested
    100,000 deep or a 5,000-digit number is one ConfigError naming the file (``util.safe_read``)."""
    try:
        data = load_json_file(path, root=state_dir, max_bytes=MAX_STATE_BYTES)
    except UnsafeFileError as exc:
        msg = f"{path}: not readable JSON ({exc.why}); delete the folder to start again from the newest release"
        raise ConfigError(msg) from exc
    if not isinstance(data, dict) or data.get("schema") != STATE_SCHEMA:
        found = data.get("schema") if isinstance(data, dict) else type(data).__name__
        msg = f"{path}: key 'schema' is {_cut(found)}, this harness reads {STATE_SCHEMA}"
        raise ConfigError(msg)
    for key, kinds, right in _STATE_KEYS:
        if not isinstance(data.get(key), kinds):
            msg = f"{path}: key {key!r} is {_cut(data.get(key))}; it must be {right}"
            raise ConfigError(msg)
    return data


_STATE_KEYS = (
    ("backend", (str, type(None)), "a backend name or null"),
    ("since", (str, type(None)), "a time or null"),
    ("slice", (dict, type(None)), "an object or null"),
    ("history", (list, type(None)), "a list or null"),
)


def _baseline_of(path: Path, value: object) -> str | None:
    """The baseline release, or None before the first night: a version as written (it is compared as one, named in
    pip specs and in the issue's title), so no space, newline or option around it."""
    if value is None:
        return None
    if isinstance(value, str) and len(value) <= 80 and value == value.strip():
        try:
            Version(value)
        except InvalidVersion:
            pass
        else:
            return value
    msg = f"{path}: key 'baseline' is {_cut(value)}; it must be a release such as 0.16.4, or null"
    raise ConfigError(msg)


def load_state(state_dir: Path) -> NightlyState:
    """The state in ``state_dir``; an empty state when there is none yet (the first night)."""
    path = state_dir / STATE_FILE
    if not os.path.lexists(path):  # a dangling link is no first night: it is refused as unreadable
        return NightlyState()
    data = _read_state(path, state_dir)
    baseline, folder = _baseline_of(path, data.get("baseline")), data.get("baseline_dir", BASELINE_DIR)
    if not isinstance(folder, str) or not folder or Path(folder).name != folder:
        msg = f"{path}: key 'baseline_dir' must name a folder inside {state_dir}, got {_cut(folder)}"
        raise ConfigError(msg)
    state = NightlyState(
        backend=data.get("backend"),
        baseline=baseline,
        since=data.get("since"),
        slice=data.get("slice") or {},
        history=tuple(h for h in data.get("history") or [] if isinstance(h, dict)),
        baseline_dir=folder,
        main=_main_of(path, state_dir, data.get("main")),
    )
    packed = baseline_root(state_dir, state) / ARCHIVE
    if baseline is not None and not (packed.parent / "records").is_dir() and packed.is_file():
        msg = (
            f"{path}: the baseline's records are packed in {packed} (tools/pack_evidence.py, committed evidence); "
            f"to run another night from this state, unpack it first: tar -xJf {packed} -C {packed.parent}"
        )
        raise ConfigError(msg)
    if baseline is not None and not (baseline_root(state_dir, state) / "records").is_dir():
        msg = (
            f"{path}: baseline {baseline} but no records under {baseline_root(state_dir, state) / 'records'}; "
            "the state folder is incomplete: restore it whole, or re-seed with --baseline-release"
        )
        raise ConfigError(msg)
    return state


def _write_atomic(path: Path, text: str) -> None:
    write_atomic(path, text, what="the nightly state")


def save_state(state_dir: Path, state: NightlyState) -> Path:
    """Write ``state.json`` atomically; returns its path."""
    path = state_dir / STATE_FILE
    _write_atomic(path, state.to_json())
    return path


def copy_runs(records: Iterable[Record], source_root: Path, dest_root: Path) -> None:
    """Copy the record files (and their logs, when present) of ``records`` from one records root to another."""
    for record in records:
        stored = Store(source_root).record_path(record.repro, record.cell["id"], record.form, record.fix, record.repeat)
        logs = [Path(record.log_path)] if inside(source_root, record.log_path) else []  # never a file outside
        for rel in (stored.relative_to(source_root.resolve()), *logs):
            src = source_root.resolve() / rel
            if src.is_file() and src.resolve() != (dest_root / rel).resolve():
                (dest_root / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, dest_root / rel)


def stage_baseline(state_dir: Path, records: Iterable[Record], source_root: Path, release: str) -> str:
    """Copy ``records`` (stored under ``source_root``) into a new baseline folder beside the current one.

    Returns the folder's name, for ``state.json``; nothing names it until ``commit_state`` does.
    """
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%S%f")
    name = f"{BASELINE_DIR}-{release}-{stamp}"
    staging = state_dir / f".{name}.tmp"
    try:
        staging.mkdir(parents=True)
        copy_runs(records, source_root, staging)
        (staging / "records").mkdir(exist_ok=True)  # a slice whose every run was unrunnable still has a folder
        staging.rename(state_dir / name)
    except OSError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        msg = f"{state_dir}: cannot write the new baseline's records ({exc.strerror or exc}); the state is intact"
        raise StorageError(msg) from exc
    return name


def commit_state(state_dir: Path, state: NightlyState) -> Path:
    """Write ``state.json`` (atomically), then remove every baseline folder it no longer names (the release's and
    main's are both kept)."""
    path = save_state(state_dir, state)
    named = {state.baseline_dir, *([state.main["dir"]] if state.main else [])}
    for folder in state_dir.iterdir():
        stale = folder.name.startswith((BASELINE_DIR, f".{BASELINE_DIR}")) and folder.name not in named
        if folder.is_dir() and stale:
            shutil.rmtree(folder, ignore_errors=True)
    return path


def baseline_records(state_dir: Path, state: NightlyState) -> list[Record]:
    """Every record of the baseline; an unreadable one raises RecordError naming the file."""
    return records_under(baseline_root(state_dir, state))


def records_under(root: Path) -> list[Record]:
    """Every record of a records root (``root/records``); an unreadable one raises RecordError naming the file."""
    files = sorted((root / "records").rglob("*.json"))
    return [Record.load(path, root=root) for path in files if not path.name.startswith(".")]
