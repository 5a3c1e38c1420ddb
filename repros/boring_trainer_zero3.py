# /// script
# requires-python = ">=3.9"
# dependencies = ["torch", "lightning", "deepspeed"]
# ///
# ruff: noqa: E402  (third-party imports follow _T0 so that the setup time includes them)
"""Lightning Trainer BoringModel under DeepSpeed ZeRO-3, fp16 mixed precision, DeepSpeed FusedAdam.

The bug (as reported, pytorch-lightning 1.5.1 + deepspeed 0.5.6 + torch 1.10)
    ``Trainer(strategy="deepspeed_stage_3", precision=16)`` with ``configure_optimizers``
    returning ``deepspeed.ops.adam.FusedAdam`` fails while DeepSpeed builds the ZeRO-3 optimizer:
    the fp16 model parameters are all-gathered into buffers of another dtype.

Upstream report
    Lightning #10510 ("DeepSpeed stage 3 and mixed precision cause an error").

Expected signature (reported)
    RuntimeError: output tensor must have the same type as input tensor
    innermost deepspeed frame: deepspeed/runtime/zero/partition_parameters.py
    ``_allgather_params_coalesced`` (via stage3.py ``create_reduce_and_remove_grad_hooks`` ->
    ``param.all_gather()``), during ``trainer.fit`` set-up, before the first training step.
    Current releases are expected to pass (no step fails).

This version is the report updated to current Lightning: ``lightning.pytorch`` instead of
``pytorch_lightning``, ``accelerator="auto", devices=1`` instead of ``gpus=4``,
``precision="16-mixed"`` instead of ``16``, no progress bar, a fixed seed.  Candidate fixes: ``--optimizer torch-adam``
(``torch.optim.Adam`` instead of FusedAdam) and ``--precision bf16-mixed``.
On a machine without a GPU, Lightning refuses DeepSpeed; the harness then runs this file
unchanged under a CPU shim with ``--precision bf16-mixed`` (DeepSpeed refuses fp16 on the CPU).
There DeepSpeed's FusedAdam is a C++ CPU op built just in time on first use (80-105 s once per
DeepSpeed version and TORCH_EXTENSIONS_DIR).

Exit code contract: 0 = fit (``--steps`` training batches) and test ran; an uncaught exception
is a failure and its traceback goes to stderr (non-zero exit).  Progress lines on stdout start
with ``@@repro ``; a failure before the first ``step`` line is a set-up failure.
"""

import argparse
import os
import time

_T0 = time.perf_counter()

import torch
from instruments import trainer_events  # the config, setup and step events
from lightning.pytorch import LightningModule, Trainer
from torch.utils.data import DataLoader, Dataset


class RandomDataset(Dataset):
    def __init__(self, size, length):
        self.len = length
        self.data = torch.randn(length, size)

    def __getitem__(self, index):
        return self.data[index]

    def __len__(self):
        return self.len


class BoringModel(LightningModule):
    def __init__(self, optimizer="fused-adam"):
        super().__init__()
        self.layer = torch.nn.Linear(32, 2)
        self.optimizer_name = optimizer

    def forward(self, x):
        return self.layer(x)

    def training_step(self, batch, batch_idx):
        loss = self(batch).sum()
        self.log("train_loss", loss)
        return {"loss": loss}

    def validation_step(self, batch, batch_idx):
        loss = self(batch).sum()
        self.log("valid_loss", loss)

    def test_step(self, batch, batch_idx):
        loss = self(batch).sum()
        self.log("test_loss", loss)

    def configure_optimizers(self):
        if self.optimizer_name == "torch-adam":
            return torch.optim.Adam(self.parameters(), lr=0.1)
        from deepspeed.ops.adam import FusedAdam

        return FusedAdam(self.layer.parameters(), lr=0.1)


def run(args):
    train_data = DataLoader(RandomDataset(32, 64), batch_size=2)
    val_data = DataLoader(RandomDataset(32, 64), batch_size=2)
    test_data = DataLoader(RandomDataset(32, 64), batch_size=2)

    model = BoringModel(args.optimizer)
    trainer = Trainer(
        default_root_dir=os.getcwd(),
        limit_train_batches=args.steps,
        limit_val_batches=1,
        num_sanity_val_steps=0,
        max_epochs=1,
        enable_model_summary=False,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        accelerator="auto",
        devices=int(os.environ.get("LOCAL_WORLD_SIZE", "1")),  # 1 as reported; a launcher's ranks give theirs
        precision=args.precision,
        strategy="deepspeed_stage_3",
        callbacks=[
            trainer_events(
                _T0, optimizer=args.optimizer, fixes=["torch-adam"] if args.optimizer == "torch-adam" else []
            )
        ],
    )
    trainer.fit(model, train_dataloaders=train_data, val_dataloaders=val_data)
    trainer.test(model, dataloaders=test_data)


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--precision", default="16-mixed")
    p.add_argument("--steps", type=int, default=1, help="limit_train_batches (1 in the report)")
    p.add_argument("--optimizer", choices=["fused-adam", "torch-adam"], default="fused-adam")
    p.add_argument("--seed", type=int, default=42)
    args = p.parse_args()
    torch.manual_seed(args.seed)
    run(args)
