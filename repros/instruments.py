"""The instruments every repro shares: step events, the Trainer's events, the GAN's training check, the grid.

A repro is the report's code; what the harness measures about it lives here, so the report stays readable and one
fix of an instrument reaches every repro. The protocol is the harness's (``run/events.py``): one line per event on
stdout, ``@@repro {"event": ...}``, parsed there with caps; the step events, ``config``, ``setup`` and ``training``
keep the fields earlier records hold.

Used by the four repros beside this file (``import instruments``: a script's own folder is ``sys.path[0]``); a
script pasted from an issue can use it with ``triage SCRIPT --instruments`` (or by sitting beside it). matrix.yaml names it among each repro's ``inputs``: it is
readable in the sandbox, and an edit to it is part of every run's key.

    step(i)                    a context manager: one ``step`` event with its time and whether it finished
    event(name, **fields)      any other event (``config``, ``setup``)
    setup_done()               the ``setup`` event: seconds from the process's start to its first step
    engine_config(engine, ...) a plain-DeepSpeed repro's ``config`` event: its engine's ZeRO stage and half types
    local_ranks(nprocs)        ``--nprocs N`` by hand: this script on N local gloo ranks, unless a launcher started them
    trainer_events(t0, ...)    a Lightning Trainer callback: ``config`` and ``setup`` at the first batch, then steps
    GanTrainingCheck           the report's GAN loop watched from outside: step events per batch, inputs, losses
                               (from the report's SummaryWriter calls), loss scales; then the ddp reference, the
                               ``training`` verdict and the image grid
    SummaryWriter              stands in for tensorboard's: keeps the scalars (the losses the check compares)
"""

from __future__ import annotations

import contextlib
import copy
import functools
import json
import math
import os
import sys
import time

MARK = "@@repro "
_T0 = time.perf_counter()


