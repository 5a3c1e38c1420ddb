"""DeepSpeed #7885: "Training with Zero-2 slow down a lot from v0.18.4 to v0.18.5 / v0.18.6."

The report holds no code (its ds_report only), so this is the training it describes, cut to where the time goes:
ZeRO-2 in bf16, one process, a model of many small parameter tensors. PR #7780 (0.18.5) counted the parameters
used in backward inside every gradient hook, work that grows with the square of the parameter tensors ("for a
model with n parameter tensors, this creates significant overhead per backward pass", PR #7886, which mended it
in 0.18.7 by counting once per backward phase). 64 Linear(16, 16) layers are 128 tensors: a step of a few
milliseconds of real work, so the cost of every hook shows even on the CPU (DS_ACCELERATOR=cpu, gloo).

It times each step as a user timing an upgrade would, through ``instruments.step`` (one ``@@repro`` line a step:
the harness's ``--instruments``; tools/corpus_truth.py puts the same file beside it) and exits 0: the bug is the
time, not a failure.
"""

import os
import socket

import deepspeed
import instruments
import torch
from deepspeed.accelerator import get_accelerator
from torch import nn

for name, value in {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1"}.items():
    os.environ.setdefault(name, value)
if "MASTER_PORT" not in os.environ:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        os.environ["MASTER_PORT"] = str(s.getsockname()[1])

accelerator = get_accelerator()
deepspeed.init_distributed(dist_backend=accelerator.communication_backend_name())
device = torch.device(accelerator.current_device_name())

torch.set_num_threads(1)  # a step of tiny matmuls: time DeepSpeed's work, not a thread pool's on a shared machine
torch.manual_seed(0)
model = nn.Sequential(*[nn.Linear(16, 16) for _ in range(64)])
config = {
    "train_micro_batch_size_per_gpu": 4,
    "bf16": {"enabled": True},
    "zero_optimization": {"stage": 2},
    "zero_allow_untested_optimizer": True,
    "steps_per_print": 10**9,
}
optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
engine, *_ = deepspeed.initialize(model=model, optimizer=optimizer, config=config)
x = torch.randn(4, 16, device=device, dtype=torch.bfloat16)
instruments.setup_done()
for i in range(30):
    with instruments.step(i):
        loss = engine(x).float().pow(2).mean()
        engine.backward(loss)
        engine.step()
print(f"deepspeed {deepspeed.__version__}: 30 steps done", flush=True)
