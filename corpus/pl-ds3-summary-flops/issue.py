"""Lightning #21231: "flop_counts missing for deepspeed in 2.5.5" (Trainer, strategy="deepspeed_stage_3").

The report: any LightningModule fitted with `Trainer(accelerator="auto", strategy="deepspeed_stage_3")` fails as
the fit starts, when the model summary is printed: Lightning 2.5.4 added a "FLOPs" column to DeepSpeedSummary
(#21100, taken from the main branch) but not the FLOP counting of ModelSummary it reads (`self.flop_counts`, #20868,
only in 2.6). Cut to a BoringModel and one training batch. Exits 0 when the fit runs.

On a machine without a GPU, Lightning refuses the DeepSpeed strategy in `setup_environment` ("only supported on
CUDA GPUs"); DeepSpeed itself runs on the CPU (DS_ACCELERATOR=cpu, gloo). Only there, that one check is skipped
below (as reprobisect's cpu-shim does): the strategy then sets up as the DDP strategy it derives from. On a GPU
nothing is changed.
"""

import torch
from torch.utils.data import DataLoader, Dataset

from lightning.pytorch import LightningModule, Trainer

if not torch.cuda.is_available():  # the CPU stand-in: skip the CUDA-only check, nothing else
    from lightning.pytorch.strategies import DDPStrategy, DeepSpeedStrategy

    def _setup_environment_on_cpu(self):
        self.parallel_devices = [torch.device("cpu", 0)]
        DDPStrategy.setup_environment(self)

    DeepSpeedStrategy.setup_environment = _setup_environment_on_cpu


class RandomDataset(Dataset):
    def __init__(self, size, length):
        self.data = torch.randn(length, size)

    def __getitem__(self, index):
        return self.data[index]

    def __len__(self):
        return len(self.data)


class AnyModel(LightningModule):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(32, 2)

    def forward(self, x):
        return self.layer(x)

    def training_step(self, batch, batch_idx):
        return self(batch).sum()

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


dataloader = DataLoader(RandomDataset(32, 64), batch_size=2)
ptl_model = AnyModel()

trainer = Trainer(
    accelerator="auto", devices=1, strategy="deepspeed_stage_3", max_steps=1, logger=False,
    enable_checkpointing=False, enable_progress_bar=False,
)
trainer.fit(ptl_model, dataloader)
print("PASS: fit ran with deepspeed_stage_3", flush=True)