def _process_seconds():
    """Seconds since this process started (what ``setup`` reports: imports included), or since this module loaded
    where /proc is not there."""
    try:
        with open("/proc/self/stat", encoding="ascii") as f:
            start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime", encoding="ascii") as f:
            uptime = float(f.read().split()[0])
        return max(0.0, uptime - start_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return time.perf_counter() - _T0


def event(name, **fields):
    """Print one harness event (``config``, ``setup``, ``step``, ``training``)."""
    print(MARK + json.dumps({"event": name, **fields}), flush=True)


def setup_done():
    """The ``setup`` event: how long the run took to reach its first step."""
    event("setup", seconds=_process_seconds())


def engine_config(engine, *, dtype, **fields):
    """The ``config`` event of a plain-DeepSpeed repro: the run's dtype, what its engine does (ZeRO stage, fp16,
    bf16), the repro's own ``fields`` (``fixes``, ``device``...), the versions."""
    import deepspeed
    import torch

    event(
        "config",
        dtype=dtype,
        zero_stage=engine.zero_optimization_stage(),
        fp16=engine.fp16_enabled(),
        bf16=engine.bfloat16_enabled(),
        **fields,
        deepspeed=deepspeed.__version__,
        torch=torch.__version__,
    )


def _sync():
    import torch

    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


@contextlib.contextmanager
def step(i):
    """Time step ``i`` (the GPU's queue drained at both ends); the event says ``ok: false`` when it raised."""
    _sync()
    t, ok = time.perf_counter(), False
    try:
        yield
        _sync()
        ok = True
    finally:
        event("step", step=i, seconds=time.perf_counter() - t, ok=ok)


def local_ranks(nprocs):
    """``--nprocs N`` of a script run by hand: start the script on N local ranks (gloo on the CPU; rank 0 keeps stdout)
    and exit with their exit code. Returns at once where N is 1 or the ranks are already started (by this function,
    the harness's ``--nproc`` or torchrun)."""
    import subprocess

    started = os.environ.get("REPRO_LOCAL_CHILD") == "1" or int(os.environ.get("WORLD_SIZE", "1")) > 1
    if nprocs <= 1 or started:
        return
    script = os.path.abspath(sys.modules["__main__"].__file__)
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
        stdout = None if r == 0 else subprocess.DEVNULL
        procs.append(subprocess.Popen([sys.executable, script, *sys.argv[1:]], env=env, stdout=stdout))
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
    sys.exit(rc)


def trainer_events(t0, *, optimizer, fixes):
    """A Lightning Trainer ``Callback`` (the ZeRO-3 report's): at the first training batch the ``config`` event (the
    strategy's DeepSpeed config, the optimizer, the parameters' dtype, the versions) and ``setup`` (seconds since
    ``t0``), then ``step(i)`` around each training batch; a step an exception escapes says ``ok: false``."""
    import lightning
    import torch
    from lightning.pytorch import Callback

    class TrainerEvents(Callback):
        def __init__(self):
            self.cm, self.started = None, False

        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
            if not self.started:
                self.started = True
                import deepspeed

                cfg = getattr(trainer.strategy, "config", None) or {}
                zero = cfg.get("zero_optimization", {})
                opt = trainer.optimizers[0] if trainer.optimizers else None
                event(
                    "config",
                    precision=trainer.precision,
                    zero_stage=zero.get("stage"),
                    fp16=cfg.get("fp16", {}).get("enabled", False),
                    bf16=cfg.get("bf16", {}).get("enabled", False),
                    optimizer=optimizer,
                    optimizer_class=type(getattr(opt, "optimizer", opt)).__name__,
                    param_dtype=str(next(pl_module.parameters()).dtype),
                    fixes=list(fixes),
                    device=str(trainer.strategy.root_device),
                    accelerator=type(trainer.accelerator).__name__,
                    strategy=type(trainer.strategy).__name__,
                    deepspeed=deepspeed.__version__,
                    lightning=lightning.__version__,
                    torch=torch.__version__,
                )
                event("setup", seconds=time.perf_counter() - t0)
            self.cm = step(batch_idx)
            self.cm.__enter__()

        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            cm, self.cm = self.cm, None
            cm.__exit__(None, None, None)

        def on_exception(self, trainer, pl_module, exception):
            if self.cm is not None:  # the exception escaped a training step: close it with ok=false
                cm, self.cm = self.cm, None
                cm.__exit__(type(exception), exception, exception.__traceback__)

    return TrainerEvents()


class DoesNotTrain(AssertionError):
    """The steps ran but the GAN did not train (--check-training): a failure, not a pass."""


# The traceback names it as the repros did when the class was their own: the known signature ``does-not-train`` and
# the signature ids of earlier records read ``DoesNotTrain``, not ``instruments.DoesNotTrain``.
DoesNotTrain.__module__ = "__main__"


class SummaryWriter:
    """Stands in for ``torch.utils.tensorboard.SummaryWriter`` (tensorboard is not in a cell): keeps each tag's
    scalars in order, which is where the training check reads the report's losses."""

    def __init__(self, log_dir=None, **_ignored):
        self.log_dir = log_dir
        self.scalars = {}

    def add_scalar(self, tag, value, global_step=None):
        self.scalars.setdefault(tag, []).append(float(value))


def flat(module):
    """All of a module's parameters as one fp32 vector (a copy): what "the parameters changed" compares."""
    import torch

    return torch.cat([p.detach().float().flatten() for p in module.parameters()]).clone()


def loss_scale(model, fabric):
    """The current fp16 loss scale: the DeepSpeed engine's, or under another strategy the GradScaler's of Fabric's
    16-mixed (whose collapse shows that the report's fp16 model overflows there too); None in bf16."""
    import torch

    engine = getattr(model, "_forward_module", model)
    optimizer = getattr(engine, "optimizer", None)
    for name in ("loss_scale", "cur_scale"):
        value = getattr(optimizer, name, None)
        if isinstance(value, (int, float)) or torch.is_tensor(value):
            return float(value)
    scaler = getattr(getattr(fabric, "_precision", None), "scaler", None)
    return float(scaler.get_scale()) if scaler is not None and scaler.is_enabled() else None


def skipped(optimizer):
    """Whether the optimizer's last step was skipped: a DeepSpeed fp16 optimizer skips a step whose gradients
    overflowed (and lowers its loss scale); bf16 and fp32 never skip."""
    inner = getattr(optimizer, "optimizer", optimizer)  # Fabric's wrapper, then DeepSpeed's ZeRO optimizer
    return bool(getattr(inner, "overflow", False))


def clipping(model):
    """The gradient norm a DeepSpeed engine clips to (0.0: none; None: no engine), its config's default included."""
    engine = getattr(model, "_forward_module", model)
    value = getattr(engine, "gradient_clipping", None)
    return float(value()) if callable(value) else None


def save_grid(images, outf):
    """The report's image grid: G's images of the fixed noise, saved with torchvision; returns the file's path."""
    import torchvision.utils as vutils

    path = os.path.join(outf, "fake_samples.png")
    vutils.save_image(images.detach().float(), path, normalize=True)
    return path


def bce_with_logits(output, label):
    """The report's BCELoss on D's logits, in fp32 (--logits-loss): the same loss, finite where an fp16 sigmoid
    rounds to 0 or 1 and BCELoss's gradient is infinite."""
    import torch

    return torch.nn.functional.binary_cross_entropy_with_logits(output.float(), label.float())


class _Steps:
    """The report's data loader, watched: batch i starts step i, asking for the next batch ends it."""

    def __init__(self, loader, check):
        self.loader, self.check = loader, check

    def __len__(self):
        return len(self.loader)

    def __iter__(self):
        for data in self.loader:
            self.check._begin(data)
            yield data
            self.check._end()


class GanTrainingCheck:
    """The report's GAN loop, watched from outside it, and (``--check-training``) judged against plain ddp.

    Three lines of the report call it: ``check = GanTrainingCheck(args, netG, netD, writer)`` before Fabric is made
    (the initial weights), ``dataloader = check.steps(dataloader, fabric, netD, netG, optimizerD, optimizerG)`` after
    the set-up (config and setup events; each batch is a step), and ``check.finish(netG, fixed_noise)`` after the loop
    (the grid, then the verdict). A step that raises is reported ``ok: false`` by an exception hook, so the loop
    itself is the report's, unindented.

    "It runs" is not "it trains": the same steps run again under ``strategy="ddp"`` (the reference a user would
    trust) from the same initial weights on the same images and noise, and the run fails with DoesNotTrain unless it
    had at least 50 steps, finite losses, G's and D's parameters both changed, the fp16 loss scale off its minimum,
    at most a quarter of its steps skipped by fp16 overflow, and D's and G's losses over the first --compare-steps
    (20) steps within --loss-tolerance (25 %: mean absolute deviation relative to the reference's mean loss) of the
    reference's. Two correct runs agree there and part later: on the H200 (bf16-mixed, DeepSpeed 0.16.4, freeze-d)
    D's and G's losses deviate 5.3 % and 2.4 % over 20 steps, 92 % and 69 % over 60, when ddp itself collapses. A D
    that learns from one of its two losses deviates from its first steps, by far more than 25 %.
    """

    def __init__(self, args, netG, netD, writer, *, criterion=None, logits=False, fixes=()):
        self.args, self.writer, self.fixes = args, writer, list(fixes)
        self.criterion = criterion  # None: the report's nn.BCELoss()
        self.logits = logits
        self.initial = {"G": copy.deepcopy(netG.state_dict()), "D": copy.deepcopy(netD.state_dict())}
        # the modules themselves: DeepSpeed converts them in place, so their parameters are the engines' own
        self.modules = {"G": netG, "D": netD}
        self.generator, self.discriminator = type(netG), type(netD)
        self.inputs, self.scales, self.skips = [], [], []
        self.index, self.open, self.noise = 0, None, None

    def steps(self, dataloader, fabric, netD, netG, optimizerD, optimizerG):
        """The report's data loader with each batch a step; prints the config and setup events first."""
        self.fabric, self.nets, self.optimizers = fabric, (netD, netG), (optimizerD, optimizerG)
        netG.register_forward_pre_hook(self._noise)  # G's first input in a step is its noise (report's ``noise``)
        self.before = {net: flat(module) for net, module in self.modules.items()}
        self._config()
        setup_done()
        previous = sys.excepthook

        def hook(kind, value, tb):  # a step that raised: its event first, then the traceback
            if self.open is not None:
                self._close(ok=False)
            previous(kind, value, tb)

        sys.excepthook = hook
        return _Steps(dataloader, self)

    def _noise(self, module, inputs):
        if len(inputs) > 1 and inputs[1] != "G":  # a module holding G and D (single-engine): D's calls
            return
        if self.open is not None and self.noise is None and inputs:
            self.noise = inputs[0].detach().clone()

    def _begin(self, data):
        _sync()
        self.open, self.noise = time.perf_counter(), None
        self.real = data[0].detach().clone() if self.args.check_training else None

    def _end(self):
        if self.args.check_training:
            (netD, netG), (optD, optG) = self.nets, self.optimizers
            self.inputs.append((self.real, self.noise))
            self.scales.append((loss_scale(netD, self.fabric), loss_scale(netG, self.fabric)))
            self.skips.append((skipped(optD), skipped(optG)))
        _sync()
        self._close(ok=True)

    def _close(self, *, ok):
        event("step", step=self.index, seconds=time.perf_counter() - self.open, ok=ok)
        self.index, self.open = self.index + 1, None

    def _config(self):
        import deepspeed
        import lightning
        import torch
        from lightning.fabric.strategies import DeepSpeedStrategy

        fabric, args = self.fabric, self.args
        cfg = fabric.strategy.config if isinstance(fabric.strategy, DeepSpeedStrategy) else {}
        zero = cfg.get("zero_optimization", {})
        self.cfg, self.clipping = cfg, clipping(self.nets[0])
        event(
            "config",
            precision=fabric.strategy.precision.precision,
            zero_stage=zero.get("stage"),
            fp16=cfg.get("fp16", {}).get("enabled", False),
            bf16=cfg.get("bf16", {}).get("enabled", False),
            overlap_comm=zero.get("overlap_comm"),
            contiguous_gradients=zero.get("contiguous_gradients"),
            buffer_dtype=cfg.get("data_types", {}).get("buffer_dtype"),
            gradient_clipping=self.clipping,
            fixes=self.fixes,
            device=str(fabric.device),
            accelerator=type(fabric.accelerator).__name__,
            strategy=type(fabric.strategy).__name__,
            engines=1 if self.nets[0] is self.nets[1] else 2,
            deepspeed=deepspeed.__version__,
            lightning=lightning.__version__,
            torch=torch.__version__,
            batch_size=args.batchSize,
            data=getattr(args, "data_source", None),
            torchvision=_version("torchvision"),
        )

    def finish(self, netG, fixed_noise):
        """After the loop (``netG``: G's forward as the loop calls it): the grid of G's images of the fixed noise (worth a look most when it did not train), then
        with --check-training the ddp reference and the ``training`` event; DoesNotTrain when it did not train."""
        import torch

        if str(getattr(self.args, "data_source", "")).startswith("torchvision") and self.fabric.is_global_zero:
            with torch.no_grad():
                grid = save_grid(netG(fixed_noise), self.args.outf)
            print(f"image grid of G's images saved: {grid}", flush=True)
        if not self.args.check_training:
            return
        losses = list(zip(self.writer.scalars["Loss_D"], self.writer.scalars["Loss_G"], strict=True))
        reference, reference_skipped = self._reference()
        fp16 = self.cfg.get("fp16", {})
        min_scale = fp16.get("min_loss_scale", 1) if fp16.get("enabled") else None
        after = {net: flat(module) for net, module in self.modules.items()}
        verdict = training_verdict(
            self.args, losses, reference, self.before, after, self.scales, min_scale, self.skips, reference_skipped,
            self.clipping,
        )  # fmt: skip
        event("training", **verdict)
        if not verdict["trains"]:
            raise DoesNotTrain("; ".join(verdict["problems"]))

    def _reference(self):
        """The same steps under ``strategy="ddp"`` in the same precision; see ``ddp_reference``."""
        args = self.args
        netG = self.generator(0, args.ngf, 3, args.nz)
        netD = self.discriminator(0, args.ndf, 3, **({"logits": True} if self.logits else {}))
        netG.load_state_dict(self.initial["G"])
        netD.load_state_dict(self.initial["D"])
        return ddp_reference(
            args, netG, netD, self.criterion, self.inputs, self.skips, self.scales, devices=self.fabric.world_size
        )


def _version(name):
    """An installed package's version, or None."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return None


def ddp_reference(args, netG, netD, criterion, inputs, skips, scales, *, devices):
    """TRAINING: the same steps under plain ``strategy="ddp"`` — the reference a user would trust — from the same
    initial weights on the same images and noise, in the same precision; returns each step's (D loss, G loss) and how
    many phases the reference retried at a lower scale.

    A step that DeepSpeed's fp16 loss scaling skipped (its gradients overflowed at the current scale) is skipped here
    too (``skips``: per step, D's and G's): an overflow skip is how dynamic loss scaling works, not a wrong gradient,
    and a GAN is chaotic enough that one skipped step early on moves every later loss (measured on the H200: a fix
    that trains deviates 79 % from a reference that did not skip the same steps, 4 % in bf16, which never skips).
    In fp16 the reference's GradScaler takes, before each step, the loss scale DeepSpeed used for it (``scales`` holds
    each step's scale after it, so step i ran under step i - 1's): left to itself it overflows on other steps than
    DeepSpeed did (measured: one step behind from step 3, 43 %); where it still overflows, the phase runs again at a
    lower scale, and each such retry is counted."""
    import torch
    from lightning.fabric import Fabric

    ref = Fabric(accelerator="auto", devices=devices, precision=args.precision, strategy="ddp")
    ref.launch()  # under a launcher's ranks (or one process) this starts nothing: the process group exists
    optD = torch.optim.Adam(netD.parameters(), lr=args.lr, betas=(args.beta1, 0.999))
    optG = torch.optim.Adam(netG.parameters(), lr=args.lr, betas=(args.beta1, 0.999))
    netD, optD = ref.setup(netD, optD)
    netG, optG = ref.setup(netG, optG)
    criterion = criterion or torch.nn.BCELoss()
    scaler = getattr(ref._precision, "scaler", None)
    scaler = scaler if scaler is not None and scaler.is_enabled() else None
    losses, own_skips = [], {"D": 0, "G": 0}

    def follow(i, k):
        """The GradScaler on DeepSpeed's scale for step i (from step 1: both start at 2**16)."""
        if scaler is None:
            return None
        if i > 0 and scales[i - 1][k] is not None:
            scaler.update(new_scale=float(scales[i - 1][k]))
        return scaler.get_scale()

    def stepped(net, k, i, skip, optimizer, backward_pass):
        """One phase of step i: its backward and, unless DeepSpeed skipped it, the optimizer step; where the
        GradScaler overflows on its own, the phase runs again at its halved scale (the weights did not move)."""
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

    def d_phase(attempt, real, noise, state):
        netD.zero_grad()
        state["label"] = label = torch.full((real.size(0),), 1.0, dtype=real.dtype, device=real.device)
        errD_real = criterion(netD(real), label)
        ref.backward(errD_real)
        if attempt == 0:  # G's forward once: ddp allows no second one before G's backward through it
            state["fake"] = netG(noise)
        errD_fake = criterion(netD(state["fake"].detach()), label.fill_(0.0))
        ref.backward(errD_fake)
        return errD_real + errD_fake

    def g_phase(attempt, real, noise, state):
        netG.zero_grad()
        if attempt > 0:  # the first backward freed G's graph; G has not moved, so this is the same fake
            state["fake"] = netG(noise)
        errG = criterion(netD(state["fake"]), state["label"].fill_(1.0))
        ref.backward(errG)
        return errG

    for i, ((real, noise), (skip_D, skip_G)) in enumerate(zip(inputs, skips, strict=True)):
        data = {"real": real, "noise": noise, "state": {}}
        errD = stepped("D", 0, i, skip_D, optD, functools.partial(d_phase, **data))
        errG = stepped("G", 1, i, skip_G, optG, functools.partial(g_phase, **data))
        losses.append((errD.item(), errG.item()))
        print(f"[ddp {i}/{len(inputs)}] Loss_D: {losses[-1][0]:.4f} Loss_G: {losses[-1][1]:.4f}", flush=True)
    return losses, own_skips


