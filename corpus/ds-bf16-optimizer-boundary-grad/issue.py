"""DeepSpeed #7985: "Fix BF16_Optimizer last-microbatch grad leak under ZeRO-1" (a pull request; "The bug is
reproducible in DeepSpeed 0.18.6 through current `master`").

The pull request's case: a bf16 model, `"data_types": {"grad_accum_dtype": "fp32"}` and ZeRO stage 1 (DeepSpeed
then wraps the optimizer in BF16_Optimizer), gradient accumulation, two ranks with different data. The engine
all-reduces the fp32 gradient accumulator before the optimizer adds the boundary micro-batch's gradient to it, so
that micro-batch's gradient stays rank-local: each rank steps its partition with its own last micro-batch instead
of the average. Cut to the pull request's probe (two linear layers with a GELU, random inputs and targets per rank,
`gradient_accumulation_steps` 4), with plain SGD so that the step shows the gradient: the weights after one
optimizer step against plain torch's (the same bf16 model, each micro-batch's loss over the accumulation count,
its gradients summed in fp32 and averaged over the ranks, one SGD step). Two gloo ranks, started by this script.
Runs on the CPU (DS_ACCELERATOR=cpu, gloo) or GPUs. Exits 0 when the step agrees with torch's.
"""

import os
import socket
import subprocess
import sys

if int(os.environ.get("WORLD_SIZE", "1")) < 2:  # start the pull request's two ranks (the launcher's part)
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

deepspeed.init_distributed(dist_backend=get_accelerator().communication_backend_name())
rank, world = dist.get_rank(), dist.get_world_size()
device = torch.device(get_accelerator().current_device_name())
print(f"rank {rank}: deepspeed {deepspeed.__version__}, torch {torch.__version__}, device {device}", flush=True)

GA_STEPS, HIDDEN, BATCH, LR = 4, 16, 4, 1.0


def make_model():
    torch.manual_seed(0)  # the same weights on every rank
    model = torch.nn.Sequential(torch.nn.Linear(HIDDEN, HIDDEN), torch.nn.GELU(), torch.nn.Linear(HIDDEN, HIDDEN))
    return model.to(device, torch.bfloat16)


g = torch.Generator().manual_seed(100 + rank)  # different data on each rank
inputs = [torch.randn(BATCH, HIDDEN, generator=g).to(device, torch.bfloat16) for _ in range(GA_STEPS)]
targets = [torch.randn(BATCH, HIDDEN, generator=g).to(device, torch.bfloat16) for _ in range(GA_STEPS)]


def loss_of(model, i):
    return ((model(inputs[i]) - targets[i]) ** 2).float().mean()


# plain torch: the micro-batches' gradients of loss / GA_STEPS summed in fp32, averaged over the ranks, one SGD step
reference = make_model()
before = [p.detach().float().clone() for p in reference.parameters()]
grads = [torch.zeros_like(p) for p in before]
for i in range(GA_STEPS):
    reference.zero_grad()
    (loss_of(reference, i) / GA_STEPS).backward()
    for acc, p in zip(grads, reference.parameters()):
        acc += p.grad.float()
for acc in grads:
    dist.all_reduce(acc)
    acc /= world
expected = torch.cat([(-LR * acc).flatten() for acc in grads])

config = {
    "train_micro_batch_size_per_gpu": BATCH,
    "gradient_accumulation_steps": GA_STEPS,
    "bf16": {"enabled": True},
    "data_types": {"grad_accum_dtype": "fp32"},
    "zero_optimization": {"stage": 1},
    "zero_allow_untested_optimizer": True,  # plain SGD: the step is the gradient
}
model = make_model()
engine, *_ = deepspeed.initialize(model=model, optimizer=torch.optim.SGD(model.parameters(), lr=LR), config=config)
print(f"rank {rank}: optimizer {type(engine.optimizer).__name__}", flush=True)
for i in range(GA_STEPS):
    engine.backward(loss_of(engine, i))
    engine.step()
got = torch.cat([(p.detach().float() - b).flatten() for p, b in zip(engine.module.parameters(), before)])
relative = ((got - expected).norm() / expected.norm()).item()
print(f"rank {rank}: |step| {got.norm().item():.4f}, torch {expected.norm().item():.4f}", flush=True)
assert relative < 0.05, (
    f"bf16 + fp32 grad accumulation + ZeRO-1: the step is wrong on rank {rank}: |step| {got.norm().item():.4f}, "
    f"torch gives {expected.norm().item():.4f} (relative difference {relative:.3g}, gradient_accumulation_steps "
    f"{GA_STEPS}, {world} ranks)"
)
print(f"rank {rank}: PASS, the step agrees with torch (relative difference {relative:.3g})", flush=True)
