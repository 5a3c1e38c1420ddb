"""DeepSpeed #7645: "Fix misplaced overflow handling return in fused_optimizer.py" (a pull request).

The pull request's words: the fused FP16 optimizer's overflow handling "incorrectly exited the function too early,
resulting in wrong forward pass and loss calculations in certain FP16 training scenarios"; the origin it names is
889f0ead2 (#7515 "Enable non-ZeRO mode"), after which `FP16_Optimizer.step()` returns after the overflow check
whether or not there was an overflow, so an fp16 model never changes. Cut to that: fp16 without ZeRO (stage 0),
DeepSpeed's own Adam from the config (FusedAdam, a CUDA op: the fused FP16_Optimizer), a small MLP, a loss scale
of 2**8 that never overflows here, three steps on one batch. Needs one GPU. Exits 0 when the steps change the
weights and the loss.
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
    "train_micro_batch_size_per_gpu": 8,
    "fp16": {"enabled": True, "initial_scale_power": 8},
    "zero_optimization": {"stage": 0},
    "optimizer": {"type": "Adam", "params": {"lr": 1e-2}},
}

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
engine, optimizer, *_ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=CONFIG)
print(f"optimizer {type(optimizer).__name__} over {type(optimizer.optimizer).__name__}", flush=True)
x = torch.randn(8, 32, device=engine.device, dtype=torch.half)
y = torch.randn(8, 1, device=engine.device, dtype=torch.half)
before = [p.detach().clone() for p in engine.module.parameters()]
losses = []
for step in range(3):
    loss = torch.nn.functional.mse_loss(engine(x), y)
    engine.backward(loss)
    engine.step()
    losses.append(loss.item())
    scale = getattr(optimizer, "cur_scale", "?")
    print(f"step {step}: loss {losses[-1]:.6f}, loss scale {scale}, overflow {optimizer.overflow}", flush=True)
moved = max((p.detach() - b).abs().max().item() for p, b in zip(engine.module.parameters(), before))
assert moved > 0 and losses[-1] != losses[0], (
    f"fp16 FP16_Optimizer never steps: after 3 steps without overflow the weights moved by {moved} and the loss "
    f"stayed {losses[0]:.6f} -> {losses[-1]:.6f}"
)
print(f"PASS: the weights moved by up to {moved:.4f}, the loss went {losses[0]:.4f} -> {losses[-1]:.4f}", flush=True)