def _deviation(ours, reference):
    """Mean absolute difference from the reference, relative to the reference's mean absolute loss."""
    scale = sum(abs(r) for r in reference) / len(reference)
    return sum(abs(o - r) for o, r in zip(ours, reference, strict=False)) / len(reference) / max(scale, 1e-8)


def training_verdict(args, losses, reference, before, after, scales, min_scale, skips, reference_skipped, clip=None):
    """TRAINING: at least 50 steps; finite losses; G's and D's parameters both changed; the loss scale (fp16) off
    its minimum at the end; at most a quarter of the steps skipped; D's and G's losses within --loss-tolerance of the
    ddp reference's over the first --compare-steps steps.

    ``clip`` is the norm DeepSpeed clipped gradients to (0 or None: none). The reference does not clip; from
    DeepSpeed 0.19.3 an engine whose config leaves ``gradient_clipping`` out (Fabric's does) clips to 1.0 — every
    step of this GAN (gradient norms 18-90), a different training (H200: 17 % in bf16, 43 % in fp16). A deviation
    names it."""
    problems = []
    if len(losses) < 50:
        problems.append(f"only {len(losses)} steps (at least 50 are needed to judge)")
    finite = all(math.isfinite(v) for pair in losses + reference for v in pair)
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
    counted = {net: sum(1 for pair in skips if pair[k]) for k, net in enumerate("DG")}
    problems += [
        f"{net}'s optimizer skipped {n} of {len(skips)} steps (fp16 overflow; at most a quarter may be skipped)"
        for net, n in counted.items()
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
                        f"; DeepSpeed clipped the gradients to norm {clip:g} (gradient_clipping; its default "
                        "from 0.19.3 where the config leaves it out), the ddp reference did not"
                        if clip
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
        "skipped_D": counted["D"],
        "skipped_G": counted["G"],
        "reference_skipped_D": reference_skipped["D"],
        "reference_skipped_G": reference_skipped["G"],
        "deviation_D": deviation["D"],
        "deviation_G": deviation["G"],
        "compared_steps": window,
        "tolerance": args.loss_tolerance,
        "reference": "ddp",
        "gradient_clipping": clip,
        "problems": problems,
    }
