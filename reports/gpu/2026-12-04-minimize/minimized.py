
import argparse
import dataclasses
import json
import logging
import math
import os
import random
import socket
import sys
import time
from pathlib import Path

import deepspeed
import torch
from deepspeed.accelerator import get_accelerator
from torch import nn
from torch.utils.data import DataLoader, Dataset

LOG = logging.getLogger("toy-gan")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description="toy GAN on DeepSpeed bf16")
    parser.add_argument("--lr", type=float, default=0.1, help="learning rate of both optimizers")
    parser.add_argument("--steps", type=int, default=3, help="training steps")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--latent", type=int, default=8, help="size of the generator's input")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None, help="where samples and checkpoints go")
    parser.add_argument("--log-every", type=int, default=1)
    parser.add_argument("--save-samples", action="store_true", default=True)
    parser.add_argument("--checkpoint", action="store_true", default=True)
    parser.add_argument("--warmup", type=int, default=0, help="warm-up steps of the learning rate")
    parser.add_argument("--check", action="store_true", default=True, help="check D's first step")
    return parser.parse_args(argv)


@dataclasses.dataclass
class TrainConfig:
    lr: float
    steps: int
    batch_size: int
    latent: int
    seed: int
    out: Path
    log_every: int
    save_samples: bool
    checkpoint: bool
    warmup: int
    check: bool

    @classmethod
    def from_args(cls, args):
        out = args.out or Path(os.environ.get("TMPDIR", "/tmp")) / f"toy-gan-{os.getpid()}"
        return cls(
            lr=args.lr,
            steps=args.steps,
            batch_size=args.batch_size,
            latent=args.latent,
            seed=args.seed,
            out=out,
            log_every=args.log_every,
            save_samples=args.save_samples,
            checkpoint=args.checkpoint,
            warmup=args.warmup,
            check=args.check,
        )

    def deepspeed_config(self):
        return {
            "train_micro_batch_size_per_gpu": self.batch_size,
            "gradient_accumulation_steps": 1,
            "bf16": {"enabled": True},
            "zero_optimization": {"stage": 0},
            "gradient_clipping": 0.0,
            "steps_per_print": 10**9,
        }


def setup_logging(verbose=True):
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    LOG.addHandler(handler)
    LOG.setLevel(logging.INFO if verbose else logging.WARNING)
    logging.getLogger("DeepSpeed").setLevel(logging.WARNING)


def set_seed(seed):
    random.seed(seed)
    torch.manual_seed(seed)


