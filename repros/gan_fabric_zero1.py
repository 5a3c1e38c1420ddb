# /// script
# requires-python = ">=3.9"
# dependencies = ["torch", "lightning", "deepspeed"]
# ///
# ruff: noqa: E402  (third-party imports follow _T0 so that the setup time includes them)
"""Lightning Fabric DCGAN with two ``fabric.setup()`` calls under DeepSpeed ZeRO-1.

The bug
    The DeepSpeedExamples DCGAN (training/gan) ported to Fabric: ``Fabric(precision="16-mixed",
    strategy="deepspeed_stage_1")``, D and G each set up with their own ``fabric.setup()`` (two
    DeepSpeed engines).  Lightning's default ZeRO config has ``overlap_comm=True`` and
    ``contiguous_gradients=True``, so each engine's ZeRO-1 optimizer hooks every parameter.  The G
    step computes ``netD(fake)`` and calls ``fabric.backward(errG, model=netG)``: autograd also
    reaches D's parameters and fires D's hooks outside D's ``backward()``, when D has no gradient
    buffer (``ipg_buffer is None``).

Upstream reports
    Lightning #19773 ("Support GAN based model training with deepspeed which need to setup fabric
    twice"), Lightning #17856 (same failure with two set-ups); DeepSpeed #4923 is related.

Expected signature (as reported, DeepSpeed 0.16-era releases)
    TypeError: 'NoneType' object is not subscriptable
    innermost deepspeed frame: deepspeed/runtime/zero/stage_1_and_2.py
    ``reduce_independent_p_g_buckets_and_remove_grads``, raised from ``fabric.backward(errG,
    model=netG)`` (``lightning/fabric/plugins/precision/deepspeed.py`` backward), at step 0.
    Other DeepSpeed releases fail with other exceptions (measured on the CPU shim, bf16-mixed):
    0.17.0 AssertionError "The parameter N has already been reduced" at step 1 (D's first
    backward); 0.18.2 TypeError "'NoneType' object is not iterable" in
    independent_gradient_partition_epilogue at step 0 (D's second backward, a separate
    regression); >= 0.19.2 a CPU-only BatchNorm dtype error unless --buffer-dtype half.
    The pure-DeepSpeed twin, repros/gan_deepspeed_zero1.py, documents these in more detail.

Data, as in the report: torchvision's ``FakeData`` (the report's ``--dataset fake``, nothing downloaded) through
the report's transforms (Resize, CenterCrop, ToTensor, Normalize), and a grid of G's images saved with
``torchvision.utils.save_image`` at the end (``--outf``).  ``--data auto`` (the default) uses it wherever
torchvision imports, and otherwise feeds random tensors of the same shape (``--data tensors``), saying why in
its config line.  Left out: tensorboard, checkpoints, epochs (``--steps`` iterations).
On a machine without a GPU, Lightning refuses DeepSpeed; the harness then runs this file
unchanged under a CPU shim, with ``--precision bf16-mixed`` (DeepSpeed refuses fp16 on the CPU).

Candidate fixes (flags): --freeze-d, --d-one-backward, --no-overlap-comm, --single-engine, --zero-stage 0,
--buffer-dtype half (a CPU-only BatchNorm workaround for DeepSpeed >= 0.19.2), --logits-loss (D's sigmoid moves
into the loss, in fp32: the report's fp16 sigmoid saturates and every step then overflows), --g-step-raw-d (the G
step goes through D's raw module, not its engine: from DeepSpeed 0.18.5 D's engine refuses, in fp16, a backward it
did not scale).

Training (--check-training; the cuda form's default)
    "It runs" is not "it trains": after the steps, the same steps run again under plain ``strategy="ddp"`` (the
    reference a user would trust) from the same initial weights on the same images and noise, and the run fails
    with DoesNotTrain unless it had at least 50 steps, finite losses, G's and D's parameters both changed, the fp16
    loss scale off its minimum, and D's and G's losses over the first --compare-steps (20) steps within
    --loss-tolerance (25 %: mean absolute deviation relative to the reference's mean loss) of the reference's.
    Two correct runs agree there and part later: on the H200 (bf16-mixed, DeepSpeed 0.16.4, --freeze-d) D's and
    G's losses deviate 5.3 % and 2.4 % over 20 steps, 9 % and 3 % over 30, and 92 % and 69 % over 60, when the
    ddp run itself collapses (D's loss 100 from step 38).  A D that learns from one of its two losses
    (--control-d-one-loss, and what DeepSpeed 0.19.8 does on the CPU with buffer-dtype-half) deviates from its
    first steps, by far more than 25 %.  In fp16 the steps that DeepSpeed's loss scaling skipped (an overflow) are
    skipped in the reference too, and a run that skipped more than a quarter of its steps does not train.  The verdict
    is a ``training`` event.

Exit code contract: 0 = all ``--steps`` steps ran; an uncaught exception is a failure and its
traceback goes to stderr (non-zero exit).  Progress lines on stdout start with ``@@repro ``.
"""

