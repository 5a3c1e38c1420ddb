# /// script
# requires-python = ">=3.9"
# dependencies = ["torch", "lightning", "deepspeed"]
# ///
# ruff: noqa: I001, E701, UP031  (kept as the report's code is, so that diff shows only the fixes)
"""The report's code (gan_fabric_zero1.py) with the user-side candidate fixes as flags; without a flag it is that code.

Each flag changes a few lines, marked with its name (``diff gan_fabric_zero1.py gan_fabric_zero1_fixes.py`` shows them
all); matrix.yaml's fixes combine them:

    --freeze-d            D's parameters require no grad during the G step, so D's ZeRO hooks stay quiet
    --no-overlap-comm     DeepSpeedStrategy(overlap_comm=False, contiguous_gradients=False)
    --zero-stage N        DeepSpeed ZeRO stage N instead of 1
    --buffer-dtype half   DeepSpeed's data_types.buffer_dtype = the run's half type (BatchNorm buffers, >= 0.19.2)
    --gradient-clipping X DeepSpeed's gradient_clipping (left out: 1.0 from 0.19.3, 0.0 before; Fabric's config
                          leaves it out)
    --d-one-backward      D's two losses in one backward (their sum: the same gradient), for an engine that keeps
                          only the last backward of a step (0.18.3 on) or refuses a second (0.17.6 on)
    --logits-loss         D's sigmoid moves into the loss (binary_cross_entropy_with_logits in fp32): in fp16 the
                          report's sigmoid rounds to 0 or 1 once D is sure, BCELoss's gradient there is infinite
    --g-step-raw-d        the G step calls D's raw module, not its engine: from 0.18.5 D's engine refuses, in fp16,
                          a backward through its outputs that it did not scale
    --single-engine       G and D in one fabric.setup() (one Adam, two param groups; the idle group gets lr 0)
    --control-d-one-loss  a negative control for --check-training: D learns from its real-image loss only

Exit code contract, events and --check-training: as gan_fabric_zero1.py.
"""

# fmt: off
import torch
import torch.backends.cudnn as cudnn
import torch.nn as nn
import torch.utils.data
from instruments import GanTrainingCheck, SummaryWriter, bce_with_logits
from time import time

from lightning.fabric import Fabric
from lightning.fabric.strategies import DeepSpeedStrategy
from gan_example import Generator, Discriminator, weights_init
from gan_example import get_argument_parser, set_seed, create_folder, get_dataset

FLAGS = ("freeze_d", "no_overlap_comm", "single_engine", "d_one_backward", "logits_loss", "g_step_raw_d")


class GAN(nn.Module):
    """--single-engine: both networks in one module, routed by ``net``."""

    def __init__(self, netG, netD):
        super().__init__()
        self.netG, self.netD = netG, netD

    def forward(self, x, net):
        return self.netG(x) if net == "G" else self.netD(x)


def make_strategy(args):
    """The report's ``"deepspeed_stage_1"``, or that strategy with --no-overlap-comm, --zero-stage, --buffer-dtype or
    --gradient-clipping applied to Lightning's default config (``config=`` would replace all of it)."""
    if not (args.no_overlap_comm or args.zero_stage != 1 or args.buffer_dtype or args.gradient_clipping is not None):
        return "deepspeed_stage_1"
    strategy = DeepSpeedStrategy(stage=args.zero_stage, **({"overlap_comm": False, "contiguous_gradients": False}
                                                            if args.no_overlap_comm else {}))
    if args.buffer_dtype == "half":
        half = "bf16" if args.precision.startswith("bf16") else "fp16" if args.precision.startswith("16") else "fp32"
        strategy.config["data_types"] = {"buffer_dtype": half}
    if args.gradient_clipping is not None:
        strategy.config["gradient_clipping"] = args.gradient_clipping
    return strategy


def fixes(args):
    """The fixes this run applies, as the ``config`` event names them."""
    names = [name.replace("_", "-") for name in FLAGS if getattr(args, name)]
    names += ["buffer-dtype-half"] if args.buffer_dtype else []
    names += [f"zero-stage-{args.zero_stage}"] if args.zero_stage != 1 else []
    names += [f"gradient-clipping-{args.gradient_clipping:g}"] if args.gradient_clipping is not None else []
    return names


def raw_forward(module, x):
    """--g-step-raw-d: D's forward without its engine, its input cast to D's parameter dtype and its output back to
    fp32, as Fabric's wrapper would do."""
    return module(x.to(next(module.parameters()).dtype)).float()


