"""DeepSpeed #7837: "Gradient norm abnormally increases when training with ZeRO-0" (bf16).

The report trains one model twice, changing only the ZeRO stage, and compares the gradient norms DeepSpeed reports:
with ZeRO-0 they grow, with ZeRO-1/2/3 they do not. Cut to that comparison: a small MLP, the same bf16 config and
the same batches, ZeRO-0 against ZeRO-1, the norm `engine.get_global_grad_norm()` gives after each step and the
weights after the steps. Runs on the CPU (DS_ACCELERATOR=cpu, gloo) or a GPU. Exits 0 when the two stages agree.
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


def train(stage):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    config = {
        "train_micro_batch_size_per_gpu": 8,
        "gradient_accumulation_steps": 1,
        "gradient_clipping": 1.0,
        "bf16": {"enabled": True},
        "zero_optimization": {"stage": stage},
    }
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    engine, *_ = deepspeed.initialize(model=model, optimizer=optimizer, config=config)
    g = torch.Generator().manual_seed(1)
    norms = []
    for _ in range(4):
        x = torch.randn(8, 16, generator=g).to(device, torch.bfloat16)
        y = torch.randn(8, 1, generator=g).to(device, torch.bfloat16)
        loss = torch.nn.functional.mse_loss(engine(x).float(), y.float())
        engine.backward(loss)
        engine.step()
        norms.append(float(engine.get_global_grad_norm()))
    weight = engine.module[0].weight.detach().float().clone()
    return norms, weight


norms0, w0 = train(0)
norms1, w1 = train(1)
print(f"ZeRO-0 grad norms: {norms0}", flush=True)
print(f"ZeRO-1 grad norms: {norms1}", flush=True)
drift = (w0 - w1).abs().max().item()
print(f"max |weight ZeRO-0 - weight ZeRO-1| after 4 steps: {drift:.4g}", flush=True)
worst = max(abs(a - b) / max(b, 1e-6) for a, b in zip(norms0, norms1))
assert worst < 0.05 and drift < 5e-3, (
    f"ZeRO-0 and ZeRO-1 disagree: grad norms {norms0} vs {norms1} (worst relative difference {worst:.3g}), "
    f"weights differ by up to {drift:.4g}"
)
print("PASS: ZeRO-0 and ZeRO-1 give the same gradient norms and weights", flush=True)
