"""DeepSpeed #7875: "Fix import deepspeed crash on PyTorch v2.3 + Python 3.12".

What the pull request reports: `import deepspeed` raises `RuntimeError: Dynamo is not supported on Python 3.12+`
on PyTorch 2.3 with Python 3.12: helpers that `import deepspeed` imports are decorated with `torch.compile`, which
torch's Dynamo refuses on Python 3.12 before torch 2.4. The pull request names the `jit_script_compat` decorator of
DeepSpeed 0.18.6 (#7840). Measured on torch 2.3.1 with Python 3.12.1, no release of the grid imports and exits
cleanly, and the failure depends on the DeepSpeed release: 0.18.2 hangs at exit (torch 2.3's inductor pool), 0.18.3
to 0.18.6 raise the Dynamo error (first through the Muon helper, #7648), 0.18.7 raises an AttributeError on
torch.amp.custom_fwd (#7879). torch 2.4 passes every one (truth.toml's notes).

The report's code is the import itself (on this machine DeepSpeed's CPU accelerator, DS_ACCELERATOR=cpu). Exits 0
when DeepSpeed imports.
"""

import os
import sys

os.environ.setdefault("DS_ACCELERATOR", "cpu")  # no GPU here: DeepSpeed's CPU accelerator, as the harness runs it

import torch  # noqa: I001 - as measured: torch first, then the import the report is about

import deepspeed

print(f"PASS: deepspeed {deepspeed.__version__} imported (torch {torch.__version__}, Python {sys.version.split()[0]})")
