"""A Fabric + DeepSpeed script as a user pastes it into an issue (not one of repros/): ZeRO-1, 16-mixed, one
fabric.setup(), a few steps. It knows nothing of the harness. On a GPU it should pass."""

import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=1, strategy="deepspeed_stage_1", precision="16-mixed")
fabric.launch()
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
model, optimizer = fabric.setup(model, optimizer)
for step in range(10):
    x = torch.randn(16, 32, device=fabric.device)
    loss = model(x).float().pow(2).mean()
    fabric.backward(loss)
    optimizer.step()
    optimizer.zero_grad()
    print(f"step {step} loss {loss.item():.4f}", flush=True)
