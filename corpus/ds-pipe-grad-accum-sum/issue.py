"""DeepSpeed #7773: "Gradients are summed instead of averaged when using gradient accumulation steps with pipeline
parallelism".

The report trains one model with the PipelineEngine at the same global batch twice, micro_batch_size_per_gpu=8 with
gradient_accumulation_steps=4 and micro_batch_size_per_gpu=2 with gradient_accumulation_steps=16, and logs the
gradient norm in its own optimizer: the second run's norm is four times the first's, the micro-batches' gradients
summed instead of averaged. Cut to the same comparison on one pipeline stage (the last stage runs DeepSpeed's own
backward, where the loss is or is not divided by the accumulation steps): a small MLP as a PipelineModule, the same
global batch of 8 as one micro-batch of 8 (accumulation 1) and as four micro-batches of 2 (accumulation 4), an
AdamW that logs the gradient norm when it steps, one `train_batch` each. Runs on the CPU (DS_ACCELERATOR=cpu, gloo)
or a GPU, fp32, one process. Exits 0 when the two norms agree.
"""

import os
import socket

import deepspeed
import torch
from deepspeed.accelerator import get_accelerator
from deepspeed.pipe import PipelineModule

for name, value in {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1"}.items():
    os.environ.setdefault(name, value)
if "MASTER_PORT" not in os.environ:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        os.environ["MASTER_PORT"] = str(s.getsockname()[1])
deepspeed.init_distributed(dist_backend=get_accelerator().communication_backend_name())
device = torch.device(get_accelerator().current_device_name())
print(f"deepspeed {deepspeed.__version__}, torch {torch.__version__}, device {device}", flush=True)

GLOBAL_BATCH = 8


class GradNormLoggingAdamW(torch.optim.AdamW):
    """The reporter's custom optimizer, cut to what it logs: the gradient norm it is asked to step with."""

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
    model = PipelineModule(layers=layers, num_stages=1, loss_fn=torch.nn.MSELoss())
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
    loss = engine.train_batch(data_iter=iter(batches))
    return float(loss), optimizer.grad_norms


loss1, norms1 = train(micro_batch=8, accumulation=1)
loss4, norms4 = train(micro_batch=2, accumulation=4)
print(f"micro-batch 8, accumulation 1: loss {loss1:.6f}, grad norm {norms1}", flush=True)
print(f"micro-batch 2, accumulation 4: loss {loss4:.6f}, grad norm {norms4}", flush=True)
assert len(norms1) == 1 and len(norms4) == 1, f"expected one optimizer step each, got {norms1} and {norms4}"
ratio = norms4[0] / norms1[0]
assert abs(ratio - 1) < 1e-4, (
    f"pipeline grad norm with gradient accumulation 4 is {norms4[0]:.6g}, {ratio:.4g} times the norm "
    f"{norms1[0]:.6g} of the same global batch without accumulation (summed instead of averaged)"
)
print("PASS: the same global batch gives the same gradient norm with and without gradient accumulation", flush=True)
