"""Lightning #19467: "backward pass is invalid for module in evaluation mode" with deepspeed stage 3.

The report: "After 2.2 Lightning upgrade and only with deepspeed stage 3, we experience a crash `backward pass is
invalid for module in evaluation mode`. Most likely is caused by the recent changes in `train/eval` mode switching."
Lightning 2.2.0 (#18951) stopped calling `.train()` on the whole model when `fit` starts, so a submodule the user put
in eval mode (a frozen, pretrained loss network here) stays in eval mode during training. ZeRO-3's parameter
coordinator in DeepSpeed before 0.15.4 asserts in its backward hooks that every module the gradient flows through is
in training mode; DeepSpeed #6662 (0.15.4) dropped that assertion. So the pair fails: Lightning >= 2.2.0 with
DeepSpeed < 0.15.4. Lightning 2.1.x flips every submodule to train mode at the start of `fit` (the behaviour #18951
removed), so it passes with any DeepSpeed; DeepSpeed >= 0.15.4 passes with any Lightning.

Cut to a trainable linear "generator" followed by a frozen linear "critic" put in eval mode in `__init__` (the
gradient reaches the generator through the critic), ZeRO stage 3, fp32, two steps. Exits 0 when `fit` runs.

On a machine without a GPU, Lightning refuses the DeepSpeed strategy in `setup_environment` ("only supported on
CUDA GPUs"; before 2.2.0 the same check opens `setup_distributed`); DeepSpeed itself runs on the CPU
(DS_ACCELERATOR=cpu, gloo). Only there, that one check is skipped below: the strategy then sets up as the DDP
strategy it derives from (before 2.2.0: its own `setup_distributed` runs with the module's one
`isinstance(..., CUDAAccelerator)` test passing). On a GPU nothing is changed.
DeepSpeed's CPU accelerator counts its "devices" (NUMA nodes) with `numactl --hardware` unless LOCAL_SIZE gives the
count; ZeRO-3's gradient reduction asks for it, and this machine has no numactl: one process, so LOCAL_SIZE=1.
"""

import os

os.environ.setdefault("LOCAL_SIZE", "1")  # DeepSpeed's CPU accelerator: one device per node, no numactl call

import torch
from torch.utils.data import DataLoader, TensorDataset

from lightning.pytorch import LightningModule, Trainer

if not torch.cuda.is_available():  # the CPU stand-in: skip the CUDA-only check, nothing else
    from lightning.pytorch.strategies import DDPStrategy, DeepSpeedStrategy
    from lightning.pytorch.strategies import deepspeed as _deepspeed_module

    if "setup_environment" in DeepSpeedStrategy.__dict__:  # 2.2.0 on: the check is all setup_environment adds

        def _setup_environment_on_cpu(self):
            self.parallel_devices = [torch.device("cpu", 0)]
            DDPStrategy.setup_environment(self)

        DeepSpeedStrategy.setup_environment = _setup_environment_on_cpu
    else:  # before 2.2.0 the same check opens setup_distributed: the module's one CUDAAccelerator test passes
        _setup_distributed = DeepSpeedStrategy.setup_distributed

        def _setup_distributed_on_cpu(self):
            self.parallel_devices = [torch.device("cpu", 0)]
            checked, _deepspeed_module.CUDAAccelerator = _deepspeed_module.CUDAAccelerator, type(self.accelerator)
            try:
                _setup_distributed(self)
            finally:
                _deepspeed_module.CUDAAccelerator = checked

        DeepSpeedStrategy.setup_distributed = _setup_distributed_on_cpu


class GeneratorWithFrozenCritic(LightningModule):
    def __init__(self):
        super().__init__()
        self.generator = torch.nn.Linear(32, 32)
        self.critic = torch.nn.Linear(32, 1)  # stands for a pretrained loss network: frozen, in eval mode
        self.critic.requires_grad_(False)
        self.critic.eval()

    def training_step(self, batch, batch_idx):
        (x,) = batch
        if batch_idx == 0:
            print(f"step 0: generator.training={self.generator.training} critic.training={self.critic.training}",
                  flush=True)
        return self.critic(torch.tanh(self.generator(x))).pow(2).mean()

    def configure_optimizers(self):
        return torch.optim.SGD([p for p in self.parameters() if p.requires_grad], lr=0.1)


torch.manual_seed(0)
loader = DataLoader(TensorDataset(torch.randn(16, 32)), batch_size=4)
trainer = Trainer(
    accelerator="auto", devices=1, strategy="deepspeed_stage_3", precision="32-true", max_steps=2, logger=False,
    enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
)
trainer.fit(GeneratorWithFrozenCritic(), loader)
print("PASS: ZeRO-3 fit ran with a submodule in eval mode", flush=True)
