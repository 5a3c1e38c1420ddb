"""DeepSpeed #7571: "AttributeError: 'FP16_Optimizer' object has no attribute '_restore_from_bit16_weights'".

The report: "I'm seeing this error when I load a checkpoint to resume training using zero optimization stage 0"
(bf16, as the fix #7586 says). Its program is not in the report as read; its traceback goes from the trainer's
checkpointer (`load_snapshot_zero_stage0`) to `self.engine.load_checkpoint(...)`. So this is that program cut down:
a trainer trains three steps and saves a snapshot with `engine.save_checkpoint`, a new trainer resumes from it with
`engine.load_checkpoint`. The check: the resumed engine holds what was saved, the weights and the torch AdamW's
state (step, exp_avg, exp_avg_sq), as a checkpoint of ZeRO stage 1 or of fp32 does. bf16, ZeRO stage 0, torch AdamW,
one process, CPU (DS_ACCELERATOR=cpu, gloo) or a GPU. Exits 0 when the round trip gives back the optimizer state and
the weights.
"""

import os
import socket
import tempfile

import deepspeed
import torch
from deepspeed.accelerator import get_accelerator

for name, value in {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1"}.items():
    os.environ.setdefault(name, value)
if "MASTER_PORT" not in os.environ:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        os.environ["MASTER_PORT"] = str(s.getsockname()[1])
deepspeed.init_distributed(dist_backend=get_accelerator().communication_backend_name())
device = torch.device(get_accelerator().current_device_name())
print(f"deepspeed {deepspeed.__version__}, torch {torch.__version__}, device {device}", flush=True)

CONFIG = {
    "train_micro_batch_size_per_gpu": 8,
    "gradient_accumulation_steps": 1,
    "bf16": {"enabled": True},
    "zero_optimization": {"stage": 0},
}


def make_model():
    torch.manual_seed(42)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))


def data(steps):
    g = torch.Generator().manual_seed(1)
    return [(torch.randn(8, 16, generator=g), torch.randn(8, 1, generator=g)) for _ in range(steps)]


class Trainer:
    def __init__(self):
        model = make_model()
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
        self.engine, *_ = deepspeed.initialize(model=model, optimizer=optimizer, config=CONFIG)

    def train(self, batches):
        for x, y in batches:
            out = self.engine(x.to(device, torch.bfloat16))
            loss = torch.nn.functional.mse_loss(out.float(), y.to(device))
            self.engine.backward(loss)
            self.engine.step()

    def save_snapshot(self, folder):
        self.engine.save_checkpoint(folder, tag="snapshot")

    def load_snapshot_zero_stage0(self, folder):
        load_path, client_state = self.engine.load_checkpoint(folder, tag="snapshot")
        assert load_path is not None, f"no checkpoint loaded from {folder}"

    def adam_state(self):
        """The torch AdamW's state inside DeepSpeed's wrapper: per parameter, step, exp_avg, exp_avg_sq."""
        inner = self.engine.optimizer
        while not isinstance(inner, torch.optim.Optimizer) and hasattr(inner, "optimizer"):
            inner = inner.optimizer
        params = [p for group in inner.param_groups for p in group["params"]]
        return [{k: torch.as_tensor(v).detach().float().cpu().clone() for k, v in inner.state.get(p, {}).items()}
                for p in params]  # fmt: skip

    def weights(self):
        return [p.detach().float().cpu().clone() for p in self.engine.module.parameters()]


def differences(got, saved):
    """The largest difference of each state's entry (inf where one side lacks it)."""
    worst = {}
    for g, s in zip(got, saved):
        for key in sorted(set(g) | set(s)):
            d = (g[key] - s[key]).abs().max().item() if key in g and key in s else float("inf")
            worst[key] = max(worst.get(key, 0.0), d)
    return worst


with tempfile.TemporaryDirectory() as folder:
    first = Trainer()
    first.train(data(3))
    saved_state, saved_weights = first.adam_state(), first.weights()
    first.save_snapshot(folder)
    resumed = Trainer()  # a new run resumes from the snapshot
    resumed.load_snapshot_zero_stage0(folder)
    got_state, got_weights = resumed.adam_state(), resumed.weights()

steps = [sorted({int(s["step"]) for s in state if "step" in s}) for state in (got_state, saved_state)]
worst = differences(got_state, saved_state)
drift = max((a - b).abs().max().item() for a, b in zip(got_weights, saved_weights))
print(f"optimizer step: resumed {steps[0]}, saved {steps[1]}; state differs by up to {worst}", flush=True)
print(f"weights: resumed vs saved differ by up to {drift:.3g}", flush=True)
assert worst and max(worst.values()) == 0 and drift == 0, (
    f"resuming from a ZeRO-0 bf16 checkpoint loses the optimizer state: AdamW step {steps[0]} after loading vs "
    f"{steps[1]} saved; exp_avg differs by up to {worst.get('exp_avg', float('inf')):.3g}, exp_avg_sq by up to "
    f"{worst.get('exp_avg_sq', float('inf')):.3g}, weights by up to {drift:.3g}"
)
print("PASS: the ZeRO-0 bf16 checkpoint gives back the optimizer state and the weights it saved", flush=True)
