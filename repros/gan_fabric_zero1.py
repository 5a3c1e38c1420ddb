# /// script
# requires-python = ">=3.9"
# dependencies = ["torch", "lightning", "deepspeed"]
# ///
# ruff: noqa: I001, E701, UP031  (the report's code as filed: its import order, its one-line ifs, its % formats)
"""The report's code: a DCGAN under Lightning Fabric, two ``fabric.setup()`` calls, DeepSpeed ZeRO-1 (Lightning #19773).

The bug
    D and G each get a DeepSpeed engine. Lightning's ZeRO config has ``overlap_comm`` and ``contiguous_gradients`` on,
    so each engine's ZeRO-1 optimizer hooks every parameter. The G step computes ``netD(fake)`` and calls
    ``fabric.backward(errG, model=netG)``: autograd reaches D's parameters and fires D's hooks outside D's backward,
    when D has no gradient buffer. Lightning #17856 is the same failure; DeepSpeed #4923 is related.

Expected signature (DeepSpeed 0.16-era releases, step 0)
    TypeError: 'NoneType' object is not subscriptable, innermost deepspeed frame stage_1_and_2.py
    ``reduce_independent_p_g_buckets_and_remove_grads``, from ``fabric.backward(errG, model=netG)``. Other releases
    fail elsewhere (0.17.0: "The parameter N has already been reduced", step 1; 0.18.2: "'NoneType' object is not
    iterable" in D's second backward; >= 0.19.2: BatchNorm's fp32 buffers meet half inputs); the pure-DeepSpeed twin,
    gan_deepspeed_zero1.py, documents them.

What runs
    Between the two marker lines below: the report's code as filed, which ``tests/unit/test_repro_reports.py`` holds
    against the issue's text line by line. Lines ending in ``# adapted`` make it stand alone here (listed there too);
    lines ending in ``# instruments`` hook the harness's measurements (``instruments.py``): step events, the training
    check against plain ddp (``--check-training``), the image grid at the end. What the report imported from
    DeepSpeedExamples (``gan_model``, ``utils``) is in gan_example.py. Fix ``none`` runs this file as it is.

Fixes
    A patch to Lightning or DeepSpeed runs this file unchanged (repros/fixes/*.diff). The user-side fixes are flags of
    the sibling gan_fabric_zero1_fixes.py — this code with a few lines changed per flag; compare the two with diff.

Exit code contract: 0 = every step ran (and, with --check-training, the GAN trained); an uncaught exception is a
failure, its traceback on stderr. Event lines on stdout start with ``@@repro ``.
"""

# --- the report's code ---------------------------------------------------------------------------------------------
# fmt: off
import torch
import torch.backends.cudnn as cudnn
import torch.nn as nn
import torch.utils.data
from instruments import GanTrainingCheck, SummaryWriter  # adapted: tensorboard is not in a cell # instruments
from time import time

from lightning.fabric import Fabric
from gan_example import Generator, Discriminator, weights_init  # adapted: the example's gan_model.py
from gan_example import get_argument_parser, set_seed, create_folder, get_dataset  # adapted: its utils.py


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

    netD = Discriminator(ngpu, ndf, nc)
    netD.apply(weights_init)
    if args.netD != '':
        netD.load_state_dict(torch.load(args.netD))

    criterion = nn.BCELoss()

    real_label = 1
    fake_label = 0
    check = GanTrainingCheck(args, netG, netD, writer)  # instruments

    fabric = Fabric(accelerator="auto", devices=args.devices, precision=args.precision,  # adapted: CPU forms bf16
                    strategy="deepspeed_stage_1")
    fabric.launch()

    fixed_noise = torch.randn(args.batchSize, nz, 1, 1, device=fabric.device)

    # setup optimizer
    optimizerD = torch.optim.Adam(netD.parameters(), lr=args.lr, betas=(args.beta1, 0.999))
    optimizerG = torch.optim.Adam(netG.parameters(), lr=args.lr, betas=(args.beta1, 0.999))

    netD, optimizerD = fabric.setup(netD, optimizerD)
    netG, optimizerG = fabric.setup(netG, optimizerG)

    dataloader = fabric.setup_dataloaders(dataloader)
    dataloader = check.steps(dataloader, fabric, netD, netG, optimizerD, optimizerG)  # instruments

    if torch.cuda.is_available(): torch.cuda.synchronize()  # adapted: the CPU forms have no CUDA
    start = time()
    for epoch in range(args.epochs):
        for i, data in enumerate(dataloader, 0):
            ############################
            # (1) Update D network: maximize log(D(x)) + log(1 - D(G(z)))
            ###########################
            # train with real
            netD.zero_grad()
            real = data[0]
            batch_size = real.size(0)
            label = torch.full((batch_size,), real_label, dtype=real.dtype, device=fabric.device)
            output = netD(real)
            errD_real = criterion(output, label)
            fabric.backward(errD_real, model=netD)
            D_x = output.mean().item()

            # train with fake
            noise = torch.randn(batch_size, nz, 1, 1, device=fabric.device)
            fake = netG(noise)
            label.fill_(fake_label)
            output = netD(fake.detach())
            errD_fake = criterion(output, label)
            fabric.backward(errD_fake, model=netD)
            D_G_z1 = output.mean().item()
            errD = errD_real + errD_fake
            optimizerD.step()

            ############################
            # (2) Update G network: maximize log(D(G(z)))
            ###########################
            netG.zero_grad()
            label.fill_(real_label) # fake labels are real for generator cost
            output = netD(fake)
            errG = criterion(output, label)
            fabric.backward(errG, model=netG)
            D_G_z2 = output.mean().item()
            optimizerG.step()

            print('[%d/%d][%d/%d] Loss_D: %.4f Loss_G: %.4f D(x): %.4f D(G(z)): %.4f / %.4f'
                  % (epoch, args.epochs, i, len(dataloader),
                     errD.item(), errG.item(), D_x, D_G_z1, D_G_z2))
            writer.add_scalar("Loss_D", errD.item(), epoch*len(dataloader)+i)
            writer.add_scalar("Loss_G", errG.item(), epoch*len(dataloader)+i)

        # do checkpointing
        #torch.save(netG.state_dict(), '%s/netG_epoch_%d.pth' % (args.outf, epoch))
        #torch.save(netD.state_dict(), '%s/netD_epoch_%d.pth' % (args.outf, epoch))
    if torch.cuda.is_available(): torch.cuda.synchronize()  # adapted: the CPU forms have no CUDA
    stop = time()
    print(f"total wall clock time for {args.epochs} epochs is {stop-start} secs")
    check.finish(netG, fixed_noise)  # instruments: the image grid (the report's, every 100 steps), the verdict

def main():
    parser = get_argument_parser()
    args = parser.parse_args()
    train(args)

if __name__ == "__main__":
    main()
# fmt: on
# --- end of the report's code --------------------------------------------------------------------------------------