def setup_distributed():
    for name, value in {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1"}.items():
        os.environ.setdefault(name, value)
    if "MASTER_PORT" not in os.environ:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            os.environ["MASTER_PORT"] = str(s.getsockname()[1])
    accelerator = get_accelerator()
    deepspeed.init_distributed(dist_backend=accelerator.communication_backend_name())
    return torch.device(accelerator.current_device_name())


class RingDataset(Dataset):
    """Points on a noisy ring in 8 dimensions: the 'real' data."""

    def __init__(self, size=256, dim=8, noise=0.05):
        angles = torch.rand(size) * 2 * math.pi
        base = torch.stack([torch.cos(angles), torch.sin(angles)], dim=1)
        pad = torch.zeros(size, dim - 2)
        self.points = torch.cat([base, pad], dim=1) + noise * torch.randn(size, dim)

    def __len__(self):
        return len(self.points)

    def __getitem__(self, index):
        return self.points[index]


class Generator(nn.Module):
    def __init__(self, latent=8, dim=8):
        super().__init__()
        self.net = nn.Linear(latent, dim)

    def forward(self, z):
        return self.net(z)


class Discriminator(nn.Module):
    def __init__(self, dim=8):
        super().__init__()
        self.net = nn.Linear(dim, 1)

    def forward(self, x):
        return self.net(x)


def count_parameters(model):
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def warmup_factor(step, warmup):
    if warmup <= 0:
        return 1.0
    return min(1.0, (step + 1) / warmup)


def build_engines(cfg):
    torch.manual_seed(cfg.seed)
    D = Discriminator()
    G = Generator(cfg.latent)
    LOG.info("D has %d parameters, G has %d", count_parameters(D), count_parameters(G))
    ds_config = cfg.deepspeed_config()
    engine_D, *_ = deepspeed.initialize(model=D, optimizer=torch.optim.SGD(D.parameters(), lr=cfg.lr), config=ds_config)
    engine_G, *_ = deepspeed.initialize(model=G, optimizer=torch.optim.SGD(G.parameters(), lr=cfg.lr), config=ds_config)
    return engine_D, engine_G


def save_grid(samples, path, cell=4):
    """The first two coordinates of each sample as a dot on a 64x64 grey image (PGM, no extra packages)."""
    size = 64
    image = [[255] * size for _ in range(size)]
    for point in samples[:, :2].float().tolist():
        x = int((point[0] + 2) / 4 * (size - cell))
        y = int((point[1] + 2) / 4 * (size - cell))
        for dx in range(cell):
            for dy in range(cell):
                if 0 <= x + dx < size and 0 <= y + dy < size:
                    image[y + dy][x + dx] = 0
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as handle:
        handle.write(f"P2\n{size} {size}\n255\n")
        for row in image:
            handle.write(" ".join(map(str, row)) + "\n")


def evaluate(engine_G, device, latent, n=64):
    with torch.no_grad():
        z = torch.randn(n, latent, device=device).to(torch.bfloat16)
        samples = engine_G(z).float()
        radius = samples[:, :2].norm(dim=1)
    return {"mean_radius": radius.mean().item(), "std_radius": radius.std().item()}


def save_checkpoint(engine_D, engine_G, out, step):
    out.mkdir(parents=True, exist_ok=True)
    torch.save(
        {"D": engine_D.module.state_dict(), "G": engine_G.module.state_dict(), "step": step},
        out / f"checkpoint-{step}.pt",
    )


def check_d_step(engine_D, engine_G, device, lr, latent):
    """D's step should move D by lr times D's own gradient, nothing else (the sanity check that found the bug)."""
    w0 = engine_D.module.net.weight.detach().float().clone()
    b0 = engine_D.module.net.bias.detach().float().clone()

    # G step: the backward flows through D's parameters
    z = 10 * torch.randn(64, latent, device=device).to(torch.bfloat16)
    fake = engine_G(z)
    loss_G = engine_D(fake).float().sum()
    engine_G.backward(loss_G)
    engine_G.step()
    stray = fake.detach().float().sum(0)

    # D step on D's own loss only: d loss / d weight = 1 and d loss / d bias = 1
    engine_D.zero_grad()
    x = torch.ones(8, 8, device=device, dtype=torch.bfloat16)
    loss_D = engine_D(x).float().mean()
    engine_D.backward(loss_D)
    engine_D.step()

    w1 = engine_D.module.net.weight.detach().float()
    b1 = engine_D.module.net.bias.detach().float()
    expected_w, expected_b = w0 - lr * 1.0, b0 - lr * 1.0
    err_w = (w1 - expected_w).abs().max().item()
    err_b = (b1 - expected_b).abs().max().item()
    LOG.info("max |error| weight %.4g, bias %.4g; lr * stray up to %.4g", err_w, err_b, lr * stray.abs().max())
    tol = 0.02
    assert err_w < tol and err_b < tol, (
        f"D's step used more than D's own gradient: max |D.weight - expected| = {err_w:.4g}, "
        f"max |D.bias - expected| = {err_b:.4g} (tolerance {tol}); G's backward through D left a gradient of up to "
        f"{stray.abs().max():.4g} on D.weight that engine_D.zero_grad() did not clear"
    )


def train(cfg, engine_D, engine_G, loader, device):
    history = []
    criterion = nn.BCEWithLogitsLoss()
    started = time.time()
    for step, real in enumerate(loader):
        if step >= cfg.steps:
            break
        factor = warmup_factor(step, cfg.warmup)
        for group in engine_D.optimizer.param_groups:
            group["lr"] = cfg.lr * factor
        if step == 0 and cfg.check:
            check_d_step(engine_D, engine_G, device, cfg.lr, cfg.latent)
            continue
        real = real.to(device).to(torch.bfloat16)
        z = torch.randn(real.shape[0], cfg.latent, device=device).to(torch.bfloat16)
        fake = engine_G(z)
        loss_G = criterion(engine_D(fake).float(), torch.ones(real.shape[0], 1, device=device))
        engine_G.backward(loss_G)
        engine_G.step()
        engine_D.zero_grad()
        logits_real = engine_D(real).float()
        logits_fake = engine_D(fake.detach()).float()
        loss_D = criterion(logits_real, torch.ones_like(logits_real)) + criterion(
            logits_fake, torch.zeros_like(logits_fake)
        )
        engine_D.backward(loss_D)
        engine_D.step()
        history.append({"step": step, "loss_D": loss_D.item(), "loss_G": loss_G.item()})
        if step % cfg.log_every == 0:
            LOG.info("step %d: loss_D %.4f loss_G %.4f (%.1f s)", step, loss_D.item(), loss_G.item(), time.time() - started)
        if cfg.save_samples:
            save_grid(fake.detach(), cfg.out / f"samples-{step}.pgm")
    return history


def main(argv=None):
    args = parse_args(argv)
    cfg = TrainConfig.from_args(args)
    setup_logging()
    set_seed(cfg.seed)
    device = setup_distributed()
    LOG.info("deepspeed %s, torch %s, device %s", deepspeed.__version__, torch.__version__, device)
    dataset = RingDataset()
    loader = DataLoader(dataset, batch_size=cfg.batch_size, shuffle=True, drop_last=True)
    engine_D, engine_G = build_engines(cfg)
    history = train(cfg, engine_D, engine_G, loader, device)
    metrics = evaluate(engine_G, device, cfg.latent)
    LOG.info("evaluation: %s", metrics)
    if cfg.checkpoint:
        save_checkpoint(engine_D, engine_G, cfg.out, cfg.steps)
    summary = {"config": {k: str(v) for k, v in dataclasses.asdict(cfg).items()}, "history": history, "eval": metrics}
    cfg.out.mkdir(parents=True, exist_ok=True)
    (cfg.out / "summary.json").write_text(json.dumps(summary, indent=2))
    LOG.info("done: %d steps, summary in %s", len(history), cfg.out)


if __name__ == "__main__":
    main()
