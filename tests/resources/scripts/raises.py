"""Fails in step 1 with the GAN report's error, raised from a module laid out like DeepSpeed's."""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent / "fakelib"))
from deepspeed.runtime.zero.stage_1_and_2 import reduce_independent_p_g_buckets_and_remove_grads

for i in range(3):
    ok = False
    try:
        if i == 1:
            reduce_independent_p_g_buckets_and_remove_grads(None)
        ok = True
    finally:
        print("@@repro " + json.dumps({"event": "step", "step": i, "seconds": 0.001, "ok": ok}), flush=True)