import argparse
import contextlib
import copy
import functools
import json
import math
import os
import time

_T0 = time.perf_counter()

import lightning
import torch
import torch.nn as nn
from lightning.fabric import Fabric, seed_everything
from lightning.fabric.strategies import DeepSpeedStrategy


@contextlib.contextmanager
def step(i):
    sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)
    sync()
    t, ok = time.perf_counter(), False
    try:
        yield
        sync()
        ok = True
    finally:
        event = {"event": "step", "step": i, "seconds": time.perf_counter() - t, "ok": ok}
        print("@@repro " + json.dumps(event), flush=True)


# --- DCGAN models, as in DeepSpeedExamples training/gan/gan_model.py ---------
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
        head = [] if logits else [nn.Sigmoid()]  # --logits-loss: the sigmoid moves into the loss (fp32)
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


def make_criterion(args):
    """The report's ``nn.BCELoss()`` on D's sigmoid, or (--logits-loss) the same loss on D's logits in fp32.

    In fp16 the report's sigmoid rounds to exactly 0 or 1 once D is sure (fp16 has 10 mantissa bits), BCELoss's
    gradient there is (p - y) / max(p (1 - p), 1e-12): inf in half precision, so every step overflows and
    DeepSpeed's loss scale falls to its minimum.  ``binary_cross_entropy_with_logits`` is the same loss, finite."""
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


def _version(name):
    """An installed package's version, or None."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return None


def _samples(args):
    """Enough samples for --steps steps on every rank: Fabric's distributed sampler gives each of a launcher's ranks
    (WORLD_SIZE) its share of the data set."""
    return args.steps * args.batch_size * max(1, int(os.environ.get("WORLD_SIZE", "1")))


def make_dataset(args, nc):
    """The report's ``fake`` data set through its transforms, or bare tensors; and what was used, and why."""
    if args.data != "tensors":
        try:
            import torchvision.datasets as dset
            import torchvision.transforms as transforms
        except Exception as exc:  # not installed, or built for another torch (its import raises then)
            if args.data == "torchvision":
                raise
            why = f"tensors (torchvision not usable: {type(exc).__name__}: {str(exc)[:120]})"
        else:
            transform = transforms.Compose(
                [
                    transforms.Resize(args.image_size),
                    transforms.CenterCrop(args.image_size),
                    transforms.ToTensor(),
                    transforms.Normalize((0.5, 0.5, 0.5), (0.5, 0.5, 0.5)),
                ]
            )
            size = _samples(args)
            dataset = dset.FakeData(size=size, image_size=(nc, args.image_size, args.image_size), transform=transform)
            return dataset, "torchvision FakeData"
    else:
        why = "tensors (--data tensors)"
    return torch.utils.data.TensorDataset(torch.randn(_samples(args), nc, args.image_size, args.image_size)), why


