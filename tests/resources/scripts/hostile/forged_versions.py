"""Passes, after claiming (in an exit event of its own, then leaving without the bootstrap's) another pip."""
import json
import os
import sys

print("@@repro " + json.dumps({"event": "exit", "versions": {"pip": "0.0.1", "deepspeed": "0.0.1"}}), flush=True)
sys.stdout.flush()
os._exit(0)  # the bootstrap's own exit event never comes
