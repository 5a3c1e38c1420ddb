import deepspeed
import torch
from deepspeed.accelerator import get_accelerator
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

accelerator = get_accelerator()
device = torch.device(accelerator.current_device_name())
D = Discriminator()
G = Generator()
ds_config = {
        "train_micro_batch_size_per_gpu": 8,
        "gradient_accumulation_steps": 1,
        "bf16": {"enabled": True},
        "zero_optimization": {"stage": 0},
        "gradient_clipping": 0.0,
        "steps_per_print": 10**9,
    }
engine_D, *_ = deepspeed.initialize(model=D, optimizer=torch.optim.SGD(D.parameters(), lr=0.1), config=ds_config)
engine_G, *_ = deepspeed.initialize(model=G, optimizer=torch.optim.SGD(G.parameters(), lr=0.1), config=ds_config)
w0 = engine_D.module.net.weight.detach().float().clone()
b0 = engine_D.module.net.bias.detach().float().clone()

z = 10 * torch.randn(64, 8, device=device).to(torch.bfloat16)
fake = engine_G(z)
loss_G = engine_D(fake).float().sum()
engine_G.backward(loss_G)
engine_G.step()
stray = fake.detach().float().sum(0)

engine_D.zero_grad()
x = torch.ones(8, 8, device=device, dtype=torch.bfloat16)
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