def save_grid(images, args):
    """The report's image grid: G's images of the fixed noise, saved with torchvision; returns the file's path."""
    import torchvision.utils as vutils

    path = os.path.join(args.outf, "fake_samples.png")
    vutils.save_image(images.detach().float(), path, normalize=True)
    return path


class DoesNotTrain(AssertionError):
    """The steps ran but the GAN did not train (--check-training): a failure, not a pass."""


def _flat(module):
    """All of a module's parameters as one fp32 vector (a copy): what "the parameters changed" compares."""
    return torch.cat([p.detach().float().flatten() for p in module.parameters()]).clone()


def _loss_scale(model, fabric):
    """The current fp16 loss scale: the DeepSpeed engine's, or under another strategy (``--strategy ddp``) the
    GradScaler's of Fabric's 16-mixed, whose collapse shows that the report's fp16 model overflows there too;
    None in bf16."""
    engine = getattr(model, "_forward_module", model)
    optimizer = getattr(engine, "optimizer", None)
    for name in ("loss_scale", "cur_scale"):
        value = getattr(optimizer, name, None)
        if isinstance(value, (int, float)) or torch.is_tensor(value):
            return float(value)
    scaler = getattr(getattr(fabric, "_precision", None), "scaler", None)
    return float(scaler.get_scale()) if scaler is not None and scaler.is_enabled() else None


def _skipped(optimizer):
    """Whether the optimizer's last step was skipped: a DeepSpeed fp16 optimizer skips a step whose gradients
    overflowed (and lowers its loss scale); bf16 and fp32 never skip."""
    inner = getattr(optimizer, "optimizer", optimizer)  # Fabric's wrapper, then DeepSpeed's ZeRO optimizer
    return bool(getattr(inner, "overflow", False))


