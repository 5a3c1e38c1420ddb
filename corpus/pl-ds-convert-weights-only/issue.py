"""Lightning #20643: "convert_zero_checkpoint_to_fp32_state_dict fails with torch 2.6.0 due to weights_only default
change".

The report: a model trained with Lightning's DeepSpeed strategy saves a DeepSpeed checkpoint (a folder); Lightning's
`convert_zero_checkpoint_to_fp32_state_dict` turns it into one file for use without DeepSpeed. From torch 2.6
`torch.load` defaults to `weights_only=True`, and the function's two `torch.load` calls (the optimizer states, the
model states with Lightning's client state) raise `_pickle.UnpicklingError: Weights only load failed`. Cut to a
BoringModel fitted one step with `deepspeed_stage_2`, `trainer.save_checkpoint`, then the conversion. Exits 0 when
the converted file loads.

On a machine without a GPU, Lightning refuses the DeepSpeed strategy in `setup_environment` ("only supported on
CUDA GPUs"); DeepSpeed itself runs on the CPU (DS_ACCELERATOR=cpu, gloo). Only there, that one check is skipped
below (as reprobisect's cpu-shim does): the strategy then sets up as the DDP strategy it derives from. On a GPU
nothing is changed.
"""

import os
import tempfile

import torch
from torch.utils.data import DataLoader, Dataset

from lightning.pytorch import LightningModule, Trainer
from lightning.pytorch.utilities.deepspeed import convert_zero_checkpoint_to_fp32_state_dict

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


class BoringModel(LightningModule):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(32, 2)

    def forward(self, x):
        return self.layer(x)

    def training_step(self, batch, batch_idx):
        return self(batch).sum()

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


model = BoringModel()
trainer = Trainer(
    accelerator="auto", devices=1, strategy="deepspeed_stage_2", max_steps=1, logger=False,
    enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
)
trainer.fit(model, DataLoader(RandomDataset(32, 64), batch_size=2))

with tempfile.TemporaryDirectory() as tmp:
    checkpoint_dir = os.path.join(tmp, "last.ckpt")
    trainer.save_checkpoint(checkpoint_dir)
    output_file = os.path.join(tmp, "model.pt")
    convert_zero_checkpoint_to_fp32_state_dict(checkpoint_dir, output_file)
    state = torch.load(output_file, weights_only=False)
    print(f"converted: {sorted(state['state_dict'])}", flush=True)
print("PASS: the DeepSpeed checkpoint converts", flush=True)
