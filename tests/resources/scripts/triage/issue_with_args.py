"""A script as pasted into an issue: it needs its own arguments (``--steps N``) and fails on DeepSpeed >= 0.17
unless one of four workarounds is in place, one of each kind a maintainer tries from the command line:
an argument (``--safe``), an environment variable (``ISSUE_WORKAROUND=1``), a patch to DeepSpeed (one that sets
``deepspeed.constants.ISSUE_FIXED``), or an older DeepSpeed (an override). It imports the real torch and deepspeed.
"""

import argparse
import json
import os

import deepspeed
import deepspeed.constants
import torch
from packaging.version import Version

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, required=True)
parser.add_argument("--safe", action="store_true")
args = parser.parse_args()

workarounds = {
    "args": args.safe,
    "env": os.environ.get("ISSUE_WORKAROUND") == "1",
    "patch": getattr(deepspeed.constants, "ISSUE_FIXED", False),
    "older": Version(deepspeed.__version__) < Version("0.17"),
}
print("@@repro " + json.dumps({"event": "config", "deepspeed": deepspeed.__version__, **workarounds}), flush=True)
for step in range(args.steps):
    x = torch.ones(4) * step
    if not any(workarounds.values()):
        raise RuntimeError(f"issue 1234: step {step} diverged with deepspeed {deepspeed.__version__}")
    print("@@repro " + json.dumps({"event": "step", "step": step, "seconds": 0.001, "ok": True}), flush=True)
