"""Issue #39: claims a GPU peak of 80,000,000,000 bytes (and a tiny RSS) on a machine without a GPU, then leaves
before the bootstrap's own report."""

import json
import os

claim = {"event": "exit", "peak_rss_bytes": 1024, "gpu": {"peak_memory_bytes": 80_000_000_000}}
print("@@repro " + json.dumps(claim), flush=True)
os._exit(0)
