# /// script
# requires-python = ">=3.9"
# dependencies = ["torch", "lightning", "deepspeed"]
# ///
# ruff: noqa: E402, F401, I001  (the report's code as filed: its imports, where and in the order it has them)
"""The report's code: a Lightning Trainer BoringModel under DeepSpeed ZeRO-3, fp16, DeepSpeed's FusedAdam (#10510).

The bug (as reported, pytorch-lightning 1.5.1 + deepspeed 0.5.6 + torch 1.10)
    ``Trainer(strategy="deepspeed_stage_3", precision=16)`` with ``configure_optimizers`` returning
    ``deepspeed.ops.adam.FusedAdam`` fails while DeepSpeed builds the ZeRO-3 optimizer: the fp16 model parameters
    are all-gathered into buffers of another dtype. Upstream: Lightning #10510 ("DeepSpeed stage 3 and mixed
    precision cause an error").

Expected signature (reported)
    RuntimeError: output tensor must have the same type as input tensor, innermost deepspeed frame
    deepspeed/runtime/zero/partition_parameters.py ``_allgather_params_coalesced`` (via stage3.py
    ``create_reduce_and_remove_grad_hooks`` -> ``param.all_gather()``), during ``trainer.fit``'s set-up, before the
    first training step. Current releases are expected to pass (no step fails).

What runs
    Between the two marker lines below: the report's code as filed, which ``tests/unit/test_repro_reports.py`` holds
    against the issue's text line by line. Lines ending in ``# adapted`` make it run on current Lightning and take
    the harness's flags: ``lightning.pytorch`` for ``pytorch_lightning``; ``accelerator="auto"`` and the launcher's
    ranks (1 without one) for ``gpus = 4``; ``--precision`` (``16-mixed``, the filed ``16``); ``--steps`` training
    batches (1 as filed); no progress bar; ``--optimizer``; ``--seed`` (42). The line ending in ``# instruments``
    adds the events of ``instruments.py``. Fix ``none`` runs this file as it is.

Fixes
    ``--optimizer torch-adam`` returns the report's commented-out ``torch.optim.Adam`` instead of FusedAdam;
    ``--precision bf16-mixed``. On a machine without a GPU, Lightning refuses DeepSpeed; the harness then runs this
    file unchanged under a CPU shim with ``--precision bf16-mixed`` (DeepSpeed refuses fp16 on the CPU). There
    FusedAdam is a C++ CPU op built just in time on first use (80-105 s once per DeepSpeed version and
    TORCH_EXTENSIONS_DIR).

Exit code contract: 0 = fit (``--steps`` training batches) and test ran; an uncaught exception is a failure and its
traceback goes to stderr (non-zero exit). Event lines on stdout start with ``@@repro ``; a failure before the first
``step`` line is a set-up failure.
"""

import argparse
import time

_T0 = time.perf_counter()  # the setup event counts from here: the imports below are part of the set-up

from instruments import trainer_events  # the config, setup and step events


def command_line():
    """The harness's flags, the report's values by default; seeds torch, so that every run has the same data."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--precision", default="16-mixed")
    p.add_argument("--steps", type=int, default=1, help="limit_train_batches (1 in the report)")
    p.add_argument("--optimizer", choices=["fused-adam", "torch-adam"], default="fused-adam")
    p.add_argument("--seed", type=int, default=42)
    args = p.parse_args()
    args.fixes = ["torch-adam"] if args.optimizer == "torch-adam" else []  # as the config event names them
    torch.manual_seed(args.seed)
    return args


# --- the report's code ---------------------------------------------------------------------------------------------
# fmt: off
import os
import torch
from torch.utils.data import DataLoader, Dataset
from deepspeed.ops.adam import DeepSpeedCPUAdam, FusedAdam
from lightning.pytorch import LightningModule, Trainer  # adapted: pytorch_lightning


class RandomDataset(Dataset):
    def __init__(self, size, length):
        self.len = length
        self.data = torch.randn(length, size)

    def __getitem__(self, index):
        return self.data[index]

    def __len__(self):
        return self.len


class BoringModel(LightningModule):
    def __init__(self, optimizer="fused-adam"):  # adapted: --optimizer
        super().__init__()
        self.layer = torch.nn.Linear(32, 2)
        self.optimizer_name = optimizer  # adapted: --optimizer

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
        if self.optimizer_name == "torch-adam":  # adapted: the fix --optimizer torch-adam, the report's line below
            return torch.optim.Adam(self.parameters(), lr=0.1)  # adapted: --optimizer torch-adam
        return FusedAdam(self.layer.parameters(), lr=0.1)
        # return torch.optim.Adam(self.parameters(),lr = .1)

def run(args):  # adapted: the harness's flags
    train_data = DataLoader(RandomDataset(32, 64), batch_size=2)
    val_data = DataLoader(RandomDataset(32, 64), batch_size=2)
    test_data = DataLoader(RandomDataset(32, 64), batch_size=2)

    model = BoringModel(args.optimizer)  # adapted: --optimizer
    trainer = Trainer(
        default_root_dir=os.getcwd(),
        limit_train_batches=args.steps,  # adapted: --steps, 1 as filed
        limit_val_batches=1,
        num_sanity_val_steps=0,
        max_epochs=1,
        enable_model_summary=False,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,  # adapted: no progress bar in a log
        accelerator="auto", devices=int(os.environ.get("LOCAL_WORLD_SIZE", "1")),  # adapted: gpus = 4 (1, or a launcher's ranks)
        precision=args.precision,  # adapted: --precision, 16-mixed for the filed 16
        callbacks=[trainer_events(_T0, optimizer=args.optimizer, fixes=args.fixes)],  # instruments
        strategy = "deepspeed_stage_3"
    )
    trainer.fit(model, train_dataloaders=train_data, val_dataloaders=val_data)
    trainer.test(model, dataloaders=test_data)


if __name__ == "__main__":
    run(command_line())  # adapted: the harness's flags and a fixed seed (command_line above)
# fmt: on
# --- end of the report's code --------------------------------------------------------------------------------------
