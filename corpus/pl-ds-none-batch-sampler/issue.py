"""Lightning #19460: "batch_sampler.batch_size is None with deepspeed and DataLoader(batch_size=None)".

The report: "After Lightning 2.2.0 upgrade we experience a crash when using `deepspeed` with
`DataLoader(batch_size=None, ...)`": a loader that yields batches made by its dataset (batch_size=None, as for an
iterable dataset of pre-batched tensors) has `batch_sampler = None`, and the DeepSpeed strategy's
`_auto_select_batch_size` (the batch size it gives DeepSpeed for its throughput logging) reads
`train_dataloader.batch_sampler.batch_size` in `trainer.fit`'s setup: AttributeError. Before 2.2.0 a broad
try/except fell back to 1. Cut to a BoringModel fitted one step with `strategy="deepspeed"` on such a loader.
Exits 0 when the fit runs.

On a machine without a GPU, Lightning refuses the DeepSpeed strategy in `setup_environment` ("only supported on
CUDA GPUs"; before 2.2.0 the same check opened `setup_distributed`); DeepSpeed itself runs on the CPU
(DS_ACCELERATOR=cpu, gloo). Only there, that one check is skipped below (as reprobisect's cpu-shim does from 2.2.0
on): the strategy then sets up as the DDP strategy it derives from (before 2.2.0: its own `setup_distributed` runs
with the module's one `isinstance(..., CUDAAccelerator)` test passing). On a GPU nothing is changed.
"""

import torch
from torch.utils.data import DataLoader, IterableDataset

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


class PreBatchedDataset(IterableDataset):
    """Yields whole batches: the loader must not batch again (batch_size=None)."""

    def __init__(self, size, batch, count):
        self.batches = [torch.randn(batch, size) for _ in range(count)]

    def __iter__(self):
        return iter(self.batches)


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


loader = DataLoader(PreBatchedDataset(32, 4, 8), batch_size=None)
print(f"batch_sampler = {loader.batch_sampler}", flush=True)
trainer = Trainer(
    accelerator="auto", devices=1, strategy="deepspeed", max_steps=1, logger=False,
    enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
)
trainer.fit(BoringModel(), loader)
print("PASS: fit ran with DeepSpeed on a DataLoader(batch_size=None)", flush=True)
