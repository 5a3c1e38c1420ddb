"""DeepSpeed >= 0.19.2: a bf16 model with BatchNorm fails at its first forward (buffers kept fp32, #8066).

A plain model with a BatchNorm layer trained in bf16 under ZeRO: `deepspeed.initialize` casts the parameters to
bf16 and, from 0.19.2 (#8066, "preserve fp32 buffers"), leaves the floating buffers in their loaded dtype, so
BatchNorm's running_mean/running_var stay fp32 beside a bf16 weight and bias and torch's batch_norm refuses the
mix. Up to 0.19.1 every floating buffer was cast with the module and the step runs. The PR's escape hatch,
`"data_types": {"buffer_dtype": "bf16"}`, restores the old cast. Runs on the CPU (DS_ACCELERATOR=cpu, gloo) or a
GPU. Exits 0 when two steps run.
"""

import os
import socket

import deepspeed
import torch
from deepspeed.accelerator import get_accelerator

for name, value in {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1"}.items():
    os.environ.setdefault(name, value)
if "MASTER_PORT" not in os.environ:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        os.environ["MASTER_PORT"] = str(s.getsockname()[1])
deepspeed.init_distributed(dist_backend=get_accelerator().communication_backend_name())
device = torch.device(get_accelerator().current_device_name())
print(f"deepspeed {deepspeed.__version__}, torch {torch.__version__}, device {device}", flush=True)

torch.manual_seed(0)
model = torch.nn.Sequential(
    torch.nn.Linear(16, 32), torch.nn.BatchNorm1d(32), torch.nn.ReLU(), torch.nn.Linear(32, 1)
)
config = {
    "train_micro_batch_size_per_gpu": 8,
    "bf16": {"enabled": True},
    "zero_optimization": {"stage": 1},
}
engine, *_ = deepspeed.initialize(
    model=model, optimizer=torch.optim.AdamW(model.parameters(), lr=1e-3), config=config
)
bn = engine.module[1]
print(f"BatchNorm weight {bn.weight.dtype}, running_mean {bn.running_mean.dtype}", flush=True)
for step in range(2):
    x = torch.randn(8, 16).to(device, torch.bfloat16)
    y = torch.randn(8, 1).to(device, torch.bfloat16)
    loss = torch.nn.functional.mse_loss(engine(x).float(), y.float())
    engine.backward(loss)
    engine.step()
    print(f"step {step}: loss {loss.item():.4f}", flush=True)
print("PASS: two bf16 steps with BatchNorm", flush=True)
