"""DeepSpeed #7718: "Incorrect gradient computation in ZeRO-2 with DeepSpeed >= 0.17.6".

The report trains one model with a fixed seed under ZeRO-2 on DeepSpeed < 0.17.6 and >= 0.17.6 (and under ZeRO-3):
the same losses at first, but ZeRO-2's gradient norms on >= 0.17.6 are much lower. Cut to that comparison with
gradient accumulation: a small MLP, the same batches, four micro-batches per step, ZeRO-2 against ZeRO-1 (which
keeps the summed gradients in param.grad and is not touched by the change), the norm
`engine.get_global_grad_norm()` gives after each step and the weights after the steps. Runs on the CPU
(DS_ACCELERATOR=cpu, gloo) or a GPU, fp32. Exits 0 when the two stages agree.
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

ACCUMULATION = 4


def train(stage):
    torch.manual_seed(42)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    config = {
        "train_micro_batch_size_per_gpu": 8,
        "gradient_accumulation_steps": ACCUMULATION,
        "gradient_clipping": 0.0,
        "zero_optimization": {"stage": stage},
    }
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    engine, *_ = deepspeed.initialize(model=model, optimizer=optimizer, config=config)
    g = torch.Generator().manual_seed(1)
    norms = []
    for micro in range(3 * ACCUMULATION):  # three optimizer steps
        x = torch.randn(8, 16, generator=g).to(device)
        y = torch.randn(8, 1, generator=g).to(device)
        loss = torch.nn.functional.mse_loss(engine(x), y)
        engine.backward(loss)
        engine.step()
        if (micro + 1) % ACCUMULATION == 0:
            norms.append(float(engine.get_global_grad_norm()))
    weight = engine.module[0].weight.detach().float().clone()
    return norms, weight


norms2, w2 = train(2)
norms1, w1 = train(1)
print(f"ZeRO-2 grad norms: {norms2}", flush=True)
print(f"ZeRO-1 grad norms: {norms1}", flush=True)
drift = (w2 - w1).abs().max().item()
print(f"max |weight ZeRO-2 - weight ZeRO-1| after {len(norms1)} steps: {drift:.4g}", flush=True)
worst = max(abs(a - b) / max(b, 1e-6) for a, b in zip(norms2, norms1))
assert worst < 1e-3 and drift < 1e-5, (
    f"ZeRO-2 and ZeRO-1 disagree with gradient accumulation: grad norms {norms2} vs {norms1} "
    f"(worst relative difference {worst:.3g}), weights differ by up to {drift:.4g}"
)
print("PASS: ZeRO-2 and ZeRO-1 give the same gradient norms and weights", flush=True)
