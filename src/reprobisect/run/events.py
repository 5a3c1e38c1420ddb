"""What a run told the harness through its ``@@repro`` event lines, checked field by field.

Event lines come from the run's own process, so they are untrusted: a repro (or anything it imports)
can print any line. Each event is taken only when every field has the type and range it must have;
anything else is counted as ignored and named in the record (``config["ignored_events"]``), never
allowed to crash the harness, reach a record with the wrong type, or change an outcome. What the run
reports about itself (versions, GPU, platform) is a claim, and the record says so.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Iterator, Mapping
from typing import Any

from reprobisect.model.record import StepTime
from reprobisect.model.signature import EVENT_MARK
from reprobisect.run.phases import ChildClock

__all__ = [
    "EVENT_MARK",
    "MAX_EVENT_LINE",
    "ExitReport",
    "RankReport",
    "RunEvents",
    "parse_event",
    "parse_events",
    "read_events",
]

MAX_EVENT_LINE = 64 * 1024  # no honest event line is longer; longer ones are ignored, never parsed

_MAX_TEXT = 200  # a version, a GPU name, a platform string
_MAX_CONFIG_KEYS = 64
_MAX_STEPS = 1_000_000
_MAX_SECONDS = 1e7


@dataclasses.dataclass(frozen=True, kw_only=True)
class ExitReport:
    """What the bootstrap printed at exit, each part None when it was missing or malformed."""

    versions: dict[str, str] | None = None
    python: str | None = None
    platform: str | None = None
    gpu: dict[str, Any] | None = None
    peak_rss_bytes: int | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class RankReport:
    """What the rank launcher (run/child/launch.py) printed last: every rank's exit status, the first to fail."""

    nproc: int
    exit_codes: list[int | None]
    first_failed: int | None


@dataclasses.dataclass(frozen=True, kw_only=True)
class RunEvents:
    """The valid events of one run, in order, and how many lines were ignored."""

    steps: list[StepTime]
    setup_seconds: float | None
    config: dict[str, Any]
    exit: ExitReport
    ignored: int
    ops: list[dict[str, Any]] = dataclasses.field(default_factory=list)  # just-in-time ops: built or cached
    ranks: RankReport | None = None
    tests: dict[str, str] = dataclasses.field(default_factory=dict)  # pytest node id → its outcome (--pytest runs)
    # a repro's own verdict on whether it trained (the GAN's --check-training): plain scalars, as ``config``
    training: dict[str, Any] = dataclasses.field(default_factory=dict)
    # the script's lines that ran (REPROBISECT_TRACE_LINES=1; every rank's together), None when not traced
    lines: frozenset[int] | None = None
    # where the run's own time went (REPROBISECT_PROFILE=1, run/child/phase_clock.py), None when not profiled
    clock: ChildClock | None = None


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and len(value) <= _MAX_TEXT and value.isprintable() else None


def _count(value: object, limit: float) -> int | None:
    ok = isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= limit
    return value if ok else None  # type: ignore[return-value]


def _seconds(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) and 0 <= value <= _MAX_SECONDS else None


_MAX_OPS = 64


def _op(event: Mapping[str, Any]) -> dict[str, Any] | None:
    """An ``op`` event of the op cache (run/child/op_cache.py): which op, its key, built here or taken cached."""
    name, key, built, seconds = event.get("name"), event.get("key"), event.get("built"), event.get("seconds")
    if _text(name) is None or not isinstance(key, str) or not key.isalnum() or len(key) > 64:
        return None
    if not isinstance(built, bool) or _seconds(seconds) is None:
        return None
    return {"name": name, "key": key, "built": built, "seconds": _seconds(seconds)}


_MAX_RANKS = 1024
_MAX_TESTS = 2000
_TEST_OUTCOMES = ("passed", "failed", "skipped", "error")


def _test(event: Mapping[str, Any]) -> tuple[str, str] | None:
    """A ``test`` event of the pytest runner (run/child/pytest_runner.py): a node id and its outcome."""
    nodeid, outcome = event.get("nodeid"), event.get("outcome")
    ok = isinstance(nodeid, str) and 0 < len(nodeid) <= 500 and nodeid.isprintable() and outcome in _TEST_OUTCOMES
    return (nodeid, outcome) if ok else None  # type: ignore[return-value]


