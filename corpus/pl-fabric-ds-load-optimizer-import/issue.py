"""Lightning #20040: "Update DeepSpeedOptimizer import for deepspeed >= 0.14.1" (the pull request carries the report).

The report: Fabric with its DeepSpeed strategy saves a checkpoint (`fabric.save`, a folder) and cannot load it:
`fabric.load(path, state)` reaches `DeepSpeedStrategy.load_checkpoint`, which imports `DeepSpeedOptimizer` from
`deepspeed.runtime`; DeepSpeed 0.14.1 moved it to `deepspeed.runtime.base_optimizer` and dropped it from
`deepspeed.runtime/__init__.py`, so the load raises ImportError before it reads anything. Cut to a linear model set
up with an optimizer, one step, `fabric.save` and `fabric.load` of model, optimizer and a counter. Exits 0 when the
load restores the counter and the weights.

On a machine without a GPU, Lightning refuses the DeepSpeed strategy in `setup_environment` ("only supported on
CUDA GPUs"); DeepSpeed itself runs on the CPU (DS_ACCELERATOR=cpu, gloo). Only there, that one check is skipped
below (as reprobisect's cpu-shim does): the strategy then sets up as the DDP strategy it derives from. On a GPU
nothing is changed.
"""

import os
import tempfile

import torch

from lightning.fabric import Fabric

if not torch.cuda.is_available():  # the CPU stand-in: skip the CUDA-only check, nothing else
    from lightning.fabric.strategies import DDPStrategy, DeepSpeedStrategy

    def _setup_environment_on_cpu(self):
        self.parallel_devices = [torch.device("cpu", 0)]
        DDPStrategy.setup_environment(self)

    DeepSpeedStrategy.setup_environment = _setup_environment_on_cpu

fabric = Fabric(accelerator="auto", devices=1, strategy="deepspeed")
fabric.launch()

model = torch.nn.Linear(32, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
model, optimizer = fabric.setup(model, optimizer)

loss = model(torch.randn(4, 32, device=fabric.device)).sum()
fabric.backward(loss)
optimizer.step()
optimizer.zero_grad()
trained = {name: p.detach().clone() for name, p in model.named_parameters()}

with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(tmp, "checkpoint")
    fabric.save(path, {"model": model, "optimizer": optimizer, "step": 1})
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
    state = {"model": model, "optimizer": optimizer, "step": 0}
    fabric.load(path, state)

assert state["step"] == 1, f"the counter was not restored: {state['step']}"
for name, p in model.named_parameters():
    assert torch.equal(p.detach(), trained[name]), f"{name} was not restored"
print("PASS: fabric.load restored the DeepSpeed checkpoint", flush=True)
