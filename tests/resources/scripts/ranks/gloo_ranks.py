"""Ranks that talk through torch.distributed (gloo, the CPU), started by the harness's launcher from torchrun's
variables. Each step all-reduces a tensor. ``--fail-rank K --fail-step S``: rank K raises at step S (the others
then wait in the collective until the launcher stops them). ``--hang-rank K``: rank K sleeps forever at step 1,
so every rank hangs (the harness's timeout must end the run). Every rank prints its own step events.
"""

import argparse
import json
import os
import time

import torch
import torch.distributed as dist

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=3)
parser.add_argument("--fail-rank", type=int, default=-1)
parser.add_argument("--fail-step", type=int, default=1)
parser.add_argument("--hang-rank", type=int, default=-1)
args = parser.parse_args()

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
print(f"rank {rank} of {world} (LOCAL_RANK {os.environ['LOCAL_RANK']})", flush=True)
for step in range(args.steps):
    start = time.perf_counter()
    ok = False
    try:
        if rank == args.fail_rank and step == args.fail_step:
            raise ValueError(f"rank {rank} cannot go on at step {step}")
        if rank == args.hang_rank and step == 1:
            time.sleep(3600)
        total = torch.ones(1) * (rank + 1)
        dist.all_reduce(total)
        assert total.item() == world * (world + 1) / 2
        ok = True
    finally:
        event = {"event": "step", "step": step, "seconds": time.perf_counter() - start, "ok": ok}
        print("@@repro " + json.dumps(event), flush=True)
dist.destroy_process_group()
