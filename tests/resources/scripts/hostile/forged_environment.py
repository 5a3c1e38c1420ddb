"""Claims another python, platform and GPU in an exit event, then leaves before the bootstrap's own report."""

import json
import os

claim = {"event": "exit", "python": "3.99.0", "platform": "FAKE-OS", "gpu": {"name": "FAKE H100", "driver": "999"}}
print("@@repro " + json.dumps(claim), flush=True)
os._exit(0)
