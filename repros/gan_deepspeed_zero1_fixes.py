# /// script
# requires-python = ">=3.9"
# dependencies = ["torch", "deepspeed"]
# ///
"""The GAN report's loop on plain DeepSpeed (gan_deepspeed_zero1.py) with the candidate fixes as flags; no flag: that code.

Each flag changes a few lines, marked with its name (``diff gan_deepspeed_zero1.py gan_deepspeed_zero1_fixes.py``
shows them all); matrix.yaml's fixes combine them:

    --freeze-d            D's parameters require no grad during the G step, so D's ZeRO hooks stay quiet
    --d-one-backward      D's two losses in one backward (their sum: the same gradient, one backward() per step())
    --no-overlap-comm     overlap_comm=False, contiguous_gradients=False
    --single-engine       G and D in one engine (one Adam, two param groups; the idle group gets lr 0)
    --zero-stage N        ZeRO stage N instead of 1
    --buffer-dtype half   data_types.buffer_dtype = the run dtype (BatchNorm buffers stay fp32 from 0.19.2)
    --logits-loss         D without its Sigmoid, binary_cross_entropy_with_logits in fp32: the same loss, finite where
                          a half-precision sigmoid saturates
    --g-step-raw-d        the G step calls D's raw module, not its engine (no DeepSpeed output hooks on G's backward)
    --gradient-clipping X the config's gradient_clipping (left out: DeepSpeed's default, 1.0 from 0.19.3, 0.0 before)

Exit code contract, events and how to run it: as gan_deepspeed_zero1.py.
"""

import argparse

import deepspeed
import torch
import torch.nn as nn
from deepspeed.accelerator import get_accelerator
from gan_example import Discriminator, Generator, weights_init  # the models of DeepSpeedExamples' GAN
from instruments import bce_with_logits, engine_config, setup_done, step  # the events every repro prints


class GAN(nn.Module):
    """--single-engine: both networks in one module, routed by ``net``."""

    def __init__(self, netG, netD):
        super().__init__()
        self.netG, self.netD = netG, netD

    def forward(self, x, net):
        return self.netG(x) if net == "G" else self.netD(x)


def fixes(args):
    """The fixes this run applies, as the ``config`` event names them."""
    clip = args.gradient_clipping
    applied = {
        "freeze-d": args.freeze_d,
        "d-one-backward": args.d_one_backward,
        "no-overlap-comm": args.no_overlap_comm,
        "single-engine": args.single_engine,
        "buffer-dtype-half": args.buffer_dtype,
        "logits-loss": args.logits_loss,
        "g-step-raw-d": args.g_step_raw_d,
        f"zero-stage-{args.zero_stage}": args.zero_stage != 1,
        f"gradient-clipping-{clip:g}" if clip is not None else "gradient-clipping": clip is not None,
    }
    return [name for name, on in applied.items() if on]


