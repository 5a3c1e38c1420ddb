"""CPU shim for Lightning's DeepSpeed strategies (standalone: imports only the stdlib, torch and lightning).

Why it exists
    Lightning refuses DeepSpeed on anything but CUDA: ``DeepSpeedStrategy.setup_environment``
    (Fabric's ``lightning.fabric.strategies.deepspeed`` and the Trainer's
    ``lightning.pytorch.strategies.deepspeed``) raises
    ``RuntimeError: The DeepSpeed strategy is only supported on CUDA GPUs but `CPUAccelerator` is used.``
    DeepSpeed itself runs on the CPU (``DS_ACCELERATOR=cpu``, gloo), so the unchanged Lightning
    repros can run on a machine without a GPU once that one check is bypassed.

What it changes (minimal)
    When the strategy's accelerator is not a ``CUDAAccelerator``, ``setup_environment`` sets
    ``parallel_devices`` to ``[torch.device("cpu", i) ...]`` (an index is needed: Lightning's
    ``_validate_device_index_selection`` compares indices with local ranks and rejects ``None``)
    and runs the DDP strategy's ``setup_environment`` (accelerator.setup_device + the DeepSpeed
    strategy's own distributed set-up, which then picks gloo for a CPU root device).  On CUDA
    the original method runs untouched.

    It patches ``lightning.fabric``, ``lightning.pytorch`` and, when present, the standalone
    ``lightning_fabric`` / ``pytorch_lightning`` packages: modules already imported are patched
    at once, the others when they are first imported (a ``sys.meta_path`` hook).

Labelling
    This changes Lightning's behaviour, so every result obtained under it must be labelled
    ``cpu-shim`` (it is neither the user's environment nor plain Lightning).

Usage: ``runpy.run_path(this_file)["install"]()`` before the repro runs (idempotent).
"""

import os
import runpy

_TARGETS = (
    "lightning.fabric.strategies.deepspeed",
    "lightning.pytorch.strategies.deepspeed",
    "lightning_fabric.strategies.deepspeed",
    "pytorch_lightning.strategies.deepspeed",
)
_MARK = "_cpu_shim_installed"


def _patch_module(module) -> None:
    import torch

    cls = getattr(module, "DeepSpeedStrategy", None)
    if cls is None or cls.__dict__.get(_MARK):
        return
    ddp_base = next(b for b in cls.__mro__[1:] if b.__name__ == "DDPStrategy")
    original = cls.setup_environment

    def setup_environment(self) -> None:
        if type(self.accelerator).__name__ == "CUDAAccelerator":
            return original(self)
        n = len(self.parallel_devices) if self.parallel_devices else 1
        self.parallel_devices = [torch.device("cpu", i) for i in range(n)]
        ddp_base.setup_environment(self)  # skips only the CUDA-only check

    setup_environment.__doc__ = "cpu-shim: " + (original.__doc__ or "DeepSpeedStrategy.setup_environment")
    cls.setup_environment = setup_environment
    setattr(cls, _MARK, True)


def install() -> None:
    """Patch Lightning's DeepSpeed strategies so they accept the CPU (idempotent)."""
    hook = runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)), "import_hook.py"))
    hook["after_import"]("lightning-cpu-shim", _TARGETS, _patch_module)
