"""DeepSpeed #8072: "ZeRO-3 + PEFT (LoRA) regression in 0.19.2" — dtype mismatch in _allgather_params_coalesced.

The report: a bf16 base model (Qwen2.5-0.5B) wrapped by a PEFT LoRA adapter, whose adapter weights PEFT keeps in
fp32, trained with ZeRO-3 and bf16 on two processes; the first optimizer step fails in `_post_step` when the
persistent parameters (bf16 base + fp32 LoRA) are all-gathered together. Cut to that: a tiny bf16 base built under
`deepspeed.zero.Init`, a LoRA-style fp32 adapter added after it, ZeRO-3 bf16, one step on two gloo ranks (the script
starts them itself). On NCCL the message is "output tensor must have the same type as input tensor"; gloo says
"invalid tensor type". Exits 0 when the step runs.
"""

import os
import socket
import subprocess
import sys

if int(os.environ.get("WORLD_SIZE", "1")) < 2:  # start the report's two processes (accelerate launch's part)
    with socket.socket() as s:  # a free port, so that two runs at once do not meet
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    procs = [
        subprocess.Popen(
            [sys.executable, __file__],
            env=dict(
                os.environ, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT=port
            ),
        )
        for r in range(2)
    ]
    sys.exit(max(p.wait() for p in procs))

import deepspeed
import torch
from deepspeed.accelerator import get_accelerator

deepspeed.init_distributed(dist_backend=get_accelerator().communication_backend_name())
print(f"rank {os.environ['RANK']}: deepspeed {deepspeed.__version__}, torch {torch.__version__}", flush=True)

config = {
    "train_micro_batch_size_per_gpu": 2,
    "bf16": {"enabled": True},
    "zero_optimization": {"stage": 3},
}


class LoraLinear(torch.nn.Module):
    """The base layer (bf16, frozen) plus PEFT's low-rank adapter (fp32: autocast_adapter_dtype=True)."""

    def __init__(self, base):
        super().__init__()
        self.base = base
        self.lora_A = torch.nn.Linear(32, 4, bias=False)
        self.lora_B = torch.nn.Linear(4, 32, bias=False)

    def forward(self, x):  # as PEFT's lora.Linear: the input cast to the adapter's dtype, the result back
        return self.base(x) + self.lora_B(self.lora_A(x.to(self.lora_A.weight.dtype))).to(x.dtype)


with deepspeed.zero.Init(config_dict_or_path=config, dtype=torch.bfloat16):
    base = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.ReLU(), torch.nn.Linear(32, 32))
for p in base.parameters():
    p.requires_grad_(False)
model = LoraLinear(base)
params = [p for p in model.parameters() if p.requires_grad]
engine, *_ = deepspeed.initialize(model=model, optimizer=torch.optim.AdamW(params, lr=1e-3), config=config)
x = torch.randn(2, 32).to(get_accelerator().current_device_name(), torch.bfloat16)
loss = engine(x).float().pow(2).mean()
engine.backward(loss)
engine.step()
print(f"rank {os.environ['RANK']}: PASS, step done, loss {loss.item():.4f}", flush=True)
