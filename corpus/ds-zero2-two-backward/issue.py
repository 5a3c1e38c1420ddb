"""DeepSpeed #7629: "The same program runs fine with v0.17.5, but fails with v0.17.6. Under the zero2 configuration".

The report's traceback: `self.train_model.backward(loss)` under ZeRO-2 raises `TypeError: 'NoneType' object is not
iterable` in `independent_gradient_partition_epilogue`. The rest of the report's program is not in the report as
read; the epilogue of 0.17.6 raises that only when a second backward comes at a gradient accumulation boundary
before the optimizer step, so this is that program: a trainer whose step calls `self.train_model.backward(loss)`
for two losses and then `self.train_model.step()`, ZeRO-2, `gradient_accumulation_steps` 1. PyTorch sums the two
backward calls, and so do DeepSpeed's ZeRO-0 and ZeRO-3 on every release measured; the check is the step against
plain PyTorch's: the gradient norm and the weights. One process, fp32, CPU (DS_ACCELERATOR=cpu, gloo) or a GPU.
Exits 0 when ZeRO-2 steps with the summed gradient.
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


def make_model():
    torch.manual_seed(42)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))


def data(steps):
    g = torch.Generator().manual_seed(1)
    return [[(torch.randn(8, 16, generator=g), torch.randn(8, 1, generator=g)) for _ in range(2)] for _ in range(steps)]


class Trainer:
    def __init__(self):
        model = make_model()
        config = {
            "train_micro_batch_size_per_gpu": 8,
            "gradient_accumulation_steps": 1,
            "gradient_clipping": 1e9,  # so that DeepSpeed computes the norm; it never clips here
            "zero_optimization": {"stage": 2},
        }
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
        self.train_model, *_ = deepspeed.initialize(model=model, optimizer=optimizer, config=config)

    def train_step(self, batches):
        for x, y in batches:  # two losses, two backward calls, one step
            loss = torch.nn.functional.mse_loss(self.train_model(x.to(device)), y.to(device))
            self.train_model.backward(loss)
        self.train_model.step()
        return float(self.train_model.get_global_grad_norm())


STEPS = 2
reference = make_model()
optimizer = torch.optim.AdamW(reference.parameters(), lr=1e-2)
expected = []
for batches in data(STEPS):
    for x, y in batches:
        torch.nn.functional.mse_loss(reference(x), y).backward()
    expected.append(torch.norm(torch.stack([p.grad.norm() for p in reference.parameters()])).item())
    optimizer.step()
    optimizer.zero_grad()

trainer = Trainer()
norms = [trainer.train_step(batches) for batches in data(STEPS)]
print(f"ZeRO-2 grad norms: {norms}", flush=True)
print(f"torch grad norms (the two backward calls summed): {expected}", flush=True)
drift = max((a.detach().float().cpu() - b.detach()).abs().max().item()
            for a, b in zip(trainer.train_model.module.parameters(), reference.parameters()))  # fmt: skip
worst = max(abs(a - b) / b for a, b in zip(norms, expected))
assert worst < 1e-4 and drift < 1e-5, (
    f"ZeRO-2 does not step with the sum of two backward calls: grad norms {norms} vs torch's {expected} "
    f"(worst relative difference {worst:.3g}), weights differ by up to {drift:.3g}"
)
print("PASS: ZeRO-2 steps with the sum of the two backward calls, as torch does", flush=True)
