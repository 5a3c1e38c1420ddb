"""DeepSpeed #7653: "ZeRO-1 RuntimeError when using `communication_data_type: bf16`".

The report trains with ZeRO-1, `"communication_data_type": "bf16"` and `"reduce_bucket_size": 10000` (its config,
below as reported: train batch 32, micro-batch 8, DeepSpeed's Adam) and prints `Step i | Loss = ...` (about 2.3: ten
classes) until `model_engine.backward(loss)` fails at the first accumulation boundary, on the release it had first
with `KeyError: torch.float32` in `report_ipg_memory_usage`, on the newest then with `RuntimeError: start (0) +
length (16384) exceeds dimension size (10000).`; without `communication_data_type` it trains. The report's model is
not in the report as read; 16384 is a 128x128 weight, larger than the bucket, so here a small classifier with one.
One process (as the report's four micro-steps before the failure say: 32 / 8 with one rank), fp32 weights, CPU
(DS_ACCELERATOR=cpu, gloo) or a GPU. Exits 0 when three optimizer steps train.
"""

import os
import socket

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
print(f"deepspeed {deepspeed.__version__}, torch {torch.__version__}", flush=True)

config = {
    "train_batch_size": 32,
    "train_micro_batch_size_per_gpu": 8,
    "optimizer": {"type": "Adam"},
    "communication_data_type": "bf16",
    "zero_optimization": {"stage": 1, "reduce_bucket_size": 10000},
}


def main():
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(32, 128), torch.nn.ReLU(), torch.nn.Linear(128, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10)
    )
    model_engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=config)
    device = model_engine.device
    steps = 3 * model_engine.gradient_accumulation_steps()  # three optimizer steps
    for step in range(steps):
        x = torch.randn(8, 32, device=device)
        y = torch.randint(0, 10, (8,), device=device)
        loss = torch.nn.functional.cross_entropy(model_engine(x), y)
        model_engine.backward(loss)
        model_engine.step()
        print(f"Step {step} | Loss = {loss.item():.4f}", flush=True)
    assert torch.isfinite(loss), f"loss {loss.item()} after {steps} micro-steps"
    print(f"PASS: {steps // model_engine.gradient_accumulation_steps()} optimizer steps with bf16 communication")


main()
