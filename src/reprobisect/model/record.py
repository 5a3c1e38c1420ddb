"""One JSON record per run: what ran, where, with which versions, and what happened.

Records are schema-versioned; loading a record of another version or a truncated one raises a
RecordError that names the file and says what to do.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import types
import typing
from pathlib import Path
from typing import Any

from reprobisect.errors import RecordError
from reprobisect.model.signature import Signature
from reprobisect.util.safe_read import UnsafeFileError, parse_json, read_bounded

__all__ = ["MAX_RECORD_BYTES", "SCHEMA_VERSION", "Record", "StepTime", "warm_up_steps"]

SCHEMA_VERSION = 1
MAX_RECORD_BYTES = 16 * 1024 * 1024  # a record is a few KiB; a larger "record" is not one


def warm_up_steps(count: int) -> int:
    """How many leading steps of a run of ``count`` steps are warm-up, left out of every step-time figure.

    The first tenth, at least one. One step is not enough on a GPU: the CUDA context, cuDNN's autotuning, the
    caching allocator's growth and DeepSpeed's first all-gathers spread over the first few steps, and a
    tiny model's step is short enough for them to move a median by 20-40 % (seen on the H200). A run of up
    to ten steps keeps its old meaning: everything but the first step.
    """
    return max(1, -(-count // 10))


@dataclasses.dataclass(frozen=True, kw_only=True)
class StepTime:
    """Wall time of one training step as the repro measured it."""

    step: int
    seconds: float
    ok: bool


@dataclasses.dataclass(frozen=True, kw_only=True)
class Record:
    """Everything one run produced. ``spec_key`` identifies the run's inputs, for reuse and resume.

    What identifies the run and its verdict is required; what only a run that started can tell (timings,
    exit status, what the run reported about itself) defaults to "not known", so a record of a run that
    never started (``run.prepare.unrun_record``) names only what it knows.
    """

    run_id: str
    spec_key: str
    repro: str
    form: str
    fix: str
    precision: str
    repeat: int
    script: str
    argv: list[str]
    cell: dict[str, Any]
    versions: dict[str, str]
    versions_source: str
    outcome: str
    wall_seconds: float
    log_path: str
    harness_version: str
    python: str | None = None
    platform: str | None = None
    gpu: dict[str, Any] | None = None
    signature: Signature | None = None
    known_signature: str | None = None
    upstream: list[str] = dataclasses.field(default_factory=list)
    exit_code: int | None = None
    timed_out: bool = False
    failing_step: int | str | None = None
    steps: list[StepTime] = dataclasses.field(default_factory=list)
    step_median_seconds: float | None = None
    first_step_seconds: float | None = None
    setup_seconds: float | None = None
    env_seconds: float | None = None
    # measured by the harness, never by the run (run/child_process.py, run/watch.py), each with how; None: not measured
    peak_rss_bytes: int | None = None
    peak_gpu_memory_bytes: int | None = None
    peak_rss_source: str | None = None
    peak_gpu_source: str | None = None
    # what the run printed of its own memory (the bootstrap's exit event): a claim, kept apart, never a figure
    claimed_memory: dict[str, int] = dataclasses.field(default_factory=dict)
    # what the kernel said of the OOM killer's part in a SIGKILL (run/oom.py)
    kill_evidence: str | None = None
    started_at: str = ""
    finished_at: str = ""
    config: dict[str, Any] = dataclasses.field(default_factory=dict)
    fix_kind: str = "args"
    matrix_cell: str | None = None
    sandbox: str = "none"  # how the run was confined (see sandbox.py); "none": unconfined, or before sandboxes
    nproc: int = 1  # ranks the run was started with (run/child/launch.py)
    failed_rank: int | None = None  # with several ranks: the first to fail, whose log gave the signature
    rank_logs: list[str] = dataclasses.field(default_factory=list)  # logs of ranks 1..N-1, relative to the store
    rerun: list[str] = dataclasses.field(default_factory=list)  # the words of a command that re-runs this run
    tests: dict[str, str] = dataclasses.field(default_factory=dict)  # --pytest runs: each test's node id → outcome
    # the repro's own training verdict (the GAN's --check-training: trains, deviations from ddp, loss scales)
    training: dict[str, Any] = dataclasses.field(default_factory=dict)
    schema_version: int = SCHEMA_VERSION

    def to_json(self) -> str:
        """Stable, readable, standard JSON (no NaN or infinities) of a record whose fields have their types."""
        data = dataclasses.asdict(self)
        data["signature"] = self.signature.to_dict() if self.signature is not None else None
        problem = _type_problem(data)
        if problem is not None:
            msg = f"record {self.run_id!r} of {self.repro}/{self.form}/{self.fix}: {problem}; not written"
            raise RecordError(msg)
        return json.dumps(data, indent=2, sort_keys=True, allow_nan=False)

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, source: Path) -> Record:
        """Build a record from parsed JSON; ``source`` names the file in errors."""
        version = data.get("schema_version")
        if version != SCHEMA_VERSION:
            newer = isinstance(version, int) and version > SCHEMA_VERSION
            fix = "update the harness" if newer else "re-run it (records are cheap to remake) or delete it"
            msg = f"{source}: schema_version {version!r}, this harness reads {SCHEMA_VERSION}; {fix}"
            raise RecordError(msg)
        fields = {f.name for f in dataclasses.fields(cls)}
        optional = {
            f.name
            for f in dataclasses.fields(cls)
            if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
        }
        missing = sorted(name for name in fields if name not in data and name not in optional)
        if missing:
            msg = f"{source}: missing key {missing[0]!r}; the file is incomplete, re-run that cell"
            raise RecordError(msg)
        problem = _type_problem(data)
        if problem is not None:
            msg = f"{source}: {problem}; the file was not written by this harness as it is, re-run that cell"
            raise RecordError(msg)
        values = {name: data[name] for name in fields if name in data}
        values.update(_claims_of_older_harness(data))
        if "steps" in data:
            values["steps"] = [StepTime(**step) for step in data["steps"]]
        if data.get("signature") is not None:
            values["signature"] = Signature.from_dict(data["signature"])
        return cls(**values)

    @classmethod
    def load(cls, path: Path, *, root: Path | None = None) -> Record:
        """Read one record file; malformed or truncated files raise RecordError naming the file, and so does a file
        that is no regular file or whose links lead out of ``root`` (the records root; the file's own folder when
        None): a FIFO, a socket, ``/dev/zero`` or a link to a key must neither hang, exhaust nor leak
        (``util.safe_read``)."""
        try:
            raw = read_bounded(path, root=path.parent if root is None else root, max_bytes=MAX_RECORD_BYTES)
        except UnsafeFileError as exc:
            raise RecordError(f"{path}: not read as a record ({exc.why})") from exc
        return cls.parse(raw, source=path)

    @classmethod
    def parse(cls, raw: bytes, *, source: Path) -> Record:
        """A record from its file's bytes (a file, or an archive's member); ``source`` names it in errors."""
        path = source
        try:
            data = parse_json(raw, source=path, parse_constant=_no_constant)
        except UnsafeFileError as exc:
            msg = f"{path}: not a readable JSON record ({exc.why}); it was probably cut short, re-run that cell"
            raise RecordError(msg) from exc
        if not isinstance(data, dict):
            msg = f"{path}: expected a JSON object, got {type(data).__name__}"
            raise RecordError(msg)
        try:
            return cls.from_dict(data, source=path)
        except (TypeError, KeyError) as exc:
            msg = f"{path}: malformed record ({exc})"
            raise RecordError(msg) from exc


_OLD_MEMORY = {"peak_rss_bytes": "peak_rss_bytes", "peak_gpu_memory_bytes": "gpu_peak_memory_bytes"}


def _claims_of_older_harness(data: dict[str, Any]) -> dict[str, Any]:
    """A record written before the harness measured memory itself (it has no ``claimed_memory``) took its peak
    figures from the run's own exit event: they load as the claims they were, and no measured figure."""
    if "claimed_memory" in data:
        return {}
    claims = {claim: data[old] for old, claim in _OLD_MEMORY.items() if isinstance(data.get(old), int)}
    return {"peak_rss_bytes": None, "peak_gpu_memory_bytes": None, "claimed_memory": claims}