def train(args):
    writer = SummaryWriter(log_dir=args.tensorboard_path)
    create_folder(args.outf)
    set_seed(args.manualSeed)
    cudnn.benchmark = True
    dataset, nc = get_dataset(args)
    dataloader = torch.utils.data.DataLoader(dataset, batch_size=args.batchSize, shuffle=True, num_workers=int(args.workers))
    ngpu = 0
    nz = int(args.nz)
    ngf = int(args.ngf)
    ndf = int(args.ndf)

    netG = Generator(ngpu, ngf, nc, nz)
    netG.apply(weights_init)
    if args.netG != '':
        netG.load_state_dict(torch.load(args.netG))

    netD = Discriminator(ngpu, ndf, nc, logits=args.logits_loss)  # --logits-loss
    netD.apply(weights_init)
    if args.netD != '':
        netD.load_state_dict(torch.load(args.netD))

    criterion = bce_with_logits if args.logits_loss else nn.BCELoss()  # --logits-loss
    probability = (lambda o: torch.sigmoid(o.float())) if args.logits_loss else (lambda o: o)  # --logits-loss

    real_label = 1
    fake_label = 0
    check = GanTrainingCheck(args, netG, netD, writer, criterion=criterion if args.logits_loss else None,
                             logits=args.logits_loss, fixes=fixes(args))

    fabric = Fabric(accelerator="auto", devices=args.devices, precision=args.precision,
                    strategy=make_strategy(args))  # --no-overlap-comm --zero-stage --buffer-dtype --gradient-clipping
    fabric.launch()

    fixed_noise = torch.randn(args.batchSize, nz, 1, 1, device=fabric.device)
    origD = netD

    if args.single_engine:  # --single-engine: one engine, one Adam with two param groups (0 = D, 1 = G)
        optimizer = torch.optim.Adam([{"params": netD.parameters()}, {"params": netG.parameters()}], lr=args.lr,
                                     betas=(args.beta1, 0.999))
        gan, optimizer = fabric.setup(GAN(netG, netD), optimizer)
        optimizerD = optimizerG = optimizer
        modelD = modelG = gan
        fwdD, fwdG = (lambda x: gan(x, "D")), (lambda x: gan(x, "G"))

        def set_phase(phase):  # the idle group gets lr 0: its weights stay, its Adam moments see the phase's grads
            for idx, g in enumerate(optimizer.param_groups):
                g["lr"] = args.lr if idx == (0 if phase == "D" else 1) else 0.0
    else:
        # setup optimizer
        optimizerD = torch.optim.Adam(netD.parameters(), lr=args.lr, betas=(args.beta1, 0.999))
        optimizerG = torch.optim.Adam(netG.parameters(), lr=args.lr, betas=(args.beta1, 0.999))

        netD, optimizerD = fabric.setup(netD, optimizerD)
        netG, optimizerG = fabric.setup(netG, optimizerG)
        modelD, modelG, fwdD, fwdG = netD, netG, netD, netG

        def set_phase(phase):
            pass

    dataloader = fabric.setup_dataloaders(dataloader)
    dataloader = check.steps(dataloader, fabric, modelD, modelG, optimizerD, optimizerG)

    if torch.cuda.is_available(): torch.cuda.synchronize()
    start = time()
    for epoch in range(args.epochs):
        for i, data in enumerate(dataloader, 0):
            ############################
            # (1) Update D network: maximize log(D(x)) + log(1 - D(G(z)))
            ###########################
            # train with real
            set_phase("D")  # --single-engine
            netD.zero_grad()
            real = data[0]
            batch_size = real.size(0)
            label = torch.full((batch_size,), real_label, dtype=real.dtype, device=fabric.device)
            output = fwdD(real)
            errD_real = criterion(output, label)
            if not args.d_one_backward:  # --d-one-backward
                fabric.backward(errD_real, model=modelD)
            D_x = probability(output).mean().item()

            # train with fake
            noise = torch.randn(batch_size, nz, 1, 1, device=fabric.device)
            fake = fwdG(noise)
            # --d-one-backward: a new label tensor, errD_real's graph still needs the real labels
            label = label.clone().fill_(fake_label) if args.d_one_backward else label.fill_(fake_label)
            output = fwdD(fake.detach())
            errD_fake = criterion(output, label)
            if args.d_one_backward:  # --d-one-backward: one backward of the sum, the same gradient
                fabric.backward(errD_real + errD_fake, model=modelD)
            elif not args.control_d_one_loss:  # --control-d-one-loss
                fabric.backward(errD_fake, model=modelD)
            D_G_z1 = probability(output).mean().item()
            errD = errD_real + errD_fake
            optimizerD.step()

            ############################
            # (2) Update G network: maximize log(D(G(z)))
            ###########################
            set_phase("G")  # --single-engine
            netG.zero_grad()
            for prm in netD.parameters() if args.freeze_d else ():  # --freeze-d
                prm.requires_grad_(False)
            label.fill_(real_label) # fake labels are real for generator cost
            output = raw_forward(origD, fake) if args.g_step_raw_d else fwdD(fake)  # --g-step-raw-d
            errG = criterion(output, label)
            fabric.backward(errG, model=modelG)
            for prm in netD.parameters() if args.freeze_d else ():  # --freeze-d
                prm.requires_grad_(True)
            D_G_z2 = probability(output).mean().item()
            optimizerG.step()

            print('[%d/%d][%d/%d] Loss_D: %.4f Loss_G: %.4f D(x): %.4f D(G(z)): %.4f / %.4f'
                  % (epoch, args.epochs, i, len(dataloader),
                     errD.item(), errG.item(), D_x, D_G_z1, D_G_z2))
            writer.add_scalar("Loss_D", errD.item(), epoch*len(dataloader)+i)
            writer.add_scalar("Loss_G", errG.item(), epoch*len(dataloader)+i)

    if torch.cuda.is_available(): torch.cuda.synchronize()
    stop = time()
    print(f"total wall clock time for {args.epochs} epochs is {stop-start} secs")
    check.finish(fwdG, fixed_noise)

def main():
    parser = get_argument_parser()
    parser.add_argument("--freeze-d", action="store_true")
    parser.add_argument("--no-overlap-comm", action="store_true")
    parser.add_argument("--zero-stage", type=int, default=1)
    parser.add_argument("--buffer-dtype", choices=["half"], default=None)
    parser.add_argument("--gradient-clipping", type=float, default=None)
    parser.add_argument("--d-one-backward", action="store_true")
    parser.add_argument("--logits-loss", action="store_true")
    parser.add_argument("--g-step-raw-d", action="store_true")
    parser.add_argument("--single-engine", action="store_true")
    parser.add_argument("--control-d-one-loss", action="store_true")
    args = parser.parse_args()
    train(args)

if __name__ == "__main__":
    main()
# fmt: on
