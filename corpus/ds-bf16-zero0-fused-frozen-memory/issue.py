"""DeepSpeed #8029: "fix(fp16): filter requires_grad in FP16 optimizer flat buffer init" (a pull request), on a GPU.

The pull request's own case and measure: bf16 with ZeRO stage 0 and a LoRA/PEFT model, almost all of it frozen,
"GPU allocated 37.90 GiB -> CUDA OOM" before the fix, 15.36 GiB after. Since #7515 that configuration goes to
FP16_Optimizer, which keeps bf16 and fp32 flat copies of every parameter of its groups, the frozen ones included;
BF16_Optimizer had always kept trainable parameters only. Here through the fused class (DeepSpeed's own Adam from
the config, FusedAdam, a CUDA op; the CPU entry ds-bf16-zero0-frozen-copies takes the unfused one): a frozen bf16
base of four 2048x2048 layers with rank-8 adapters, and the GPU memory `deepspeed.initialize` allocates. Needs one
GPU. Exits 0 when initialize allocates less than half of what fp32 copies of the frozen weights would take.
"""

import os
import socket

import deepspeed
import torch

for name, value in {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1"}.items():
    os.environ.setdefault(name, value)
if "MASTER_PORT" not in os.environ:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        os.environ["MASTER_PORT"] = str(s.getsockname()[1])
deepspeed.init_distributed(dist_backend="nccl")
print(f"deepspeed {deepspeed.__version__}, torch {torch.__version__}, {torch.cuda.get_device_name()}", flush=True)
CONFIG = {
    "train_micro_batch_size_per_gpu": 4,
    "bf16": {"enabled": True},
    "zero_optimization": {"stage": 0},
    "optimizer": {"type": "Adam", "params": {"lr": 1e-3}},
}


class LoRALinear(torch.nn.Module):
    def __init__(self, features, rank=8):
        super().__init__()
        self.base = torch.nn.Linear(features, features, bias=False)
        self.base.weight.requires_grad_(False)  # the frozen pretrained weight
        self.lora_a = torch.nn.Linear(features, rank, bias=False)
        self.lora_b = torch.nn.Linear(rank, features, bias=False)

    def forward(self, x):
        return self.base(x) + self.lora_b(self.lora_a(x))


torch.manual_seed(0)
model = torch.nn.Sequential(*[LoRALinear(2048) for _ in range(4)]).to("cuda", torch.bfloat16)
frozen = sum(p.numel() for p in model.parameters() if not p.requires_grad)
trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
torch.cuda.synchronize()
start = torch.cuda.memory_allocated()
engine, optimizer, *_ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=CONFIG)
torch.cuda.synchronize()
allocated = torch.cuda.memory_allocated() - start
copies = 4 * frozen  # bytes of fp32 copies of the frozen weights
print(
    f"frozen {frozen} parameters, trainable {trainable}: {type(optimizer).__name__} over "
    f"{type(getattr(optimizer, 'optimizer', optimizer)).__name__}; initialize allocated {allocated / 2**20:.1f} MiB "
    f"of GPU memory (fp32 copies of the frozen weights would be {copies / 2**20:.1f} MiB)",
    flush=True,
)
assert allocated < copies / 2, (
    f"bf16 ZeRO-0 copies frozen parameters: initialize allocated {allocated / 2**20:.0f} MiB of GPU memory for "
    f"{trainable} trainable of {frozen + trainable} parameters (fp32 copies of the frozen ones: "
    f"{copies / 2**20:.0f} MiB)"
)
print("PASS: initialize allocated no copy of the frozen weights", flush=True)
