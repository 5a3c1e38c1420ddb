"""DeepSpeed #6794: "Fix type error in `ZeROOrderedDict`" — a ZeRO-3 module's parameters cannot be copied.

The report is a comment on #6527's commit (3d5cf739e, "Fix dynamo issue"), which gave ZeRO-3's replacement of each
module's ``_parameters`` (``ZeROOrderedDict``) a ``__reduce__`` for Dynamo's deepcopy: it returns a tuple plus the
list its unpacking made, so every ``copy.copy``, ``copy.deepcopy`` or pickle of those parameters raises
``TypeError: can only concatenate tuple (not "list") to tuple``. Cut to that: a small model under ZeRO-3 (bf16, one
process), one training step, then a copy of a layer's ``_parameters`` (what a copy of the model, an EMA copy say,
makes of every layer). Runs on the CPU (DS_ACCELERATOR=cpu, gloo) or a GPU. Exits 0 when the copy works and holds
the layer's parameter names.

Not a pickle: the fixed ``__reduce__`` hands the parent module to the copy, and pickling a module under ZeRO-3
pickles its process group, which no release can (0.16.2 fails there for that reason, not for this bug).
"""

import copy
import os
import socket

import deepspeed
import torch
from deepspeed.accelerator import get_accelerator

for name, value in {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1"}.items():
    os.environ.setdefault(name, value)
# DeepSpeed's CPU accelerator counts its devices (NUMA nodes) with `numactl --hardware` unless LOCAL_SIZE gives the
# count, and ZeRO-3's gradient reduction asks for it (0.15.x): one process, one device
os.environ.setdefault("LOCAL_SIZE", "1")
if "MASTER_PORT" not in os.environ:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        os.environ["MASTER_PORT"] = str(s.getsockname()[1])
deepspeed.init_distributed(dist_backend=get_accelerator().communication_backend_name())
device = torch.device(get_accelerator().current_device_name())
print(f"deepspeed {deepspeed.__version__}, torch {torch.__version__}, device {device}", flush=True)

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
config = {
    "train_micro_batch_size_per_gpu": 4,
    "bf16": {"enabled": True},
    "zero_optimization": {"stage": 3},
}
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
engine, *_ = deepspeed.initialize(model=model, optimizer=optimizer, config=config)
x = torch.randn(4, 8).to(device, torch.bfloat16)
loss = engine(x).float().pow(2).mean()
engine.backward(loss)
engine.step()
print(f"one ZeRO-3 step: loss {loss.item():.4f}", flush=True)

params = engine.module[0]._parameters
print(f"a layer's _parameters is a {type(params).__name__}", flush=True)
shallow = copy.copy(params)  # 0.15.4 ... 0.16.1: TypeError: can only concatenate tuple (not "list") to tuple
assert list(shallow) == ["weight", "bias"], f"the copy holds {list(shallow)}, not the layer's weight and bias"
print("PASS: a ZeRO-3 layer's parameters copy", flush=True)
