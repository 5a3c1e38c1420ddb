"""Fails from DeepSpeed 0.16.5 on, passes before: a planted transition that costs no import of torch.

The Slurm tests run it in three cells (0.16.4, 0.16.5, 0.16.6) through the engine and locally, and bisect it.
With ``GATE_HOLD=PATH`` (``--env``, ``--no-sandbox``) the first run to find no file at PATH creates it and sleeps,
so a test can lose that job mid-run; a requeued run finds the file and goes on at once.
"""

import importlib.metadata
import os
import time

hold = os.environ.get("GATE_HOLD")
if hold and not os.path.exists(hold):
    with open(hold, "w") as mark:
        mark.write(str(os.getpid()))
    time.sleep(600)
version = tuple(int(part) for part in importlib.metadata.version("deepspeed").split(".")[:3])
if version >= (0, 16, 5):
    raise RuntimeError(f"gate closed from 0.16.5 on (deepspeed {'.'.join(map(str, version))})")
print("gate open")
