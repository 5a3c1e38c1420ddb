"""DeepSpeed #8029: "fix(fp16): filter requires_grad in FP16 optimizer flat buffer init" (a pull request).

The pull request's case: bf16 with ZeRO stage 0 and a LoRA/PEFT model, almost all of it frozen. Since #7515 that
configuration goes to FP16_Optimizer (FP16_UnfusedOptimizer without a fused Adam), which keeps an fp32 copy of
every parameter of its groups, the frozen ones included, "causing CUDA OOM before training begins"; BF16_Optimizer
had always kept trainable parameters only. Cut to that: a frozen bf16 base of four 2048x2048 layers with rank-8
adapters, torch AdamW over `model.parameters()` (a torch optimizer takes frozen parameters and skips them), and the
fp32 tensors the engine's optimizer wrapper holds after `deepspeed.initialize` (its master copies and flat buffers:
counted, because the process's resident memory reuses what was freed and hid them on the CPU). Runs on the CPU
(DS_ACCELERATOR=cpu, gloo) or a GPU. Exits 0 when the engine holds no fp32 copy of the frozen weights.
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
CONFIG = {"train_micro_batch_size_per_gpu": 4, "bf16": {"enabled": True}, "zero_optimization": {"stage": 0}}


def fp32_bytes(value, seen, depth=0):
    """Bytes of the fp32 tensors ``value`` holds (in lists, tuples and dicts, three deep), each storage once."""
    if isinstance(value, torch.Tensor):
        storage = value.untyped_storage()
        if value.dtype != torch.float32 or storage.data_ptr() in seen:
            return 0
        seen.add(storage.data_ptr())
        return storage.nbytes()
    if depth < 3 and isinstance(value, (list, tuple)):
        return sum(fp32_bytes(v, seen, depth + 1) for v in value)
    if depth < 3 and isinstance(value, dict):
        return sum(fp32_bytes(v, seen, depth + 1) for v in value.values())
    return 0


class LoRALinear(torch.nn.Module):
    def __init__(self, features, rank=8):
        super().__init__()
        self.base = torch.nn.Linear(features, features, bias=False)
        self.base.weight.requires_grad_(False)  # the frozen pretrained weight
        self.lora_a = torch.nn.Linear(features, rank, bias=False)
        self.lora_b = torch.nn.Linear(rank, features, bias=False)

    def forward(self, x):
        return self.base(x) + self.lora_b(self.lora_a(x))


def initialize(model):
    model = model.to(device, torch.bfloat16)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)  # every parameter, frozen ones too
    engine, *_ = deepspeed.initialize(model=model, optimizer=optimizer, config=CONFIG)
    return engine


torch.manual_seed(0)
model = torch.nn.Sequential(*[LoRALinear(2048) for _ in range(4)]).to(device, torch.bfloat16)
frozen = sum(p.numel() for p in model.parameters() if not p.requires_grad)
trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
engine = initialize(model)
seen = set()  # what the wrapper keeps (master copies, flat buffers) and what its torch optimizer steps
held = fp32_bytes(vars(engine.optimizer), seen) + fp32_bytes([g["params"] for g in engine.optimizer.param_groups], seen)
copies = 4 * frozen  # bytes of fp32 copies of the frozen weights
print(
    f"frozen {frozen} parameters, trainable {trainable}: {type(engine.optimizer).__name__} holds "
    f"{held / 2**20:.1f} MiB of fp32 (copies of the frozen weights would be {copies / 2**20:.1f} MiB)",
    flush=True,
)
assert held < copies / 2, (
    f"bf16 ZeRO-0 keeps fp32 copies of frozen parameters: the optimizer holds {held / 2**20:.0f} MiB of fp32 for "
    f"{trainable} trainable of {frozen + trainable} parameters (fp32 copies of the frozen ones: "
    f"{copies / 2**20:.0f} MiB)"
)
print("PASS: the engine holds no fp32 copy of the frozen weights", flush=True)
