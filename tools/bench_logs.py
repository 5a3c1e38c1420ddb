"""Figures for hostile logs (issue #16): the harness's log handling is linear and bounded.

Run: ``python tools/bench_logs.py`` (in a venv with the harness, e.g. ``.nox/tests/bin/python``). Prints, for
each kind of log, its size and how long the capped log, the classifier and the event reader take on it.
"""

from __future__ import annotations

import io
import time

from reprobisect.model.classify import classify
from reprobisect.run.child_process import EVENT_MARK, _CappedLog
from reprobisect.run.events import read_events

MIB = 2**20
HEAD = "Traceback (most recent call last):\n"
FRAME = '  File "/v/site-packages/deepspeed/runtime/engine.py", line 1976, in backward\n    x()\n'
END = "TypeError: 'NoneType' object is not subscriptable\n"


def _logs() -> dict[str, str]:
    block = HEAD + FRAME * 3
    return {
        "10 MiB of unfinished tracebacks, then one": block * (10 * MIB // len(block)) + HEAD + FRAME + END,
        "10 MiB of one line": "x" * (10 * MIB) + "\n" + HEAD + FRAME + END,
        "10 MiB of event lines": (EVENT_MARK + '{"event": "step", "step": 1, "seconds": 0.1}\n') * (10 * MIB // 52),
        "10 MiB of ordinary output": "step 1 loss 0.25 lr 1e-3\n" * (10 * MIB // 25) + HEAD + FRAME + END,
    }


def _capped(size: int, newline: bool) -> float:
    chunk = (b"x" * 1023 + (b"\n" if newline else b"x")) * 64
    log = _CappedLog(io.BytesIO(), 8 * MIB, 2 * MIB)
    start = time.perf_counter()
    for _ in range(size // len(chunk)):
        log.feed(chunk)
    log.close()
    return time.perf_counter() - start


def main() -> None:
    print(f"{'log':45} {'MiB':>6} {'classify s':>11} {'events s':>9}")
    for name, log in _logs().items():
        start = time.perf_counter()
        verdict = classify(exit_code=1, timed_out=False, log=log, expected="zero-ipg-buffer-none")
        classified = time.perf_counter() - start
        start = time.perf_counter()
        read_events(log)
        events = time.perf_counter() - start
        print(f"{name:45} {len(log) / MIB:6.1f} {classified:11.3f} {events:9.3f}  ({verdict.outcome.value})")
    for newline in (True, False):
        what = "with newlines" if newline else "without a newline"
        print(f"capped log, 68 MiB {what:27} {_capped(68 * MIB, newline):6.2f} s")


if __name__ == "__main__":
    main()
