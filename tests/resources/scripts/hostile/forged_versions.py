"""Passes, after claiming (in an exit event of its own, then leaving without the bootstrap's) another pip:
the version given as its argument, else 0.0.1."""

import json
import os
import sys

pip = sys.argv[1] if len(sys.argv) > 1 else "0.0.1"
print("@@repro " + json.dumps({"event": "exit", "versions": {"pip": pip, "deepspeed": "0.0.1"}}), flush=True)
sys.stdout.flush()
os._exit(0)  # the bootstrap's own exit event never comes
