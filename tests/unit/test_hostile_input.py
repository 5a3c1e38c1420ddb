"""Property-based attacks on what the harness reads from runs and from disk (issue #16): event lines and
record files. Whatever the bytes, no exception but the documented one escapes, and nothing untyped is kept."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reprobisect.errors import RecordError
from reprobisect.model.classify import classify
from reprobisect.model.outcome import Outcome
from reprobisect.model.record import Record
from reprobisect.model.signature import last_traceback
from reprobisect.run.events import EVENT_MARK, read_events

RECORD = next((Path(__file__).parents[1] / "resources" / "records" / "baseline" / "records").rglob("*__r0.json"))

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=20,
)
events = st.fixed_dictionaries(
    {"event": st.sampled_from(["step", "setup", "config", "training", "exit", "other"])},
    optional={k: json_values for k in ("step", "seconds", "ok", "versions", "gpu", "python", "peak_rss_bytes")},
)


def _line(event: object) -> str:
    return EVENT_MARK + json.dumps(event)  # NaN and infinities are written the non-standard way on purpose


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(events | json_values, max_size=20), st.text(max_size=200))
def test_any_event_lines_give_typed_events(lines: list[object], noise: str) -> None:
    log = "\n".join([noise, *map(_line, lines), EVENT_MARK + noise])
    parsed = read_events(log)
    for step in parsed.steps:
        assert isinstance(step.step, int) and not isinstance(step.step, bool)
        assert math.isfinite(step.seconds) and step.seconds >= 0 and isinstance(step.ok, bool)
    assert parsed.setup_seconds is None or math.isfinite(parsed.setup_seconds)
    assert parsed.exit.versions is None or all(isinstance(v, str) for v in parsed.exit.versions.values())
    assert parsed.exit.peak_rss_bytes is None or isinstance(parsed.exit.peak_rss_bytes, int)
    json.dumps(parsed.config, allow_nan=False)  # the config a record keeps is standard JSON
    json.dumps(parsed.training, allow_nan=False)  # and so is a repro's training verdict


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=2000), st.sampled_from([0, 1, 3, -11, -9, 137, 139]))
def test_no_failing_run_is_a_pass_whatever_it_printed(log: str, exit_code: int) -> None:
    verdict = classify(exit_code=exit_code, timed_out=False, log=log, expected="zero-ipg-buffer-none")
    assert (verdict.outcome is Outcome.PASS) == (exit_code == 0)
    if exit_code < 0:
        assert verdict.outcome is Outcome.CRASH


def test_deep_and_huge_lines_are_ignored() -> None:
    log = "\n".join(
        [
            EVENT_MARK + "[" * 200_000 + "]" * 200_000,
            EVENT_MARK + '{"event": "config", "deep": ' + "[" * 600 + "]" * 600 + "}",
            EVENT_MARK + '{"event": "step", "step": 0, "seconds": 1e999}',
            EVENT_MARK + '{"event": "step", "step": 1, "seconds": NaN}',
        ]
    )
    parsed = read_events(log)
    assert parsed.steps == [] and parsed.config == {} and parsed.ignored == 4


def test_a_training_verdict_is_kept_when_plain_and_dropped_when_not() -> None:
    good = {"trains": False, "deviation_D": 2.82, "loss_scale_D": None, "problems": ["D's losses deviate 282%"]}
    log = "\n".join(
        [
            EVENT_MARK + json.dumps({"event": "training", "trains": True, "nested": {"a": 1}}),  # not plain: dropped
            EVENT_MARK + json.dumps({"event": "training", **good}),
            EVENT_MARK + json.dumps({"event": "training", "trains": True}),  # the first valid one wins
        ]
    )
    parsed = read_events(log)
    assert parsed.training == good and parsed.ignored == 2


def test_the_traceback_scan_is_linear_in_the_number_of_heads() -> None:
    # 20k unfinished "Traceback" heads, then one real traceback: each block is read up to the next head only
    heads = 'Traceback (most recent call last):\n  File "/x.py", line 1, in f\n' * 20_000
    parsed = last_traceback(heads + 'Traceback (most recent call last):\n  File "/x.py", line 2, in g\nValueError: v\n')
    assert parsed is not None and parsed.exception == "ValueError"


WRONG_TYPES = [
    ("exit_code", "0"),
    ("fix", ["none"]),
    ("repeat", "0"),
    ("timed_out", "no"),
    ("wall_seconds", "1.5"),
    ("steps", [{"step": "0", "seconds": 1.0, "ok": True}]),
    ("steps", [{"step": 0, "seconds": 1.0}]),
    ("versions", {"torch": 2}),
    ("signature", "boom"),
    ("cell", ["id"]),
    ("peak_rss_bytes", 1.5),
    ("step_median_seconds", "NaN"),
    ("outcome", None),
]


@pytest.mark.parametrize(("field", "value"), WRONG_TYPES)
def test_a_record_with_a_wrong_typed_field_is_named_and_refused(tmp_path: Path, field: str, value: object) -> None:
    data = json.loads(RECORD.read_text())
    data[field] = value
    path = tmp_path / "forged.json"
    path.write_text(json.dumps(data))
    with pytest.raises(RecordError, match=re.escape(f"forged.json: field '{field}'")):
        Record.load(path)


def test_nan_in_a_record_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "nan.json"
    path.write_text(RECORD.read_text().replace('"wall_seconds": ', '"wall_seconds": NaN, "x": ', 1))
    with pytest.raises(RecordError, match=r"nan\.json"):
        Record.load(path)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(sorted(json.loads(RECORD.read_text()))), json_values, max_size=6))
def test_any_record_file_loads_or_raises_record_error(tmp_path_factory: pytest.TempPathFactory, changes: dict) -> None:
    data = {**json.loads(RECORD.read_text()), **changes}
    path = tmp_path_factory.mktemp("fuzz") / "record.json"
    path.write_text(json.dumps(data))
    try:
        record = Record.load(path)
    except RecordError:
        return
    json.loads(record.to_json())  # what loads, writes back as standard JSON


@pytest.mark.parametrize(
    "payload",
    [
        {"event": "op", "name": "fused_adam", "key": "../../etc", "built": False, "seconds": 0.1},
        {"event": "op", "name": "fused_adam", "key": "a" * 65, "built": False, "seconds": 0.1},
        {"event": "op", "name": "x\u001b[2J", "key": "abc", "built": True, "seconds": 0.1},
        {"event": "op", "name": "fused_adam", "key": "abc", "built": "yes", "seconds": 0.1},
        {"event": "op", "name": "fused_adam", "key": "abc", "built": True, "seconds": -1},
        {"event": "op", "name": ["fused_adam"], "key": "abc", "built": True, "seconds": 1},
    ],
)
def test_a_forged_op_event_is_ignored_and_counted(payload: dict[str, object]) -> None:
    """The op cache's events (issue #18) come from inside the run: a path as key, a control character, a wrong
    type or a negative time is no op the record may name."""
    events = read_events("@@repro " + json.dumps(payload) + "\n")
    assert events.ops == [] and events.ignored == 1


def test_op_events_are_kept_within_a_bound() -> None:
    line = json.dumps({"event": "op", "name": "fused_adam", "key": "abc123", "built": False, "seconds": 0.001})
    events = read_events(("@@repro " + line + "\n") * 1000)
    assert len(events.ops) == 64 and events.ops[0] == {
        "name": "fused_adam",
        "key": "abc123",
        "built": False,
        "seconds": 0.001,
    }
