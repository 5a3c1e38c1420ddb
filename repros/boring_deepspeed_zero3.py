# /// script
# requires-python = ">=3.9"
# dependencies = ["torch", "deepspeed"]
# ///
# ruff: noqa: E402  (third-party imports follow _T0 so that the setup time includes them)
"""Pure-DeepSpeed analogue of the ZeRO-3 BoringModel report (runs on the CPU).

The bug
    Lightning #10510: ``Trainer(strategy="deepspeed_stage_3", precision=16)`` with DeepSpeed's
    ``FusedAdam`` failed while the ZeRO-3 optimizer was built, because parameters were
    all-gathered into buffers of another dtype.  This script removes Lightning: a
    ``Linear(32, 2)`` under ``deepspeed.initialize`` with Lightning's default ZeRO-3 config,
    batches of 2 from a random data set, ``engine.backward`` / ``engine.step``.

Upstream reports
    Lightning #10510 (original).  ``--mixed-dtype-params`` is a cheap analogue of DeepSpeed
    #8072 (regression in 0.19.2, fixed in 0.19.3 by #8073): ZeRO-3 + bf16 with a model built
    under ``deepspeed.zero.Init`` (bf16, frozen) plus an fp32 trainable adapter added afterwards
    (like a PEFT LoRA adapter).  0.19.2 stopped casting ZeRO-Init models, so the persistent
    parameters mix bf16 and fp32 and ``_allgather_params_coalesced`` sizes every output buffer
    with the first parameter's dtype.  That path only runs with more than one rank: run it with two,
    either from the harness (``--nproc 2``: its launcher starts the ranks with torchrun's variables) or by
    hand with ``--nprocs 2`` (this script then starts its own ranks, gloo on the CPU).

Expected signature
    Original (fp16, old releases): RuntimeError: output tensor must have the same type as input
    tensor, innermost deepspeed frame partition_parameters.py ``_allgather_params_coalesced``,
    during set-up (no step).  Current releases pass on the CPU (bf16 / fp32, both optimizers).
    ``--mixed-dtype-params`` on 0.19.2: the dtype mismatch in the same ZeRO function
    (partition_parameters.py ``_allgather_params_coalesced``, reached from ``engine.step`` ->
    stage3.py ``_post_step``) -> step 0 fails.  With gloo (CPU) the message is
    ``RuntimeError: ProcessGroupGloo::allgather: invalid tensor type at index 0 (expected
    TensorOptions(dtype=float, ...), got TensorOptions(dtype=c10::BFloat16, ...))``, innermost
    deepspeed frame comm/torch.py ``all_gather_into_tensor``; with NCCL it is ``output tensor must
    have the same type as input tensor``.  0.19.3 passes; so do 0.16.4 and 0.19.8.

On the CPU fp16 is refused by DeepSpeed (``ValueError: Type fp16 is not supported on your
device.``), so the default dtype here is bf16.  DeepSpeed's FusedAdam on the CPU accelerator is
a C++ CPU op built just in time on first use (80-105 s once per TORCH_EXTENSIONS_DIR).

Exit code contract: 0 = all ``--steps`` steps ran (on every rank); an uncaught exception is a
failure and its traceback goes to stderr (non-zero exit).  Progress lines on stdout start with
``@@repro `` (rank 0 only).
"""

import argparse
import json
import os
import subprocess
import sys
import time

_T0 = time.perf_counter()

import torch
import torch.nn as nn
from instruments import step  # the step events every repro prints


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


def launch(nprocs):
    """Run this script on ``nprocs`` local ranks (gloo); rank 0 keeps stdout.  Returns the exit code."""
    procs = []
    for r in range(nprocs):
        env = dict(
            os.environ,
            RANK=str(r),
            LOCAL_RANK=str(r),
            WORLD_SIZE=str(nprocs),
            LOCAL_WORLD_SIZE=str(nprocs),
            REPRO_LOCAL_CHILD="1",
        )
        env.setdefault("MASTER_ADDR", "127.0.0.1")
        env.setdefault("MASTER_PORT", "29500")
        procs.append(
            subprocess.Popen(
                [sys.executable, os.path.abspath(__file__), *sys.argv[1:]],
                env=env,
                stdout=None if r == 0 else subprocess.DEVNULL,
            )
        )
    rc = 0
    while any(p.poll() is None for p in procs):
        if any(p.poll() not in (None, 0) for p in procs):  # one rank failed: do not wait on the others' collectives
            time.sleep(2)
            for p in procs:
                if p.poll() is None:
                    p.terminate()
        time.sleep(0.2)
    for p in procs:
        p.wait()
        rc = rc or p.returncode
    return rc


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dtype", choices=["bf16", "fp16", "fp32"], default="bf16")
    p.add_argument("--optimizer", choices=["fused-adam", "torch-adam"], default="fused-adam")
    p.add_argument("--steps", type=int, default=1)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument(
        "--mixed-dtype-params",
        action="store_true",
        help="bf16 frozen layer built under zero.Init + fp32 trainable adapter (DeepSpeed #8072)",
    )
    p.add_argument("--nprocs", type=int, default=1, help="local ranks this script starts itself (by hand)")
    args = p.parse_args()
    started = os.environ.get("REPRO_LOCAL_CHILD") == "1" or int(os.environ.get("WORLD_SIZE", "1")) > 1
    if args.nprocs > 1 and not started:  # a launcher (the harness's, torchrun) already started the ranks
        sys.exit(launch(args.nprocs))

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
    if args.optimizer == "torch-adam":
        optimizer = torch.optim.Adam(params, lr=0.1)
    else:
        from deepspeed.ops.adam import FusedAdam

        optimizer = FusedAdam(params, lr=0.1)
    engine, optimizer, _, _ = deepspeed.initialize(
        model=model, model_parameters=params, optimizer=optimizer, config=config
    )

    fixes = [f for f, on in [("torch-adam", args.optimizer == "torch-adam")] if on]
    print(
        "@@repro "
        + json.dumps(
            {
                "event": "config",
                "dtype": args.dtype,
                "zero_stage": engine.zero_optimization_stage(),
                "fp16": engine.fp16_enabled(),
                "bf16": engine.bfloat16_enabled(),
                "optimizer": args.optimizer,
                "optimizer_class": type(engine.optimizer).__name__,
                "mixed_dtype_params": args.mixed_dtype_params,
                "param_dtypes": sorted({str(getattr(q, "ds_tensor", q).dtype) for q in model.parameters()}),
                "world_size": int(os.environ.get("WORLD_SIZE", "1")),
                "fixes": fixes,
                "device": str(device),
                "deepspeed": deepspeed.__version__,
                "torch": torch.__version__,
            }
        ),
        flush=True,
    )
    print("@@repro " + json.dumps({"event": "setup", "seconds": time.perf_counter() - _T0}), flush=True)

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