def _ranks(event: Mapping[str, Any]) -> RankReport | None:
    """A ``ranks`` event: as many exit statuses as ranks (whole numbers from -64 to 255, or null), and the first
    to fail one of them (or null)."""
    nproc, codes, first = event.get("nproc"), event.get("exit_codes"), event.get("first_failed")
    if _count(nproc, _MAX_RANKS) is None or not isinstance(codes, list) or len(codes) != nproc:
        return None
    if not all(c is None or (isinstance(c, int) and not isinstance(c, bool) and -64 <= c <= 255) for c in codes):
        return None
    if first is not None and (_count(first, _MAX_RANKS) is None or first >= len(codes)):
        return None
    return RankReport(nproc=nproc, exit_codes=codes, first_failed=first)


def _step(event: Mapping[str, Any]) -> StepTime | None:
    step, seconds, ok = _count(event.get("step"), _MAX_STEPS), _seconds(event.get("seconds")), event.get("ok", True)
    if step is None or seconds is None or not isinstance(ok, bool):
        return None
    return StepTime(step=step, seconds=seconds, ok=ok)


def _scalar(value: object) -> object:
    """A config value kept as is when it is a plain scalar (a short string, a finite number, a bool, null)."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value if abs(value) < 2**53 else None
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, str):
        return value[:_MAX_TEXT]
    if isinstance(value, list) and len(value) <= _MAX_CONFIG_KEYS and all(isinstance(v, str) for v in value):
        return [v[:_MAX_TEXT] for v in value]  # e.g. the fixes a repro applied
    return _INVALID


_INVALID = object()


def _config(event: Mapping[str, Any]) -> dict[str, Any] | None:
    if len(event) > _MAX_CONFIG_KEYS:
        return None
    kept = {}
    for key, value in event.items():
        if key == "event":
            continue
        scalar = _scalar(value)
        if _text(key) is None or scalar is _INVALID:
            return None
        kept[key] = scalar
    return kept


def _versions(value: object) -> dict[str, str] | None:
    if not isinstance(value, dict) or len(value) > 1000:
        return None
    pairs = {_text(k): _text(v) for k, v in value.items()}
    return None if None in pairs or None in pairs.values() else pairs  # type: ignore[return-value]


def _gpu(value: object) -> dict[str, Any] | None:
    if not isinstance(value, dict):
        return None
    gpu: dict[str, Any] = {}
    for key in ("name", "driver", "cuda", "capability"):
        if key in value:
            text = _text(value[key])
            if text is None and value[key] is not None:
                return None
            gpu[key] = text
    for key in ("peak_memory_bytes", "total_memory_bytes", "count"):
        if key in value:
            number = _count(value[key], 2**60)
            if number is None:
                return None
            gpu[key] = number
    return gpu


def _exit(event: Mapping[str, Any]) -> ExitReport:
    return ExitReport(
        versions=_versions(event.get("versions")),
        python=_text(event.get("python")),
        platform=_text(event.get("platform")),
        gpu=_gpu(event.get("gpu")),
        peak_rss_bytes=_count(event.get("peak_rss_bytes"), 2**60),
    )


_MAX_EPOCH = 1e11  # seconds since 1970: about the year 5138


def _instant(value: object) -> float | None:
    """Seconds since the epoch, a number between the epoch and ``_MAX_EPOCH``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) and 0 < value < _MAX_EPOCH else None


def _clock(event: Mapping[str, Any]) -> ChildClock | None:
    """A ``profile`` event: four instants and four durations, every one a number in its range."""
    started, script_started, script_ended, reported = (
        _instant(event.get(k)) for k in ("started", "script_started", "script_ended", "reported")
    )
    imports, cuda_init, atexit, report = (_seconds(event.get(k)) for k in ("imports", "cuda_init", "atexit", "report"))
    if started is None or script_started is None or script_ended is None or reported is None:
        return None
    if imports is None or cuda_init is None or atexit is None or report is None:
        return None
    return ChildClock(
        started=started,
        script_started=script_started,
        script_ended=script_ended,
        reported=reported,
        imports=imports,
        cuda_init=cuda_init,
        atexit=atexit,
        report=report,
    )


_MAX_LINE_NUMBER = 1_000_000


