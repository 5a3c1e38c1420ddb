"""DeepSpeed #8152: "Gradient accumulation scaling is applied repeatedly across pipeline stages".

The report: with the PipelineEngine, two or more pipeline stages and gradient_accumulation_steps > 1, "the last
stage receives the expected 1/8 scaling, but the first stage receives an additional 1/8 scaling and therefore gets
1/64 of the accumulated gradient" (every stage's forward registers the output hook that divides by the accumulation
steps; a stage that is not the last divides the gradient it received, already divided, again). Cut to that: a small
MLP as a PipelineModule of two stages on two gloo ranks (the script starts them itself), the same global batch of 8
trained once as one micro-batch of 8 (accumulation 1, nothing divided) and once as four micro-batches of 2
(accumulation 4), an AdamW that logs the gradient norm of its stage when it steps. Each stage's norm with
accumulation over its norm without is that stage's scaling; the report's bug is the first stage's scaling differing
from the last stage's (here a quarter of it). The last stage's own scaling is not asserted: from 0.16.0 to 0.18.2 it
summed the micro-batches (DeepSpeed #7773, the entry ds-pipe-grad-accum-sum), a bug of its own that this entry does
not read. Runs on the CPU (DS_ACCELERATOR=cpu, gloo) or GPUs, fp32. Exits 0 when both stages are scaled alike.
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
from deepspeed.pipe import PipelineModule

deepspeed.init_distributed(dist_backend=get_accelerator().communication_backend_name())
rank = dist.get_rank()
device = torch.device(get_accelerator().current_device_name())
print(f"rank {rank}: deepspeed {deepspeed.__version__}, torch {torch.__version__}, device {device}", flush=True)

GLOBAL_BATCH = 8
STAGES = 2


class GradNormLoggingAdamW(torch.optim.AdamW):
    """An optimizer that logs the gradient norm it is asked to step with (its stage's parameters only)."""

    def __init__(self, params, **kwargs):
        super().__init__(params, **kwargs)
        self.grad_norms = []

    @torch.no_grad()
    def step(self, closure=None):
        grads = [p.grad.detach().float() for group in self.param_groups for p in group["params"] if p.grad is not None]
        self.grad_norms.append(torch.linalg.vector_norm(torch.stack([g.norm() for g in grads])).item())
        return super().step(closure)


def train(micro_batch, accumulation):
    torch.manual_seed(42)
    layers = [torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1)]
    model = PipelineModule(layers=layers, num_stages=STAGES, partition_method="uniform", loss_fn=torch.nn.MSELoss())
    optimizer = GradNormLoggingAdamW(model.parameters(), lr=1e-3)
    config = {
        "train_batch_size": GLOBAL_BATCH,
        "train_micro_batch_size_per_gpu": micro_batch,
        "gradient_accumulation_steps": accumulation,
        "gradient_clipping": 0.0,
        "steps_per_print": 1000,
    }
    engine, *_ = deepspeed.initialize(model=model, optimizer=optimizer, config=config)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(GLOBAL_BATCH, 16, generator=g)
    y = torch.randn(GLOBAL_BATCH, 1, generator=g)
    batches = [(x[i:i + micro_batch].to(device), y[i:i + micro_batch].to(device))
               for i in range(0, GLOBAL_BATCH, micro_batch)]
    engine.train_batch(data_iter=iter(batches))
    assert len(optimizer.grad_norms) == 1, f"rank {rank}: expected one optimizer step, got {optimizer.grad_norms}"
    return engine.stage_id, optimizer.grad_norms[0]


stage, norm1 = train(micro_batch=8, accumulation=1)
_, norm4 = train(micro_batch=2, accumulation=4)
print(f"rank {rank} (stage {stage}): grad norm {norm1:.6g} with accumulation 1, {norm4:.6g} with 4", flush=True)
scaling = torch.zeros(STAGES, dtype=torch.float64)
scaling[stage] = norm4 / norm1
scaling = scaling.to(device)
dist.all_reduce(scaling)  # every rank sees every stage's scaling
first, last = scaling[0].item(), scaling[STAGES - 1].item()
relative = first / last
assert abs(relative - 1) < 1e-3, (
    f"pipeline stage 0's gradient with gradient accumulation 4 is scaled {relative:.4g} times the last stage's "
    f"(stage 0: {first:.4g}, stage {STAGES - 1}: {last:.4g} of the norm without accumulation; rank {rank})"
)
print(f"rank {rank}: PASS, both stages scaled alike ({first:.4g} and {last:.4g})", flush=True)