def reference_losses(args, initial, inputs, nc, devices, skips, scales):
    """TRAINING: the same steps under plain ``strategy="ddp"`` — the reference a user would trust — from the same
    initial weights on the same images and noise, in the same precision; returns each step's (D loss, G loss).

    A step that DeepSpeed's fp16 loss scaling skipped (its gradients overflowed at the current scale) is skipped here
    too (``skips``: per step, D's and G's): an overflow skip is how dynamic loss scaling works, not a wrong gradient,
    and a GAN is chaotic enough that one skipped step early on moves every later loss (measured on the H200: a fix
    that trains deviates 79 % from a reference that did not skip the same steps, 4 % in bf16, which never skips).
    How many steps were skipped is judged on its own (see ``training_verdict``).  And in fp16 the reference's
    GradScaler takes, before each step, the loss scale DeepSpeed used for it (``scales`` holds each step's scale
    after it, so step i ran under step i - 1's): left to itself it overflows on other steps than DeepSpeed did and
    skips them (measured: one step behind from step 3, 43 %); where it still overflows, the phase is run again at a
    lower scale (see ``stepped``), and each such retry is counted (``reference_skipped``); returns (losses,
    reference_skipped)."""
    ref = Fabric(accelerator="auto", devices=devices, precision=args.precision, strategy="ddp")
    ref.launch()  # under a launcher's ranks (or one process) this starts nothing: the process group exists
    netG = Generator(0, args.ngf, nc, args.nz)
    netG.load_state_dict(initial["G"])
    netD = Discriminator(0, args.ndf, nc, logits=args.logits_loss)
    netD.load_state_dict(initial["D"])
    optD = torch.optim.Adam(netD.parameters(), lr=args.lr, betas=(args.beta1, 0.999))
    optG = torch.optim.Adam(netG.parameters(), lr=args.lr, betas=(args.beta1, 0.999))
    netD, optD = ref.setup(netD, optD)
    netG, optG = ref.setup(netG, optG)
    criterion = make_criterion(args)
    scaler = getattr(ref._precision, "scaler", None)
    scaler = scaler if scaler is not None and scaler.is_enabled() else None
    losses, own_skips = [], {"D": 0, "G": 0}

    def follow(i, k):
        """The GradScaler on DeepSpeed's scale for step i (from step 1: it has no scale before its first backward,
        and both start at 2**16); returns the scale, to tell a skip of its own by its halving."""
        if scaler is None:
            return None
        if i > 0 and scales[i - 1][k] is not None:
            scaler.update(new_scale=float(scales[i - 1][k]))
        return scaler.get_scale()

    def stepped(net, k, i, skip, optimizer, backward_pass):
        """One phase of step i (D's or G's): its backward pass and, unless DeepSpeed skipped it, the optimizer step.
        Where the GradScaler overflows on its own, the phase runs again at its halved scale — the weights did not
        move, so the same inputs give the same gradients — and the reference never skips a step DeepSpeed took (at
        DeepSpeed's scale it did so on 22 of 60 D steps on 0.19.3); each such retry is counted."""
        scale = follow(i, k)
        for attempt in range(24):  # the scale halves each time: 2**24 below any scale DeepSpeed reaches
            loss = backward_pass(attempt)
            if skip:
                return loss
            optimizer.step()
            if scaler is None or scaler.get_scale() >= scale:
                return loss
            own_skips[net] += 1
            scale = scaler.get_scale()
        return loss

    def d_backward(attempt, real, noise, state):
        netD.zero_grad()
        state["label"] = label = torch.full((real.size(0),), 1.0, dtype=real.dtype, device=real.device)
        errD_real = criterion(netD(real), label)
        ref.backward(errD_real)
        if attempt == 0:  # G's forward once: ddp allows no second one before G's backward through it
            state["fake"] = netG(noise)
        errD_fake = criterion(netD(state["fake"].detach()), label.fill_(0.0))
        ref.backward(errD_fake)
        return errD_real + errD_fake

    def g_backward(attempt, real, noise, state):
        netG.zero_grad()
        if attempt > 0:  # the first backward freed G's graph; G has not moved, so this is the same fake
            state["fake"] = netG(noise)
        errG = criterion(netD(state["fake"]), state["label"].fill_(1.0))
        ref.backward(errG)
        return errG

    for i, ((real, noise), (skip_D, skip_G)) in enumerate(zip(inputs, skips, strict=True)):
        data = {"real": real, "noise": noise, "state": {}}
        errD = stepped("D", 0, i, skip_D, optD, functools.partial(d_backward, **data))
        errG = stepped("G", 1, i, skip_G, optG, functools.partial(g_backward, **data))
        losses.append((errD.item(), errG.item()))
        print(
            f"[ddp {len(losses) - 1}/{len(inputs)}] Loss_D: {losses[-1][0]:.4f} Loss_G: {losses[-1][1]:.4f}", flush=True
        )
    return losses, own_skips


def _deviation(ours, reference):
    """Mean absolute difference from the reference, relative to the reference's mean absolute loss."""
    scale = sum(abs(r) for r in reference) / len(reference)
    return sum(abs(o - r) for o, r in zip(ours, reference, strict=False)) / len(reference) / max(scale, 1e-8)


