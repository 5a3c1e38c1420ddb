"""Passes after three steps, printing step timings the way the canonical repros do."""

import json
import time

print("@@repro " + json.dumps({"event": "setup", "seconds": 0.01}), flush=True)
for i in range(3):
    t = time.perf_counter()
    time.sleep(0.01 * (i + 1))
    print(
        "@@repro " + json.dumps({"event": "step", "step": i, "seconds": time.perf_counter() - t, "ok": True}),
        flush=True,
    )
