"""Which forms and fixes of a repro run here: the machine's backend, or exactly what the user named."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from reprobisect.errors import ConfigError, NothingToDoError, ToolError
from reprobisect.model.repro import Backend, Fix, Form, Repro
from reprobisect.util.cmd import run_tool

__all__ = ["ALL_FIXES", "detect_cuda", "select_fixes", "select_forms"]


# Where a GPU's kernel driver shows itself: NVIDIA's module and control device, AMD's (ROCm builds of torch answer
# torch.cuda too). Without any of them no torch can see a device.
GPU_DRIVER_SIGNS = ("/proc/driver/nvidia/version", "/dev/nvidiactl", "/dev/kfd")


def detect_cuda(python: Path, signs: Sequence[str] = GPU_DRIVER_SIGNS) -> bool:
    """Does torch in this interpreter see a CUDA device? Not asked where no GPU driver is there: importing torch to
    hear "no" took 1.8 s of a CPU newcomer's first ``nox -s repro_gan`` (#41)."""
    if not any(Path(sign).exists() for sign in signs):
        return False
    code = "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"
    try:
        run_tool([python, "-c", code], what="asking torch for a CUDA device", timeout=300)
    except ToolError:
        return False
    return True


def select_forms(repro: Repro, backend: Backend, wanted: Sequence[str] = ()) -> list[Form]:
    """The repro's forms for this backend (all CPU forms without a GPU), or exactly those asked for."""
    if wanted:
        unknown = [name for name in wanted if name not in repro.forms]
        if unknown:
            msg = f"--form {unknown[0]!r}: repro {repro.name!r} has forms {', '.join(repro.forms)}"
            raise ConfigError(msg)
        return [repro.forms[name] for name in wanted]  # type: ignore[index]
    forms = [form for form in repro.forms.values() if form.backend == backend]
    if not forms:
        msg = f"repro {repro.name!r} has no {backend} form; it has {', '.join(repro.forms)}"
        raise NothingToDoError(msg)
    return forms


ALL_FIXES = "all"


def select_fixes(repro: Repro, wanted: Sequence[str] = ()) -> list[Fix]:
    """Every fix of the repro (``none`` first), or those asked for by name (``all``: every one)."""
    if not wanted or ALL_FIXES in wanted:
        return list(repro.fixes.values())
    unknown = [name for name in wanted if name not in repro.fixes]
    if unknown:
        msg = f"--fix {unknown[0]!r}: repro {repro.name!r} has fixes {', '.join(repro.fixes)}"
        raise ConfigError(msg)
    return [repro.fixes[name] for name in wanted]
