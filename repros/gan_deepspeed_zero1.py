# /// script
# requires-python = ">=3.9"
# dependencies = ["torch", "deepspeed"]
# ///
# ruff: noqa: E402  (third-party imports follow _T0 so that the setup time includes them)
"""Pure-DeepSpeed analogue of the Fabric DCGAN + ZeRO-1 bug (runs on the CPU).

The bug
    A GAN trained with two DeepSpeed engines (D and G) under ZeRO stage 1 with
    ``overlap_comm=True`` / ``contiguous_gradients=True`` (Lightning's defaults).
    ZeRO-1 installs gradient hooks on every parameter of each engine when
    ``overlap_comm`` is on.  The generator loss is computed *through the
    discriminator* (``netD(fake)``) and back-propagated with ``engineG.backward``,
    so autograd also reaches D's parameters and fires D's hooks outside D's own
    ``backward()``.  D's contiguous gradient buffer (``ipg_buffer``) only exists
    during D's backward, so D's hook indexes ``None``.

Upstream reports
    Lightning #19773 (Fabric DCGAN, two ``fabric.setup()``, ``deepspeed_stage_1``,
    ``16-mixed``), Lightning #17856 (same class of failure with two models),
    DeepSpeed #4923 (related: backward through another engine's ZeRO hooks).

This script removes Lightning: the same models, the same D-then-G loop, two
``deepspeed.initialize`` engines with Lightning's default ZeRO config
(see ``lightning/fabric/strategies/deepspeed.py``).  On the CPU fp16 is refused
by DeepSpeed, so the default dtype here is bf16 (stand-in for ``16-mixed``).

Expected signature (DeepSpeed releases that show the reported bug, e.g. 0.16.x)
    TypeError: 'NoneType' object is not subscriptable
    innermost deepspeed frame: stage_1_and_2.py reduce_independent_p_g_buckets_and_remove_grads
    raised inside engineG.backward(errG) by a hook of D's ZeRO optimizer, step 0.
Other releases fail differently (measured on the CPU, bf16, torch 2.13):
    0.17.0  AssertionError: The parameter N has already been reduced ... (stage_1_and_2.py
            reduce_ipg_grads), step 1, in D's first backward: G's backward in step 0 marked D's
            params as reduced.  --freeze-d fixes it.
    0.18.2  TypeError: 'NoneType' object is not iterable (stage_1_and_2.py
            independent_gradient_partition_epilogue), step 0, in D's *second* backward: a
            separate DeepSpeed regression (two backward() per step() with
            gradient_accumulation_steps=1) that every ZeRO-1 form here hits; only ZeRO-0 passes.
    >=0.19.2 RuntimeError: expected scalar type BFloat16 but found Float (BatchNorm, CPU only:
            buffers stay fp32); with --buffer-dtype half the no-fix form passes, while
            --freeze-d gives IndexError (stage_1_and_2.py reduce_ipg_grads) and --zero-stage 0
            gives "RuntimeError: Direct calls to tensor.backward() are not supported ..."
            (engine.py _backward_prologue): D's engine hooks its forward *outputs*.
Forward passes go through the engines (``engineD(x)``), as Fabric's wrapped modules do;
DeepSpeedExamples calls the raw modules instead (which skips the output hooks of >= 0.19).

Candidate fixes (flags): --freeze-d, --d-one-backward, --no-overlap-comm,
--single-engine, --zero-stage 0, --buffer-dtype half (a CPU-only BatchNorm
workaround for DeepSpeed >= 0.19.2, which keeps buffers in fp32), --logits-loss
(D's sigmoid moves into the loss, in fp32), --g-step-raw-d (the G step through
D's raw module), --gradient-clipping 0 (the config's gradient_clipping; DeepSpeed
clips to a norm of 1.0 from 0.19.3 where the config leaves it out).

Exit code contract: 0 = all ``--steps`` steps ran; an uncaught exception is a
failure and its traceback goes to stderr (non-zero exit).  Machine-readable
progress lines on stdout start with ``@@repro ``.

Run on the CPU (one process):
    DS_ACCELERATOR=cpu RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 \
    MASTER_PORT=29500 python gan_deepspeed_zero1.py
"""

import argparse
import json
import time

_T0 = time.perf_counter()

import deepspeed
import torch
import torch.nn as nn
from deepspeed.accelerator import get_accelerator
from gan_example import Discriminator, Generator, weights_init  # the models of DeepSpeedExamples' GAN
from instruments import step  # the step events every repro prints