def lightning_default_config(args):
    """Lightning's DeepSpeedStrategy default config (lightning 2.6, _create_default_config + _format_config)."""
    zero = {
        "stage": args.zero_stage,  # --zero-stage
        "contiguous_gradients": not args.no_overlap_comm,  # --no-overlap-comm
        "overlap_comm": not args.no_overlap_comm,  # --no-overlap-comm
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
    if args.buffer_dtype == "half":  # --buffer-dtype
        cfg["data_types"] = {"buffer_dtype": {"fp16": "fp16", "bf16": "bf16", "fp32": "fp32"}[args.dtype]}
    if args.gradient_clipping is not None:  # --gradient-clipping
        cfg["gradient_clipping"] = args.gradient_clipping
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
    p.add_argument("--freeze-d", action="store_true", help="D params requires_grad=False during the G step")
    p.add_argument("--d-one-backward", action="store_true", help="D's two losses in one backward (their sum)")
    p.add_argument("--no-overlap-comm", action="store_true", help="overlap_comm=False, contiguous_gradients=False")
    p.add_argument("--single-engine", action="store_true", help="G and D in one engine with two param groups")
    p.add_argument("--logits-loss", action="store_true", help="D's sigmoid in the loss (fp32 BCE with logits)")
    p.add_argument("--g-step-raw-d", action="store_true", help="the G step calls D's raw module, not its engine")
    p.add_argument("--zero-stage", type=int, default=1)
    p.add_argument("--buffer-dtype", choices=["half"], default=None, help="data_types.buffer_dtype = the run dtype")
    p.add_argument("--gradient-clipping", type=float, default=None, help="the config's gradient_clipping")
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
    netD = Discriminator(0, args.ndf, nc, logits=args.logits_loss).to(device)  # --logits-loss
    netD.apply(weights_init)
    criterion = bce_with_logits if args.logits_loss else nn.BCELoss()  # --logits-loss
    probability = (lambda o: torch.sigmoid(o.float())) if args.logits_loss else (lambda o: o)  # --logits-loss
    real_label, fake_label = 1, 0

    size = (args.steps * args.batch_size, nc, args.image_size, args.image_size)
    dataset = torch.utils.data.TensorDataset(torch.randn(size))
    dataloader = torch.utils.data.DataLoader(
        dataset, batch_size=args.batch_size, shuffle=True, generator=torch.Generator().manual_seed(args.seed)
    )
    config = lightning_default_config(args)

    if args.single_engine:  # --single-engine: one engine, one Adam with two param groups (0 = D, 1 = G)
        # engine.step() steps both groups, so the idle group gets lr=0 in each phase: its weights do not move, but its
        # Adam moments still see that phase's grads (D's absorb the G-loss gradient; G's decay during the D phase)
        gan = GAN(netG, netD)
        opt = torch.optim.Adam(
            [{"params": netD.parameters()}, {"params": netG.parameters()}], lr=args.lr, betas=(args.beta1, 0.999)
        )
        engine, optimizer, _, _ = deepspeed.initialize(
            model=gan, model_parameters=gan.parameters(), optimizer=opt, config=config
        )
        engineD = engineG = engine
        fwdD, fwdG = (lambda x: engine(x, "D")), (lambda x: engine(x, "G"))

        def set_phase(phase):
            for idx, g in enumerate(optimizer.param_groups):
                g["lr"] = args.lr if idx == (0 if phase == "D" else 1) else 0.0
    else:
        # two engines, as the report's two fabric.setup() calls
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

    zero = config["zero_optimization"]
    engine_config(
        engineD,
        dtype=args.dtype,
        overlap_comm=zero["overlap_comm"],
        contiguous_gradients=zero["contiguous_gradients"],
        buffer_dtype=config.get("data_types", {}).get("buffer_dtype"),
        gradient_clipping=engineD.gradient_clipping(),  # what the engine does, the default included
        fixes=fixes(args),
        device=str(device),
        engines=1 if args.single_engine else 2,  # --single-engine
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
            set_phase("D")  # --single-engine
            netD.zero_grad()
            real = data[0].to(device)
            batch_size = real.size(0)
            label = torch.full((batch_size,), real_label, dtype=real.dtype, device=device)
            # as Fabric's wrapped modules: inputs cast to the run dtype, outputs back to fp32
            output = fwdD(real.to(dtype)).float()  # --single-engine
            errD_real = criterion(output, label)
            if not args.d_one_backward:  # --d-one-backward
                engineD.backward(errD_real)
            D_x = probability(output).mean().item()

            noise = torch.randn(batch_size, nz, 1, 1, device=device)
            fake = fwdG(noise.to(dtype)).float()  # --single-engine
            # --d-one-backward: a new label tensor, errD_real's graph still needs the real labels
            label = label.clone().fill_(fake_label) if args.d_one_backward else label.fill_(fake_label)
            output = fwdD(fake.detach().to(dtype)).float()  # --single-engine
            errD_fake = criterion(output, label)
            engineD.backward(errD_real + errD_fake if args.d_one_backward else errD_fake)  # --d-one-backward
            D_G_z1 = probability(output).mean().item()
            errD = errD_real + errD_fake
            engineD.step()

            ############################
            # (2) Update G network: maximize log(D(G(z)))
            ###########################
            set_phase("G")  # --single-engine
            netG.zero_grad()
            for prm in netD.parameters() if args.freeze_d else ():  # --freeze-d
                prm.requires_grad_(False)
            label.fill_(real_label)  # fake labels are real for generator cost
            output = (netD if args.g_step_raw_d else fwdD)(fake.to(dtype)).float()  # --g-step-raw-d
            errG = criterion(output, label)
            engineG.backward(errG)  # goes through D's parameters -> D's ZeRO hooks fire
            for prm in netD.parameters() if args.freeze_d else ():  # --freeze-d
                prm.requires_grad_(True)
            D_G_z2 = probability(output).mean().item()
            engineG.step()

            print(
                f"[{i}/{args.steps}] Loss_D: {errD.item():.4f} Loss_G: {errG.item():.4f} "
                f"D(x): {D_x:.4f} D(G(z)): {D_G_z1:.4f} / {D_G_z2:.4f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
