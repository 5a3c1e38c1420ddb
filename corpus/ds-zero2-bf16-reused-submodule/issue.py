"""DeepSpeed #8224: "ZeRO-2 + bf16 silently computes incorrect gradients at multi-rank when a submodule is used
more than once per step, a regression from #7665, still present in 0.19.3".

The report: a step whose loss uses one submodule twice, once inside the engine's forward and once called directly
(`engine.module.<submodule>(...)`), trained with ZeRO-2, bf16 and gradient accumulation on several ranks; the
submodule's gradients are wrong. The fix's pull request (#8245) says why: since #7665 the engine divides by the
accumulation count through a hook on its forward's outputs, so the gradient that reaches the submodule through the
direct call is not divided. Cut to that: a small encoder + head, a loss that adds a term of `engine.module.encoder`
on a second input, ZeRO-2 bf16, `gradient_accumulation_steps` 4, two gloo ranks (the script starts them itself),
the encoder's full gradient at the boundary (`safe_get_full_grad`) against plain torch's on the same weights: the
loss over the accumulation count, averaged over the ranks. The micro-batches before the boundary carry a zero loss,
so that only the boundary's micro-batch makes the gradient: 0.17.6 … 0.18.2 keep only the last micro-batch's
gradient anyway (DeepSpeed #7718, the entry ds-zero2-grad-accum), and this entry reads the other bug only.
Runs on the CPU (DS_ACCELERATOR=cpu, gloo) or GPUs. Exits 0 when the gradients agree.
"""

import os
import socket
import subprocess
import sys

if int(os.environ.get("WORLD_SIZE", "1")) < 2:  # start the report's ranks (the launcher's part)
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
import deepspeed.comm as dist
import torch
from deepspeed.accelerator import get_accelerator
from deepspeed.utils import safe_get_full_grad

deepspeed.init_distributed(dist_backend=get_accelerator().communication_backend_name())
rank, world = dist.get_rank(), dist.get_world_size()
device = torch.device(get_accelerator().current_device_name())
print(f"rank {rank}: deepspeed {deepspeed.__version__}, torch {torch.__version__}, device {device}", flush=True)

ACCUMULATION = 4


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = torch.nn.Linear(8, 8)
        self.head = torch.nn.Linear(8, 1)

    def forward(self, x):
        return self.head(torch.relu(self.encoder(x)))


def make_model():
    torch.manual_seed(0)
    return Net().to(device, torch.bfloat16)


def micro_batch(micro):
    g = torch.Generator().manual_seed(100 * rank + micro)
    x, x2 = torch.randn(4, 8, generator=g), torch.randn(4, 8, generator=g)
    return x.to(device, torch.bfloat16), x2.to(device, torch.bfloat16)


def step_loss(model, encoder, micro):
    """The model's loss plus a term of its encoder called again on a second input: the encoder is used twice."""
    x, x2 = micro_batch(micro)
    return model(x).float().square().mean() + encoder(x2).float().square().mean()


# plain torch: the boundary micro-batch's loss over the accumulation count, the gradient averaged over the ranks
reference = make_model()
(step_loss(reference, reference.encoder, ACCUMULATION - 1) / ACCUMULATION).backward()
expected = reference.encoder.weight.grad.float().clone()
dist.all_reduce(expected)
expected /= world

config = {
    "train_micro_batch_size_per_gpu": 4,
    "gradient_accumulation_steps": ACCUMULATION,
    "bf16": {"enabled": True},
    "zero_optimization": {"stage": 2},
}
model = make_model()
engine, *_ = deepspeed.initialize(model=model, optimizer=torch.optim.AdamW(model.parameters(), lr=1e-3), config=config)
for micro in range(ACCUMULATION - 1):  # zero losses up to the boundary (see above)
    engine.backward(step_loss(engine, engine.module.encoder, micro) * 0)
    engine.step()
engine.backward(step_loss(engine, engine.module.encoder, ACCUMULATION - 1))
got = safe_get_full_grad(engine.module.encoder.weight).float()
relative = ((got - expected).norm() / expected.norm()).item()
print(f"rank {rank}: |encoder.weight grad| {got.norm().item():.4f}, torch {expected.norm().item():.4f}", flush=True)
assert relative < 0.02, (
    f"ZeRO-2 bf16 gradient of the twice-used encoder is wrong on rank {rank}: |grad| {got.norm().item():.4f}, "
    f"torch gives {expected.norm().item():.4f} (relative difference {relative:.3g}, gradient_accumulation_steps "
    f"{ACCUMULATION}, {world} ranks)"
)
print(f"rank {rank}: PASS, the encoder's gradient agrees with torch (relative difference {relative:.3g})", flush=True)
