"""Passes, after printing every kind of malformed @@repro event line (issue #16)."""

import json
import sys

bad = [
    '{"event": "step", "seconds": 0.1}',  # no step
    '{"event": "step", "step": "3", "seconds": "fast", "ok": "yes"}',  # wrong types
    '{"event": "step", "step": 1, "seconds": 1e999}',  # infinity by overflow
    '{"event": "step", "step": 2, "seconds": NaN}',
    '{"event": "setup", "seconds": -Infinity}',
    "[" * 200_000 + "]" * 200_000,  # nested far too deep
    '{"event": "config", "deep": ' + "[" * 600 + "]" * 600 + "}",
    '{"event": "exit", "versions": {"torch": 1}, "peak_rss_bytes": "lots", "gpu": {"name": ["x"]}, "python": 3}',
    '{"event": "step", "step": true, "seconds": 0.1}',
    "not json at all",
]
for line in bad:
    print("@@repro " + line, flush=True)
print("@@repro " + json.dumps({"event": "step", "step": 0, "seconds": 0.01, "ok": True}), flush=True)
sys.exit(0)
