import os
import socket

import deepspeed
import torch
from torch import nn

class Generator(nn.Module):
    def __init__(self, latent=8, dim=8):
        super().__init__()
        self.net = nn.Linear(latent, dim)

    def forward(self, z):
        return self.net(z)

class Discriminator(nn.Module):
    def __init__(self, dim=8):
        super().__init__()
        self.net = nn.Linear(dim, 1)

    def forward(self, x):
        return self.net(x)

for name, value in {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1"}.items():
    os.environ.setdefault(name, value)
with socket.socket() as s:
    os.environ["MASTER_PORT"] = str(s.getsockname()[1])
D = Discriminator()
G = Generator()
ds_config = {
        "train_micro_batch_size_per_gpu": 8,
        "bf16": {"enabled": True},
    }
engine_D, *_ = deepspeed.initialize(model=D, optimizer=torch.optim.SGD(D.parameters(), lr=0.1), config=ds_config)
engine_G, *_ = deepspeed.initialize(model=G, optimizer=torch.optim.SGD(G.parameters(), lr=0.1), config=ds_config)
w0 = engine_D.module.net.weight.detach().float().clone()
b0 = engine_D.module.net.bias.detach().float().clone()

z = 10 * torch.randn(64, 8).to(torch.bfloat16)
fake = engine_G(z)
loss_G = engine_D(fake).float().sum()
engine_G.backward(loss_G)
stray = fake.detach().float().sum(0)

x = torch.ones(8, 8, dtype=torch.bfloat16)
loss_D = engine_D(x).float().mean()
engine_D.backward(loss_D)
engine_D.step()

w1 = engine_D.module.net.weight.detach().float()
b1 = engine_D.module.net.bias.detach().float()
expected_w, expected_b = w0 - 0.1, b0 - 0.1
err_w = (w1 - expected_w).abs().max().item()
err_b = (b1 - expected_b).abs().max().item()
assert err_w < 0.02 and err_b < 0.02, (
    f"D's step used more than D's own gradient: max |D.weight - expected| = {err_w:.4g}, "
    f"max |D.bias - expected| = {err_b:.4g} (tolerance {0.02}); G's backward through D left a gradient of up to "
    f"{stray.abs().max():.4g} on D.weight that engine_D.zero_grad() did not clear"
)
