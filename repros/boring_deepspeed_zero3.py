# /// script
# requires-python = ">=3.9"
# dependencies = ["torch", "deepspeed"]
# ///
"""The ZeRO-3 BoringModel report on plain DeepSpeed: Lightning's ZeRO-3 defaults and FusedAdam, on the CPU.

Lightning #10510: ``Trainer(strategy="deepspeed_stage_3", precision=16)`` with DeepSpeed's ``FusedAdam`` failed while
the ZeRO-3 optimizer was built: parameters were all-gathered into buffers of another dtype. Here Lightning is gone: a
``Linear(32, 2)`` under ``deepspeed.initialize`` with the config Lightning's strategy gives it, batches of 2 from a
random data set, ``engine.backward`` / ``engine.step``; bf16 stands in for fp16, which DeepSpeed refuses on the CPU.
``--mixed-dtype-params`` is DeepSpeed #8072 (0.19.2 only): a bf16 model built under ``deepspeed.zero.Init`` plus an
fp32 trainable adapter; it fails on two ranks only (the harness's ``--nproc 2``, or ``--nprocs 2`` by hand).

Expected signature (old releases, fp16, at set-up): RuntimeError: output tensor must have the same type as input
tensor, innermost deepspeed frame partition_parameters.py ``_allgather_params_coalesced``; #8072's and which releases
show what: docs/matrix.md, "The pure-DeepSpeed analogues across releases". DeepSpeed's FusedAdam on the CPU is a C++
op built just in time on first use (80-105 s once per TORCH_EXTENSIONS_DIR).

Fixes: flags of boring_deepspeed_zero3_fixes.py, this code with a few lines changed per flag (diff the two files).
Exit code: 0 = every ``--steps`` step ran on every rank; an exception is a failure, its traceback on stderr. Events:
``@@repro`` lines on stdout, rank 0 only (instruments.py). On the CPU, one process:
    DS_ACCELERATOR=cpu RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 \
    python boring_deepspeed_zero3.py
"""

import argparse
import os

import torch
import torch.nn as nn
from instruments import engine_config, local_ranks, setup_done, step  # the events every repro prints


class RandomDataset(torch.utils.data.Dataset):
    def __init__(self, size, length):
        self.len = length
        self.data = torch.randn(length, size)

    def __getitem__(self, index):
        return self.data[index]

    def __len__(self):
        return self.len


class BoringModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = nn.Linear(32, 2)
        self.adapter = None

    def forward(self, x):
        h = self.layer(x)
        if self.adapter is not None:  # --mixed-dtype-params: LoRA-style fp32 adapter on a bf16 layer
            h = h + self.adapter(h.to(self.adapter.weight.dtype)).to(h.dtype)
        return h


def lightning_default_config(args):
    """Lightning's DeepSpeedStrategy default config for deepspeed_stage_3 (lightning 2.6)."""
    cfg = {
        "activation_checkpointing": {
            "partition_activations": False,
            "cpu_checkpointing": False,
            "contiguous_memory_optimization": False,
            "synchronize_checkpoint_boundary": False,
        },
        "aio": {
            "block_size": 1048576,
            "queue_depth": 8,
            "single_submit": False,
            "overlap_events": True,
            "thread_count": 1,
        },
        "zero_allow_untested_optimizer": True,
        "zero_optimization": {
            "stage": 3,
            "contiguous_gradients": True,
            "overlap_comm": True,
            "allgather_partitions": True,
            "reduce_scatter": True,
            "allgather_bucket_size": 200_000_000,
            "reduce_bucket_size": 200_000_000,
            "sub_group_size": 1_000_000_000_000,
        },
        "train_micro_batch_size_per_gpu": 2,  # the Trainer uses the DataLoader's batch size
        "gradient_clipping": 0.0,
    }
    if args.dtype == "fp16":
        cfg["fp16"] = {
            "enabled": True,
            "loss_scale": 0,
            "initial_scale_power": 16,
            "loss_scale_window": 1000,
            "hysteresis": 2,
            "min_loss_scale": 1,
        }
    elif args.dtype == "bf16":
        cfg["bf16"] = {"enabled": True}
    return cfg


def get_argument_parser():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dtype", choices=["bf16", "fp16", "fp32"], default="bf16")
    p.add_argument("--steps", type=int, default=1)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument(
        "--mixed-dtype-params",
        action="store_true",
        help="bf16 frozen layer built under zero.Init + fp32 trainable adapter (DeepSpeed #8072)",
    )
    p.add_argument("--nprocs", type=int, default=1, help="local ranks this script starts itself (by hand)")
    return p


def main():
    args = get_argument_parser().parse_args()
    local_ranks(args.nprocs)  # --nprocs N by hand: run on N local ranks, unless a launcher started them

    import deepspeed
    from deepspeed.accelerator import get_accelerator

    torch.manual_seed(args.seed)
    deepspeed.init_distributed()
    device = torch.device(get_accelerator().current_device_name())
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[args.dtype]
    config = lightning_default_config(args)

    if args.mixed_dtype_params:
        with deepspeed.zero.Init(config_dict_or_path=config, dtype=dtype):
            model = BoringModel()  # "base model" in the run dtype, partitioned at construction
        model.layer.requires_grad_(False)
        model.adapter = nn.Linear(2, 2)  # fp32, added after loading, trainable
    else:
        model = BoringModel()
    params = [q for q in model.parameters() if q.requires_grad]
    from deepspeed.ops.adam import FusedAdam

    optimizer = FusedAdam(params, lr=0.1)
    engine, optimizer, _, _ = deepspeed.initialize(
        model=model, model_parameters=params, optimizer=optimizer, config=config
    )

    engine_config(
        engine,
        dtype=args.dtype,
        optimizer="fused-adam",
        optimizer_class=type(engine.optimizer).__name__,
        mixed_dtype_params=args.mixed_dtype_params,
        param_dtypes=sorted({str(getattr(q, "ds_tensor", q).dtype) for q in model.parameters()}),
        world_size=int(os.environ.get("WORLD_SIZE", "1")),
        fixes=[],
        device=str(device),
    )
    setup_done()

    data = torch.utils.data.DataLoader(RandomDataset(32, 64), batch_size=2)
    for i, batch in enumerate(data):
        if i >= args.steps:
            break
        with step(i):
            loss = engine(batch.to(device, dtype)).sum()
            engine.backward(loss)
            engine.step()
        print(f"step {i} loss {loss.item():.4f}", flush=True)


if __name__ == "__main__":
    main()
