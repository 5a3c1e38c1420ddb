# /// script
# requires-python = ">=3.9"
# dependencies = ["torch", "deepspeed"]
# ///
"""The GAN report's loop on plain DeepSpeed: two engines, Lightning's ZeRO-1 defaults, on the CPU (Lightning #19773).

The report trains a DCGAN with two ``fabric.setup()`` calls under ``deepspeed_stage_1``. Here Lightning is gone: the
same models and the same D-then-G loop on two ``deepspeed.initialize`` engines, with the config Lightning's strategy
gives them, bf16 standing in for ``16-mixed`` (DeepSpeed refuses fp16 on the CPU). With ``overlap_comm`` on, each ZeRO-1
optimizer hooks its parameters; G's loss goes through D, so ``engineG.backward(errG)`` fires D's hooks outside D's own
backward, when D has no gradient buffer. Lightning #17856 is the same failure; DeepSpeed #4923 is related.

Expected signature (0.16-era releases, step 0): TypeError: 'NoneType' object is not subscriptable, innermost deepspeed
frame stage_1_and_2.py ``reduce_independent_p_g_buckets_and_remove_grads``, from ``engineG.backward(errG)``. Other
releases fail elsewhere: docs/matrix.md, "The pure-DeepSpeed analogues across releases".

Fixes: flags of gan_deepspeed_zero1_fixes.py, this code with a few lines changed per flag (diff the two files).
Exit code: 0 = every ``--steps`` step ran; an exception is a failure, its traceback on stderr. Events: ``@@repro``
lines on stdout (instruments.py). On the CPU, one process:
    DS_ACCELERATOR=cpu RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 \
    python gan_deepspeed_zero1.py
"""

import argparse

import deepspeed
import torch
import torch.nn as nn
from deepspeed.accelerator import get_accelerator
from gan_example import Discriminator, Generator, weights_init  # the models of DeepSpeedExamples' GAN
from instruments import engine_config, setup_done, step  # the events every repro prints


def lightning_default_config(args):
    """Lightning's DeepSpeedStrategy default config (lightning 2.6, _create_default_config + _format_config)."""
    zero = {
        "stage": 1,
        "contiguous_gradients": True,
        "overlap_comm": True,
        "allgather_partitions": True,
        "reduce_scatter": True,
        "allgather_bucket_size": 200_000_000,
        "reduce_bucket_size": 200_000_000,
        "sub_group_size": 1_000_000_000_000,
    }
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
        "zero_optimization": zero,
        "train_micro_batch_size_per_gpu": 1,
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
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--image-size", type=int, default=64)
    p.add_argument("--ngf", type=int, default=16)
    p.add_argument("--ndf", type=int, default=16)
    p.add_argument("--nz", type=int, default=100)
    p.add_argument("--lr", type=float, default=0.0002)
    p.add_argument("--beta1", type=float, default=0.5)
    p.add_argument("--seed", type=int, default=999)
    return p


def main():
    args = get_argument_parser().parse_args()
    torch.manual_seed(args.seed)
    deepspeed.init_distributed()
    device = torch.device(get_accelerator().current_device_name())
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[args.dtype]
    nc, nz = 3, args.nz

    netG = Generator(0, args.ngf, nc, nz).to(device)
    netG.apply(weights_init)
    netD = Discriminator(0, args.ndf, nc).to(device)
    netD.apply(weights_init)
    criterion = nn.BCELoss()
    real_label, fake_label = 1, 0

    size = (args.steps * args.batch_size, nc, args.image_size, args.image_size)
    dataset = torch.utils.data.TensorDataset(torch.randn(size))
    dataloader = torch.utils.data.DataLoader(
        dataset, batch_size=args.batch_size, shuffle=True, generator=torch.Generator().manual_seed(args.seed)
    )
    config = lightning_default_config(args)

    # two engines, as the report's two fabric.setup() calls
    optimizerD = torch.optim.Adam(netD.parameters(), lr=args.lr, betas=(args.beta1, 0.999))
    optimizerG = torch.optim.Adam(netG.parameters(), lr=args.lr, betas=(args.beta1, 0.999))
    engineD, optimizerD, _, _ = deepspeed.initialize(
        model=netD, model_parameters=netD.parameters(), optimizer=optimizerD, config=config
    )
    engineG, optimizerG, _, _ = deepspeed.initialize(
        model=netG, model_parameters=netG.parameters(), optimizer=optimizerG, config=config
    )

    zero = config["zero_optimization"]
    engine_config(
        engineD,
        dtype=args.dtype,
        overlap_comm=zero["overlap_comm"],
        contiguous_gradients=zero["contiguous_gradients"],
        buffer_dtype=config.get("data_types", {}).get("buffer_dtype"),
        gradient_clipping=engineD.gradient_clipping(),  # what the engine does, the default included
        fixes=[],
        device=str(device),
        engines=2,
        optimizer=type(engineD.optimizer).__name__,
        batch_size=args.batch_size,
    )
    setup_done()

    for i, data in enumerate(dataloader, 0):
        if i >= args.steps:
            break
        with step(i):
            ############################
            # (1) Update D network: maximize log(D(x)) + log(1 - D(G(z)))
            ###########################
            netD.zero_grad()
            real = data[0].to(device)
            batch_size = real.size(0)
            label = torch.full((batch_size,), real_label, dtype=real.dtype, device=device)
            # as Fabric's wrapped modules: inputs cast to the run dtype, outputs back to fp32
            output = engineD(real.to(dtype)).float()
            errD_real = criterion(output, label)
            engineD.backward(errD_real)
            D_x = output.mean().item()

            noise = torch.randn(batch_size, nz, 1, 1, device=device)
            fake = engineG(noise.to(dtype)).float()
            label.fill_(fake_label)
            output = engineD(fake.detach().to(dtype)).float()
            errD_fake = criterion(output, label)
            engineD.backward(errD_fake)
            D_G_z1 = output.mean().item()
            errD = errD_real + errD_fake
            engineD.step()

            ############################
            # (2) Update G network: maximize log(D(G(z)))
            ###########################
            netG.zero_grad()
            label.fill_(real_label)  # fake labels are real for generator cost
            output = engineD(fake.to(dtype)).float()
            errG = criterion(output, label)
            engineG.backward(errG)  # goes through D's parameters -> D's ZeRO hooks fire
            D_G_z2 = output.mean().item()
            engineG.step()

            print(
                f"[{i}/{args.steps}] Loss_D: {errD.item():.4f} Loss_G: {errG.item():.4f} "
                f"D(x): {D_x:.4f} D(G(z)): {D_G_z1:.4f} / {D_G_z2:.4f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