def _no_constant(name: str) -> object:
    msg = f"{name} is not standard JSON"
    raise ValueError(msg)


@functools.cache
def _field_types() -> dict[str, Any]:
    hints = typing.get_type_hints(Record)
    return {field.name: hints[field.name] for field in dataclasses.fields(Record)}


_STEP_TYPES = {"step": int, "seconds": float, "ok": bool}


def _conforms(value: object, hint: Any) -> bool:
    """Does a JSON value have the type a record field declares (floats finite, no bool for a number)?"""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return True
    if origin in (typing.Union, types.UnionType):
        return any(_conforms(value, arg) for arg in args)
    if hint is type(None):
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if hint is str:
        return isinstance(value, str)
    if hint is Signature:
        return (
            isinstance(value, dict)
            and all(isinstance(value.get(key), str) for key in ("exception", "message"))
            and all(isinstance(value.get(key, ""), str) for key in ("id", "text"))
            and _conforms(value.get("frames", []), list[str])
        )
    if hint is StepTime:
        return (
            isinstance(value, dict)
            and value.keys() == _STEP_TYPES.keys()
            and all(_conforms(value[key], kind) for key, kind in _STEP_TYPES.items())
        )
    if origin is list:
        return isinstance(value, list) and all(_conforms(item, args[0]) for item in value)
    if origin is dict:
        return isinstance(value, dict) and all(isinstance(k, str) and _conforms(v, args[1]) for k, v in value.items())
    return False


def _type_problem(data: dict[str, Any]) -> str | None:
    """The first field whose value has the wrong type, said so that a person can find it; None when all fit."""
    for name, hint in _field_types().items():
        if name in data and not _conforms(data[name], hint):
            shown = repr(data[name])
            shown = shown if len(shown) <= 80 else shown[:79] + "…"
            kind = str(hint).replace("typing.", "")
            return f"field {name!r} is {shown}, expected {kind}"
    return None
