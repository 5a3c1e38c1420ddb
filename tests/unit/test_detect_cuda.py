"""Whether a CUDA device is here (run/select.py): torch is asked only where a GPU driver shows itself (#41)."""

from __future__ import annotations

import sys
from pathlib import Path

from reprobisect.run.select import detect_cuda


def test_without_a_gpu_driver_torch_is_not_asked(tmp_path: Path) -> None:
    never = tmp_path / "no-such-python"  # asking it would fail loudly, not answer False
    assert detect_cuda(never, signs=[str(tmp_path / "proc-driver-nvidia-version")]) is False


def test_with_a_driver_sign_torch_is_asked_and_answers(tmp_path: Path) -> None:
    sign = tmp_path / "nvidiactl"
    sign.touch()
    fake = tmp_path / "python"  # an interpreter whose torch "sees" a device
    fake.write_text(f"#!/bin/sh\nexec {sys.executable} -c 'import sys; sys.exit(0)'\n")
    fake.chmod(0o755)
    assert detect_cuda(fake, signs=[str(sign)]) is True
    fake.write_text(f"#!/bin/sh\nexec {sys.executable} -c 'import sys; sys.exit(1)'\n")  # it says no
    assert detect_cuda(fake, signs=[str(sign)]) is False