def make_criterion(args):
    """``nn.BCELoss()`` on D's sigmoid as in the report, or (--logits-loss) the same loss on D's logits in fp32:
    a half-precision sigmoid rounds to exactly 0 or 1 once D is sure, where BCELoss's gradient is infinite."""
    if not args.logits_loss:
        return nn.BCELoss()
    return lambda output, label: nn.functional.binary_cross_entropy_with_logits(output.float(), label.float())


def probability(output, args):
    """D's output as the probability the report prints (D(x), D(G(z))), whichever loss is used."""
    return torch.sigmoid(output.float()) if args.logits_loss else output


class GAN(nn.Module):
    """--single-engine: both networks in one module, routed by ``net``."""

    def __init__(self, netG, netD):
        super().__init__()
        self.netG, self.netD = netG, netD

    def forward(self, x, net):
        return self.netG(x) if net == "G" else self.netD(x)


def lightning_default_config(args):
    """Lightning's DeepSpeedStrategy default config (lightning 2.6, _create_default_config + _format_config)."""
    zero = {
        "stage": args.zero_stage,
        "contiguous_gradients": not args.no_overlap_comm,
        "overlap_comm": not args.no_overlap_comm,
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
    if args.buffer_dtype == "half":
        cfg["data_types"] = {"buffer_dtype": {"fp16": "fp16", "bf16": "bf16", "fp32": "fp32"}[args.dtype]}
    if args.gradient_clipping is not None:
        cfg["gradient_clipping"] = args.gradient_clipping
    return cfg


def main():
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
    p.add_argument("--freeze-d", action="store_true", help="D params requires_grad=False during the G step")
    p.add_argument(
        "--d-one-backward",
        action="store_true",
        help="D's two losses in one backward (their sum: the same gradient, one backward() per engine step)",
    )
    p.add_argument("--no-overlap-comm", action="store_true", help="overlap_comm=False, contiguous_gradients=False")
    p.add_argument("--single-engine", action="store_true", help="G and D in one engine with two param groups")
    p.add_argument(
        "--logits-loss",
        action="store_true",
        help="D without its Sigmoid, binary_cross_entropy_with_logits in fp32: the same loss, finite where a "
        "half-precision sigmoid saturates",
    )
    p.add_argument(
        "--g-step-raw-d",
        action="store_true",
        help="the G step calls D's raw module instead of its engine (no DeepSpeed output hooks on G's backward)",
    )
    p.add_argument("--zero-stage", type=int, default=1)
    p.add_argument("--buffer-dtype", choices=["half"], default=None, help="data_types.buffer_dtype = the run dtype")
    p.add_argument(
        "--gradient-clipping",
        type=float,
        default=None,
        help="the config's gradient_clipping (left out: DeepSpeed's default, 1.0 from 0.19.3, 0.0 before)",
    )
    args = p.parse_args()

    torch.manual_seed(args.seed)
    deepspeed.init_distributed()
    device = torch.device(get_accelerator().current_device_name())
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[args.dtype]
    nc, nz = 3, args.nz

    netG = Generator(0, args.ngf, nc, nz).to(device)
    netG.apply(weights_init)
    netD = Discriminator(0, args.ndf, nc, logits=args.logits_loss).to(device)
    netD.apply(weights_init)
    criterion = make_criterion(args)
    real_label, fake_label = 1, 0

    dataset = torch.utils.data.TensorDataset(
        torch.randn(args.steps * args.batch_size, nc, args.image_size, args.image_size)
    )
    dataloader = torch.utils.data.DataLoader(
        dataset, batch_size=args.batch_size, shuffle=True, generator=torch.Generator().manual_seed(args.seed)
    )
    config = lightning_default_config(args)

    if args.single_engine:
        # SEMANTIC CHANGE: one engine, one Adam with two param groups (0 = D, 1 = G).
        # engine.step() steps both groups, so the idle group gets lr=0 in each phase:
        # its weights do not move, but its Adam moments still see that phase's grads
        # (D's moments absorb the G-loss gradient; G's moments decay during the D phase).
        gan = GAN(netG, netD)
        opt = torch.optim.Adam(
            [{"params": netD.parameters()}, {"params": netG.parameters()}], lr=args.lr, betas=(args.beta1, 0.999)
        )
        engine, optimizer, _, _ = deepspeed.initialize(
            model=gan, model_parameters=gan.parameters(), optimizer=opt, config=config
        )
        engineD = engineG = engine

        def fwdD(x):
            return engine(x, "D")

        def fwdG(x):
            return engine(x, "G")

        def set_phase(phase):
            for idx, g in enumerate(optimizer.param_groups):
                g["lr"] = args.lr if idx == (0 if phase == "D" else 1) else 0.0
    else:
        optimizerD = torch.optim.Adam(netD.parameters(), lr=args.lr, betas=(args.beta1, 0.999))
        optimizerG = torch.optim.Adam(netG.parameters(), lr=args.lr, betas=(args.beta1, 0.999))
        engineD, optimizerD, _, _ = deepspeed.initialize(
            model=netD, model_parameters=netD.parameters(), optimizer=optimizerD, config=config
        )
        engineG, optimizerG, _, _ = deepspeed.initialize(
            model=netG, model_parameters=netG.parameters(), optimizer=optimizerG, config=config
        )
        fwdD, fwdG = engineD, engineG

        def set_phase(phase):
            pass

    fixes = [
        f
        for f, on in [
            ("freeze-d", args.freeze_d),
            ("d-one-backward", args.d_one_backward),
            ("no-overlap-comm", args.no_overlap_comm),
            ("single-engine", args.single_engine),
            ("buffer-dtype-half", args.buffer_dtype),
            ("logits-loss", args.logits_loss),
            ("g-step-raw-d", args.g_step_raw_d),
        ]
        if on
    ]
    if args.zero_stage != 1:
        fixes.append(f"zero-stage-{args.zero_stage}")
    if args.gradient_clipping is not None:
        fixes.append(f"gradient-clipping-{args.gradient_clipping:g}")
    print(
        "@@repro "
        + json.dumps(
            {
                "event": "config",
                "dtype": args.dtype,
                "zero_stage": engineD.zero_optimization_stage(),
                "fp16": engineD.fp16_enabled(),
                "bf16": engineD.bfloat16_enabled(),
                "overlap_comm": config["zero_optimization"]["overlap_comm"],
                "contiguous_gradients": config["zero_optimization"]["contiguous_gradients"],
                "buffer_dtype": config.get("data_types", {}).get("buffer_dtype"),
                "gradient_clipping": engineD.gradient_clipping(),  # what the engine does, the default included
                "fixes": fixes,
                "device": str(device),
                "engines": 1 if args.single_engine else 2,
                "optimizer": type(engineD.optimizer).__name__,
                "deepspeed": deepspeed.__version__,
                "torch": torch.__version__,
                "batch_size": args.batch_size,
            }
        ),
        flush=True,
    )
    print("@@repro " + json.dumps({"event": "setup", "seconds": time.perf_counter() - _T0}), flush=True)

    for i, data in enumerate(dataloader, 0):
        if i >= args.steps:
            break
        with step(i):
            ############################
            # (1) Update D network: maximize log(D(x)) + log(1 - D(G(z)))
            ###########################
            set_phase("D")
            netD.zero_grad()
            real = data[0].to(device)
            batch_size = real.size(0)
            label = torch.full((batch_size,), real_label, dtype=real.dtype, device=device)
            output = fwdD(real.to(dtype)).float()  # Fabric casts inputs to the run dtype, outputs back to fp32
            errD_real = criterion(output, label)
            if not args.d_one_backward:
                engineD.backward(errD_real)
            D_x = probability(output, args).mean().item()

            noise = torch.randn(batch_size, nz, 1, 1, device=device)
            fake = fwdG(noise.to(dtype)).float()
            # a new tensor when one backward takes both losses: errD_real's graph still needs the real labels
            label = label.clone().fill_(fake_label) if args.d_one_backward else label.fill_(fake_label)
            output = fwdD(fake.detach().to(dtype)).float()
            errD_fake = criterion(output, label)
            engineD.backward(errD_real + errD_fake if args.d_one_backward else errD_fake)
            D_G_z1 = probability(output, args).mean().item()
            errD = errD_real + errD_fake
            engineD.step()

            ############################
            # (2) Update G network: maximize log(D(G(z)))
            ###########################
            set_phase("G")
            netG.zero_grad()
            if args.freeze_d:
                for prm in netD.parameters():
                    prm.requires_grad_(False)
            try:
                label.fill_(real_label)  # fake labels are real for generator cost
                # --g-step-raw-d: D's own module, not its engine (no output hooks on G's backward), as DeepSpeedExamples
                output = (netD if args.g_step_raw_d else fwdD)(fake.to(dtype)).float()
                errG = criterion(output, label)
                engineG.backward(errG)  # goes through D's parameters -> D's ZeRO hooks fire
            finally:
                if args.freeze_d:
                    for prm in netD.parameters():
                        prm.requires_grad_(True)
            D_G_z2 = probability(output, args).mean().item()
            engineG.step()

            print(
                f"[{i}/{args.steps}] Loss_D: {errD.item():.4f} Loss_G: {errG.item():.4f} "
                f"D(x): {D_x:.4f} D(G(z)): {D_G_z1:.4f} / {D_G_z2:.4f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