def training_verdict(
    args, losses, reference, before, after, scales, min_scale, skips, reference_skipped, clipping=None
):
    """TRAINING: at least 50 steps; finite losses; G's and D's parameters both changed; the loss scale (fp16) off
    its minimum at the end; D's and G's losses within --loss-tolerance (mean relative deviation) of the ddp
    reference's over the first --compare-steps steps. A D that learns from one of its two losses only drifts far
    from the reference from its first steps; two correct runs agree there and part later (a GAN is chaotic).

    ``clipping`` is the norm DeepSpeed clipped gradients to (0 or None: none). The reference does not clip: the
    script asks for no clipping, and from DeepSpeed 0.19.3 an engine whose config leaves ``gradient_clipping`` out
    (Fabric's does) clips to 1.0 — every step of this GAN (measured: gradient norms 18-90), a different training
    whose losses part from ddp's (H200: 17 % in bf16, 43 % in fp16). A deviation names it."""
    problems = []
    if len(losses) < 50:
        problems.append(f"only {len(losses)} steps (at least 50 are needed to judge)")
    flat = [value for pair in losses + reference for value in pair]
    finite = all(math.isfinite(v) for v in flat)
    if not finite:
        problems.append("a loss is not finite")
    changed = {net: bool((after[net] - before[net]).abs().max() > 0) for net in ("G", "D")}
    problems += [f"{net}'s parameters did not change" for net, moved in changed.items() if not moved]
    final = scales[-1] if scales else (None, None)
    if min_scale is not None:
        problems += [
            f"{net}'s loss scale is stuck at its minimum ({min_scale})"
            for net, scale in zip("DG", final, strict=True)
            if scale is not None and scale <= min_scale
        ]
    skipped = {net: sum(1 for pair in skips if pair[k]) for k, net in enumerate("DG")}
    problems += [
        f"{net}'s optimizer skipped {n} of {len(skips)} steps (fp16 overflow; at most a quarter may be skipped)"
        for net, n in skipped.items()
        if n > len(skips) / 4
    ]
    deviation = {"D": None, "G": None}
    window = min(args.compare_steps, len(losses))
    if window and finite:
        for k, net in enumerate("DG"):
            ours, theirs = [pair[k] for pair in losses[:window]], [pair[k] for pair in reference[:window]]
            deviation[net] = _deviation(ours, theirs)
            if deviation[net] > args.loss_tolerance:
                problems.append(
                    f"{net}'s losses deviate {deviation[net]:.0%} from strategy='ddp' on the same inputs over the "
                    f"first {window} steps (tolerance {args.loss_tolerance:.0%})"
                    + (
                        f"; DeepSpeed clipped the gradients to norm {clipping:g} (gradient_clipping; its default "
                        "from 0.19.3 where the config leaves it out), the ddp reference did not"
                        if clipping
                        else ""
                    )
                )
    return {
        "trains": not problems,
        "steps": len(losses),
        "finite": finite,
        "changed_G": changed["G"],
        "changed_D": changed["D"],
        "loss_scale_D": final[0],
        "loss_scale_G": final[1],
        "min_loss_scale": min_scale,
        "skipped_D": skipped["D"],
        "skipped_G": skipped["G"],
        "reference_skipped_D": reference_skipped["D"],
        "reference_skipped_G": reference_skipped["G"],
        "deviation_D": deviation["D"],
        "deviation_G": deviation["G"],
        "compared_steps": window,
        "tolerance": args.loss_tolerance,
        "reference": "ddp",
        "gradient_clipping": clipping,
        "problems": problems,
    }


def raw_forward(module, x):
    """--g-step-raw-d: D's forward without its DeepSpeed engine (as DeepSpeedExamples' GAN calls its raw modules):
    the input cast to D's (half) parameter dtype and the output back to fp32, as Fabric's wrapper would do. From
    DeepSpeed 0.18.5 the engine hooks its forward's outputs, and in fp16 its post-backward hook raises "Loss scaling is
    required ... backward() was called directly" when G's backward, scaled by G's engine, goes through them."""
    dtype = next(module.parameters()).dtype
    return module(x.to(dtype)).float()


def _clipping(model):
    """The gradient norm a DeepSpeed engine clips to (0.0: none; None: no engine), its config's default included."""
    engine = getattr(model, "_forward_module", model)
    clipping = getattr(engine, "gradient_clipping", None)
    return float(clipping()) if callable(clipping) else None


