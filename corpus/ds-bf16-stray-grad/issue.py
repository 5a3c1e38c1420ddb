"""bf16 + ZeRO stage 0: D's step includes a gradient from G's backward (the GAN pattern), as a user reports it.

Two engines, D and G. G's loss goes through D (D(G(z)).sum()) and G's engine does the backward; then
engine_D.zero_grad() and one D step on D's own loss. D's new weights should be its old ones minus lr times the
gradient of D's own loss. On DeepSpeed 0.16.5 ... 0.17.0 they are not: BF16_Optimizer's immediate_grad_update
(on by default there) adds the gradient G's backward left on D's parameters to D's fp32 gradients, which
engine_D.zero_grad() does not clear. Runs on the CPU (DS_ACCELERATOR=cpu, gloo) or a GPU. Exits 0 when correct.
"""

import os
import socket

import deepspeed
import torch
from deepspeed.accelerator import get_accelerator
from torch import nn

for name, value in {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1"}.items():
    os.environ.setdefault(name, value)
if "MASTER_PORT" not in os.environ:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        os.environ["MASTER_PORT"] = str(s.getsockname()[1])

accelerator = get_accelerator()
deepspeed.init_distributed(dist_backend=accelerator.communication_backend_name())
device = torch.device(accelerator.current_device_name())
print(f"deepspeed {deepspeed.__version__}, torch {torch.__version__}, device {device}", flush=True)

LR = 0.1
config = {
    "train_micro_batch_size_per_gpu": 8,
    "gradient_accumulation_steps": 1,
    "bf16": {"enabled": True},
    "zero_optimization": {"stage": 0},
    "gradient_clipping": 0.0,
}

torch.manual_seed(0)
D = nn.Linear(8, 1)
G = nn.Linear(8, 8)
engine_D, *_ = deepspeed.initialize(model=D, optimizer=torch.optim.SGD(D.parameters(), lr=LR), config=config)
engine_G, *_ = deepspeed.initialize(model=G, optimizer=torch.optim.SGD(G.parameters(), lr=LR), config=config)

# D's weights before any step, as DeepSpeed holds them (bf16 parameters; the fp32 master copy equals them)
w0 = engine_D.module.weight.detach().float().clone()
b0 = engine_D.module.bias.detach().float().clone()

# G step: the backward flows through D's parameters (a large gradient: 64 samples of large G outputs, summed)
z = 10 * torch.randn(64, 8, device=device).to(torch.bfloat16)
fake = engine_G(z)
loss_G = engine_D(fake).float().sum()
engine_G.backward(loss_G)
engine_G.step()
stray = fake.detach().float().sum(0)  # the gradient G's backward left on D.weight: d loss_G / d D.weight

# D step on D's own loss only: mean of D(x) with x all ones, so d loss / d weight = 1 and d loss / d bias = 1
engine_D.zero_grad()
x = torch.ones(8, 8, device=device, dtype=torch.bfloat16)
loss_D = engine_D(x).float().mean()
engine_D.backward(loss_D)
engine_D.step()

w1 = engine_D.module.weight.detach().float()
b1 = engine_D.module.bias.detach().float()
expected_w, expected_b = w0 - LR * 1.0, b0 - LR * 1.0
err_w = (w1 - expected_w).abs().max().item()
err_b = (b1 - expected_b).abs().max().item()
print(f"D.weight after the step: {w1.flatten().tolist()}", flush=True)
print(f"expected (w0 - lr * 1):  {expected_w.flatten().tolist()}", flush=True)
print(
    f"max |error| weight {err_w:.4g}, bias {err_b:.4g}; lr * G's gradient on D.weight up to {LR * stray.abs().max():.4g}",
    flush=True,
)
# bf16 keeps 8 bits of mantissa: weights of magnitude < 1.5 round by < 0.006; 0.02 leaves room, the stray is ~10x more
tol = 0.02
assert err_w < tol and err_b < tol, (
    f"D's step used more than D's own gradient: max |D.weight - expected| = {err_w:.4g}, "
    f"max |D.bias - expected| = {err_b:.4g} (tolerance {tol}); G's backward through D left a gradient of up to "
    f"{stray.abs().max():.4g} on D.weight that engine_D.zero_grad() did not clear"
)
print("PASS: D's step used D's own gradient only", flush=True)