def _lines(event: Mapping[str, Any]) -> set[int] | None:
    """The line numbers of a lines event's ``ranges`` ([[first, last], ...], at most a million lines in all)."""
    ranges = event.get("ranges")
    if not isinstance(ranges, list):
        return None
    numbers: set[int] = set()
    total = 0  # the ranges' lengths added up, overlaps counted twice: the bound holds whatever the overlaps
    for pair in ranges:
        if not (isinstance(pair, list) and len(pair) == 2):
            return None
        first, last = (_count(n, _MAX_LINE_NUMBER) for n in pair)
        if first is None or last is None or first > last:
            return None
        total += last - first + 1
        if total > _MAX_LINE_NUMBER:
            return None
        numbers.update(range(first, last + 1))
    return numbers


def read_events(log: str) -> RunEvents:
    """The typed events of a run's log; the last exit event and the first config event win.

    Only a whole line that starts with the marker is an event line: a marker further along a line is the run
    quoting one (``logger.info("@@repro {...}")``), which anything the run imports can do. Every such line that
    does not parse, or parses into an event with a missing or wrong-typed field,
    is counted in ``ignored``.
    """
    steps: list[StepTime] = []
    setup: float | None = None
    config: dict[str, Any] | None = None
    report = ExitReport()
    ignored = 0
    ops: list[dict[str, Any]] = []
    ranks: RankReport | None = None
    tests: dict[str, str] = {}
    training: dict[str, Any] | None = None
    ran: set[int] | None = None
    clock: ChildClock | None = None
    for line in log.splitlines():
        if not line.startswith(EVENT_MARK):
            continue  # the marker quoted inside another line (a log message, a traceback) is no event
        event = parse_event(line.removeprefix(EVENT_MARK)) or {}
        kind = event.get("event")
        if kind == "step" and (step := _step(event)) is not None:
            steps.append(step)
        elif kind == "setup" and setup is None and (seconds := _seconds(event.get("seconds"))) is not None:
            setup = seconds
        elif kind == "config" and config is None and (parsed := _config(event)) is not None:
            config = parsed
        elif kind == "training" and training is None and (parsed := _config(event)) is not None:
            training = parsed
        elif kind == "exit":
            report = _exit(event)
        elif kind == "op" and len(ops) < _MAX_OPS and (op := _op(event)) is not None:
            ops.append(op)
        elif kind == "ranks" and (rank_report := _ranks(event)) is not None:
            ranks = rank_report
        elif kind == "test" and len(tests) < _MAX_TESTS and (test := _test(event)) is not None:
            tests[test[0]] = test[1]
        elif kind == "lines" and (numbers := _lines(event)) is not None:
            ran = (ran or set()) | numbers
        elif kind == "profile" and (parsed_clock := _clock(event)) is not None:
            clock = parsed_clock
        else:
            ignored += 1
    return RunEvents(
        steps=steps,
        setup_seconds=setup,
        config=config or {},
        exit=report,
        ignored=ignored,
        ops=ops,
        ranks=ranks,
        tests=tests,
        training=training or {},
        lines=frozenset(ran) if ran is not None else None,
        clock=clock,
    )


def parse_events(log: str) -> Iterator[dict[str, object]]:
    """The ``@@repro {json}`` lines a repro or the bootstrap printed, in order; malformed ones are skipped, and so
    is a line with the marker anywhere but at its start (the run quoting one, not reporting)."""
    for line in log.splitlines():
        if line.startswith(EVENT_MARK) and (event := parse_event(line.removeprefix(EVENT_MARK))) is not None:
            yield event


def parse_event(payload: str) -> dict[str, object] | None:
    """One event line's JSON object, or None: a line longer than ``MAX_EVENT_LINE``, JSON that is not an
    object, nested too deep to parse, or holding NaN or infinities. The run printed it: it can be anything."""
    if len(payload) > MAX_EVENT_LINE:
        return None
    try:
        event = json.loads(payload, parse_constant=_no_constant, parse_float=_finite)
    except (ValueError, RecursionError):
        return None
    return event if isinstance(event, dict) else None


def _finite(text: str) -> float:
    """A JSON number that fits a float: ``1e999`` overflows to an infinity, refused like ``Infinity``."""
    value = float(text)
    if not math.isfinite(value):
        msg = f"{text[:20]} is not a finite number"
        raise ValueError(msg)
    return value


def _no_constant(name: str) -> object:
    msg = f"{name} is not a JSON number"
    raise ValueError(msg)
