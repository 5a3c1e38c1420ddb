"""Floods its output (far past the log cap), prints one step event in the middle, then fails."""

import json
import sys

line = "x" * 1023 + "\n"
for i in range(40 * 1024):  # 40 MiB
    sys.stdout.write(line)
    if i == 20 * 1024:
        print("@@repro " + json.dumps({"event": "step", "step": 0, "seconds": 0.01, "ok": True}), flush=True)
raise RuntimeError("after the flood")
