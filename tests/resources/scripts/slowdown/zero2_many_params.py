"""ZeRO-2 bf16 on a model of many small parameter tensors: one step's time, as a user timing an upgrade reports it.

DeepSpeed 0.18.5 and 0.18.6 made every step of such a model several times slower (issue #7885, "Training with
Zero-2 slow down a lot from v0.18.4 to v0.18.5"): PR #7780 counted the parameters used in backward inside every
gradient hook, work that grows with the square of the parameter tensors; PR #7886 (0.18.7) counts once per
backward phase. 64 Linear(16, 16) layers are 128 parameter tensors: the step is a few milliseconds of real work, so
the per-hook cost shows on the CPU of one process. Runs on the CPU (DS_ACCELERATOR=cpu, gloo) or a GPU. Prints
one ``@@repro`` step event per step (instruments.py, the harness's ``--instruments``); exits 0 when every step ran.
"""

import argparse
import os
import socket

import deepspeed
import instruments
import torch
from deepspeed.accelerator import get_accelerator
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=40)
parser.add_argument("--layers", type=int, default=64)
parser.add_argument("--width", type=int, default=16)
args = parser.parse_args()

for name, value in {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1"}.items():
    os.environ.setdefault(name, value)
if "MASTER_PORT" not in os.environ:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        os.environ["MASTER_PORT"] = str(s.getsockname()[1])

accelerator = get_accelerator()
deepspeed.init_distributed(dist_backend=accelerator.communication_backend_name())
device = torch.device(accelerator.current_device_name())
print(f"deepspeed {deepspeed.__version__}, torch {torch.__version__}, device {device}", flush=True)

torch.manual_seed(0)
model = nn.Sequential(*[nn.Linear(args.width, args.width) for _ in range(args.layers)])
config = {
    "train_micro_batch_size_per_gpu": 4,
    "bf16": {"enabled": True},
    "zero_optimization": {"stage": 2},
    "zero_allow_untested_optimizer": True,
    "steps_per_print": 10**9,
}
optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
engine, *_ = deepspeed.initialize(model=model, optimizer=optimizer, config=config)
x = torch.randn(4, args.width, device=device, dtype=torch.bfloat16)
instruments.setup_done()
for i in range(args.steps):
    with instruments.step(i):
        loss = engine(x).float().pow(2).mean()
        engine.backward(loss)
        engine.step()
print("done", flush=True)
