"""What the GAN report imports from DeepSpeedExamples (training/gan): its models (``gan_model.py``) and its helpers
(``utils.py``: the argument parser, the seed, the output folder), plus the report's ``get_dataset`` reduced to the
``fake`` data set it ran.

The report's own code (``gan_fabric_zero1.py``) imports these, as it imported ``gan_model`` and ``utils``; the
pure-DeepSpeed twin (``gan_deepspeed_zero1.py``) takes the same models.  The parser keeps the report's argument names
(``args.batchSize``, ``args.manualSeed``...) and adds what the harness passes: ``--precision``, ``--steps``,
``--check-training`` and its tolerances, ``--data``.
"""

import argparse
import os
import random

import torch
import torch.nn as nn


# --- gan_model.py -------------------------------------------------------------------------------------------------
def weights_init(m):
    classname = m.__class__.__name__
    if classname.find("Conv") != -1:
        m.weight.data.normal_(0.0, 0.02)
    elif classname.find("BatchNorm") != -1:
        m.weight.data.normal_(1.0, 0.02)
        m.bias.data.fill_(0)


class Generator(nn.Module):
    def __init__(self, ngpu, ngf, nc, nz):
        super().__init__()
        self.ngpu = ngpu
        self.main = nn.Sequential(
            nn.ConvTranspose2d(nz, ngf * 8, 4, 1, 0, bias=False),
            nn.BatchNorm2d(ngf * 8),
            nn.ReLU(True),
            nn.ConvTranspose2d(ngf * 8, ngf * 4, 4, 2, 1, bias=False),
            nn.BatchNorm2d(ngf * 4),
            nn.ReLU(True),
            nn.ConvTranspose2d(ngf * 4, ngf * 2, 4, 2, 1, bias=False),
            nn.BatchNorm2d(ngf * 2),
            nn.ReLU(True),
            nn.ConvTranspose2d(ngf * 2, ngf, 4, 2, 1, bias=False),
            nn.BatchNorm2d(ngf),
            nn.ReLU(True),
            nn.ConvTranspose2d(ngf, nc, 4, 2, 1, bias=False),
            nn.Tanh(),
        )

    def forward(self, input):
        return self.main(input)


class Discriminator(nn.Module):
    def __init__(self, ngpu, ndf, nc, logits=False):
        super().__init__()
        self.ngpu = ngpu
        head = [] if logits else [nn.Sigmoid()]  # a fix's logits=True: the sigmoid moves into the loss (fp32)
        self.main = nn.Sequential(
            nn.Conv2d(nc, ndf, 4, 2, 1, bias=False),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf, ndf * 2, 4, 2, 1, bias=False),
            nn.BatchNorm2d(ndf * 2),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf * 2, ndf * 4, 4, 2, 1, bias=False),
            nn.BatchNorm2d(ndf * 4),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf * 4, ndf * 8, 4, 2, 1, bias=False),
            nn.BatchNorm2d(ndf * 8),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf * 8, 1, 4, 1, 0, bias=False),
            *head,
        )

    def forward(self, input):
        return self.main(input).view(-1, 1).squeeze(1)


# --- utils.py -----------------------------------------------------------------------------------------------------
def get_argument_parser():
    """The example's options under the report's names, with the defaults of a short run here (one epoch of
    ``--steps`` batches, no data-loading workers), and the harness's."""
    p = argparse.ArgumentParser(description="DCGAN (DeepSpeedExamples training/gan) under Lightning Fabric")
    p.add_argument("--dataset", default="fake", help="only 'fake' here: torchvision's FakeData, nothing downloaded")
    p.add_argument("--dataroot", default=None)
    p.add_argument("--workers", type=int, default=0)
    p.add_argument("--batch-size", dest="batchSize", type=int, default=64)
    p.add_argument("--image-size", dest="imageSize", type=int, default=64)
    p.add_argument("--nz", type=int, default=100)
    p.add_argument("--ngf", type=int, default=64)
    p.add_argument("--ndf", type=int, default=64)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--lr", type=float, default=0.0002)
    p.add_argument("--beta1", type=float, default=0.5)
    p.add_argument("--netG", default="")
    p.add_argument("--netD", default="")
    p.add_argument("--outf", default=".", help="folder for the image grid saved at the end (torchvision only)")
    p.add_argument("--seed", dest="manualSeed", type=int, default=999)
    p.add_argument("--tensorboard-path", dest="tensorboard_path", default=None)
    # what the harness passes
    p.add_argument("--precision", default="16-mixed", help="the report's '16-mixed'; the CPU forms pass bf16-mixed")
    p.add_argument("--steps", type=int, default=3, help="batches in the epoch: the fake data set's size")
    p.add_argument(
        "--devices",
        type=int,
        default=int(os.environ.get("LOCAL_WORLD_SIZE", "1")),
        help="1 as in the report; a launcher's ranks (the harness's --nproc, torchrun) give their number",
    )
    p.add_argument(
        "--data",
        choices=["auto", "torchvision", "tensors"],
        default="auto",
        help="the report's torchvision FakeData (auto: wherever torchvision imports) or bare tensors of its shape",
    )
    p.add_argument(
        "--check-training",
        action="store_true",
        help="after the steps, judge whether the GAN trained against strategy='ddp' (instruments.GanTrainingCheck)",
    )
    p.add_argument("--loss-tolerance", type=float, default=0.25, help="largest mean relative deviation from ddp")
    p.add_argument("--compare-steps", type=int, default=20, help="the first N steps are compared with ddp")
    return p


def set_seed(value):
    random.seed(value)
    try:
        import numpy as np
    except ImportError:
        pass
    else:
        np.random.seed(value)
    torch.manual_seed(value)


def create_folder(folder):
    os.makedirs(folder, exist_ok=True)


# --- the report's get_dataset, its ``fake`` branch ---------------------------------------------------------------
def get_dataset(args):
    """The ``fake`` data set through the example's image transforms, ``--steps`` batches for every rank, or bare
    tensors of its shape where torchvision does not import; what was fed, and why, goes to ``args.data_source``
    (the ``config`` event's ``data``)."""
    if args.dataset != "fake":
        msg = f"--dataset {args.dataset!r}: only 'fake' runs here (nothing is downloaded in a cell)"
        raise ValueError(msg)
    nc = 3
    size = args.steps * args.batchSize * max(1, int(os.environ.get("WORLD_SIZE", "1")))
    if args.data != "tensors":
        try:
            import torchvision.datasets as dset
            import torchvision.transforms as transforms
        except Exception as exc:  # not installed, or built for another torch (its import raises then)
            if args.data == "torchvision":
                raise
            args.data_source = f"tensors (torchvision not usable: {type(exc).__name__}: {str(exc)[:120]})"
        else:
            transform = transforms.Compose(
                [
                    transforms.Resize(args.imageSize),
                    transforms.CenterCrop(args.imageSize),
                    transforms.ToTensor(),
                    transforms.Normalize((0.5, 0.5, 0.5), (0.5, 0.5, 0.5)),
                ]
            )
            args.data_source = "torchvision FakeData"
            return dset.FakeData(size=size, image_size=(nc, args.imageSize, args.imageSize), transform=transform), nc
    else:
        args.data_source = "tensors (--data tensors)"
    return torch.utils.data.TensorDataset(torch.randn(size, nc, args.imageSize, args.imageSize)), nc