def make_strategy(args):
    """The report's ``"deepspeed_stage_1"``, or the same strategy with a candidate fix applied."""
    if not (args.no_overlap_comm or args.zero_stage != 1 or args.buffer_dtype or args.gradient_clipping is not None):
        return args.strategy
    kwargs = {"stage": args.zero_stage}
    if args.no_overlap_comm:
        kwargs.update(overlap_comm=False, contiguous_gradients=False)
    strategy = DeepSpeedStrategy(**kwargs)
    if args.buffer_dtype == "half":
        # Passing config= would replace Lightning's whole default config (ZeRO settings included);
        # adding one key to the default config the strategy just built keeps everything else.
        half = "bf16" if args.precision.startswith("bf16") else "fp16" if args.precision.startswith("16") else "fp32"
        strategy.config["data_types"] = {"buffer_dtype": half}
    if args.gradient_clipping is not None:
        strategy.config["gradient_clipping"] = args.gradient_clipping
    return strategy


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--precision", default="16-mixed")
    p.add_argument("--strategy", default="deepspeed_stage_1", help="used as is unless a DeepSpeed fix flag is given")
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--image-size", type=int, default=64)
    p.add_argument("--ngf", type=int, default=64)
    p.add_argument("--ndf", type=int, default=64)
    p.add_argument("--nz", type=int, default=100)
    p.add_argument("--lr", type=float, default=0.0002)
    p.add_argument("--beta1", type=float, default=0.5)
    p.add_argument("--seed", type=int, default=999)
    p.add_argument(
        "--data",
        choices=["auto", "torchvision", "tensors"],
        default="auto",
        help="the report's torchvision FakeData and transforms (auto: wherever torchvision imports) or bare tensors",
    )
    p.add_argument("--outf", default=".", help="folder for the image grid saved at the end (torchvision only)")
    p.add_argument(
        "--check-training",
        action="store_true",
        help="after the steps, check that the GAN trained (finite losses, G and D changed, loss scale off its "
        "minimum, losses within --loss-tolerance of the same steps under strategy='ddp'); DoesNotTrain if not",
    )
    p.add_argument(
        "--loss-tolerance",
        type=float,
        default=0.25,
        help="largest mean relative deviation of D's and G's losses from the ddp reference's (see TRAINING below)",
    )
    p.add_argument(
        "--compare-steps",
        type=int,
        default=20,
        help="the first N steps are compared with the ddp reference: two correct runs agree there (see TRAINING)",
    )
    p.add_argument(
        "--control-d-one-loss",
        action="store_true",
        help="a negative control for --check-training: D's update leaves out its fake-image loss, as a run that "
        "silently trains D on one of its two losses does; the check must call it DoesNotTrain",
    )
    p.add_argument("--freeze-d", action="store_true", help="D params requires_grad=False during the G step")
    p.add_argument(
        "--no-overlap-comm",
        action="store_true",
        help="DeepSpeedStrategy(overlap_comm=False, contiguous_gradients=False)",
    )
    p.add_argument("--single-engine", action="store_true", help="G and D in one fabric.setup() with two param groups")
    p.add_argument(
        "--d-one-backward",
        action="store_true",
        help="D's two losses in one backward (errD_real + errD_fake) instead of one backward each: the same "
        "gradient, for an engine that keeps only the last backward's gradient of a step",
    )
    p.add_argument(
        "--logits-loss",
        action="store_true",
        help="D ends without its Sigmoid and the loss is binary_cross_entropy_with_logits in fp32: the same loss, "
        "but finite where the report's fp16 sigmoid saturates (and the ddp reference uses it too)",
    )
    p.add_argument(
        "--g-step-raw-d",
        action="store_true",
        help="the G step calls D's raw module instead of its engine (no DeepSpeed output hooks on G's backward)",
    )
    p.add_argument("--zero-stage", type=int, default=1)
    p.add_argument(
        "--buffer-dtype", choices=["half"], default=None, help="DeepSpeed data_types.buffer_dtype = run dtype"
    )
    p.add_argument(
        "--gradient-clipping",
        type=float,
        default=None,
        help="DeepSpeed's gradient_clipping (left out: DeepSpeed's default, 1.0 from 0.19.3, 0.0 before)",
    )
    args = p.parse_args()

    seed_everything(args.seed)
    nc, nz = 3, args.nz
    dataset, data_source = make_dataset(args, nc)
    dataloader = torch.utils.data.DataLoader(dataset, batch_size=args.batch_size, shuffle=True)

    netG = Generator(0, args.ngf, nc, nz)
    netG.apply(weights_init)
    netD = Discriminator(0, args.ndf, nc, logits=args.logits_loss)
    netD.apply(weights_init)
    criterion = make_criterion(args)
    real_label, fake_label = 1, 0

    initial = {"G": copy.deepcopy(netG.state_dict()), "D": copy.deepcopy(netD.state_dict())}
    origG, origD = netG, netD  # their parameters are the engines' own (DeepSpeed converts modules in place)

    # one device as in the report; a launcher's ranks (the harness's --nproc, torchrun) give their number
    devices = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    fabric = Fabric(accelerator="auto", devices=devices, precision=args.precision, strategy=make_strategy(args))
    fabric.launch()

    _fixed_noise = torch.randn(
        args.batch_size, nz, 1, 1, device=fabric.device
    )  # as in the report: G's images of it are the grid

    if args.single_engine:
        # SEMANTIC CHANGE: one fabric.setup() -> one DeepSpeed engine holding G and D, one Adam with two
        # param groups (0 = D, 1 = G).  optimizer.step() steps both groups, so the idle group gets lr=0
        # in each phase: its weights do not move, but its Adam moments still see that phase's gradients
        # (D's moments absorb the G-loss gradient; G's moments decay during the D phase).
        optimizer = torch.optim.Adam(
            [{"params": netD.parameters()}, {"params": netG.parameters()}], lr=args.lr, betas=(args.beta1, 0.999)
        )
        gan, optimizer = fabric.setup(GAN(netG, netD), optimizer)
        optimizerD = optimizerG = optimizer
        modelD = modelG = gan

        def fwdD(x):
            return gan(x, "D")

        def fwdG(x):
            return gan(x, "G")

        def set_phase(phase):
            for idx, g in enumerate(optimizer.param_groups):
                g["lr"] = args.lr if idx == (0 if phase == "D" else 1) else 0.0
    else:
        optimizerD = torch.optim.Adam(netD.parameters(), lr=args.lr, betas=(args.beta1, 0.999))
        optimizerG = torch.optim.Adam(netG.parameters(), lr=args.lr, betas=(args.beta1, 0.999))
        netD, optimizerD = fabric.setup(netD, optimizerD)
        netG, optimizerG = fabric.setup(netG, optimizerG)
        modelD, modelG, fwdD, fwdG = netD, netG, netD, netG

        def set_phase(phase):
            pass

    dataloader = fabric.setup_dataloaders(dataloader)

    cfg = fabric.strategy.config if isinstance(fabric.strategy, DeepSpeedStrategy) else {}
    clipping = _clipping(modelD)  # what the engine does, DeepSpeed's default included
    zero = cfg.get("zero_optimization", {})
    fixes = [
        f
        for f, on in [
            ("freeze-d", args.freeze_d),
            ("no-overlap-comm", args.no_overlap_comm),
            ("single-engine", args.single_engine),
            ("buffer-dtype-half", args.buffer_dtype),
            ("d-one-backward", args.d_one_backward),
            ("logits-loss", args.logits_loss),
            ("g-step-raw-d", args.g_step_raw_d),
        ]
        if on
    ]
    if args.zero_stage != 1:
        fixes.append(f"zero-stage-{args.zero_stage}")
    if args.gradient_clipping is not None:
        fixes.append(f"gradient-clipping-{args.gradient_clipping:g}")
    import deepspeed

    print(
        "@@repro "
        + json.dumps(
            {
                "event": "config",
                "precision": fabric.strategy.precision.precision,
                "zero_stage": zero.get("stage"),
                "fp16": cfg.get("fp16", {}).get("enabled", False),
                "bf16": cfg.get("bf16", {}).get("enabled", False),
                "overlap_comm": zero.get("overlap_comm"),
                "contiguous_gradients": zero.get("contiguous_gradients"),
                "buffer_dtype": cfg.get("data_types", {}).get("buffer_dtype"),
                "gradient_clipping": clipping,
                "fixes": fixes,
                "device": str(fabric.device),
                "accelerator": type(fabric.accelerator).__name__,
                "strategy": type(fabric.strategy).__name__,
                "engines": 1 if args.single_engine else 2,
                "deepspeed": deepspeed.__version__,
                "lightning": lightning.__version__,
                "torch": torch.__version__,
                "batch_size": args.batch_size,
                "data": data_source,
                "torchvision": _version("torchvision"),
            }
        ),
        flush=True,
    )
    print("@@repro " + json.dumps({"event": "setup", "seconds": time.perf_counter() - _T0}), flush=True)

    before = {"G": _flat(origG), "D": _flat(origD)} if args.check_training else {}
    losses, inputs, scales, skips = [], [], [], []
    for i, data in enumerate(dataloader, 0):
        if i >= args.steps:
            break
        with step(i):
            ############################
            # (1) Update D network: maximize log(D(x)) + log(1 - D(G(z)))
            ###########################
            set_phase("D")
            netD.zero_grad()
            real = data[0]
            batch_size = real.size(0)
            label = torch.full((batch_size,), real_label, dtype=real.dtype, device=fabric.device)
            output = fwdD(real)
            errD_real = criterion(output, label)
            if not args.d_one_backward:
                fabric.backward(errD_real, model=modelD)
            D_x = probability(output, args).mean().item()

            # train with fake
            noise = torch.randn(batch_size, nz, 1, 1, device=fabric.device)
            fake = fwdG(noise)
            # a new tensor when one backward takes both losses: errD_real's graph still needs the real labels
            label = label.clone().fill_(fake_label) if args.d_one_backward else label.fill_(fake_label)
            output = fwdD(fake.detach())
            errD_fake = criterion(output, label)
            if args.d_one_backward:  # one backward of the sum: the same gradient, one backward() per step
                fabric.backward(errD_real + errD_fake, model=modelD)
            elif not args.control_d_one_loss:
                fabric.backward(errD_fake, model=modelD)
            D_G_z1 = probability(output, args).mean().item()
            errD = errD_real + errD_fake
            optimizerD.step()

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
                output = raw_forward(origD, fake) if args.g_step_raw_d else fwdD(fake)
                errG = criterion(output, label)
                fabric.backward(errG, model=modelG)  # goes through D's parameters -> D's ZeRO hooks fire
            finally:
                if args.freeze_d:
                    for prm in netD.parameters():
                        prm.requires_grad_(True)
            D_G_z2 = probability(output, args).mean().item()
            optimizerG.step()
            if args.check_training:
                losses.append((errD.item(), errG.item()))
                inputs.append((real.detach().clone(), noise.detach().clone()))
                scales.append((_loss_scale(modelD, fabric), _loss_scale(modelG, fabric)))
                skips.append((_skipped(optimizerD), _skipped(optimizerG)))

            print(
                f"[{i}/{args.steps}] Loss_D: {errD.item():.4f} Loss_G: {errG.item():.4f} "
                f"D(x): {D_x:.4f} D(G(z)): {D_G_z1:.4f} / {D_G_z2:.4f}",
                flush=True,
            )

    # the grid first: what G made is worth a look most when it did not train
    if data_source.startswith("torchvision") and fabric.is_global_zero:
        with torch.no_grad():
            grid = save_grid(fwdG(_fixed_noise), args)
        print(f"image grid of G's images saved: {grid}", flush=True)

    if args.check_training:
        reference, reference_skipped = reference_losses(args, initial, inputs, nc, devices, skips, scales)
        min_scale = cfg.get("fp16", {}).get("min_loss_scale", 1) if cfg.get("fp16", {}).get("enabled") else None
        after = {"G": _flat(origG), "D": _flat(origD)}
        verdict = training_verdict(
            args, losses, reference, before, after, scales, min_scale, skips, reference_skipped, clipping
        )
        print("@@repro " + json.dumps({"event": "training", **verdict}), flush=True)
        if not verdict["trains"]:
            raise DoesNotTrain("; ".join(verdict["problems"]))


if __name__ == "__main__":
    main()
