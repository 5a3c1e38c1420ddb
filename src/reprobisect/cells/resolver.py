"""The installer a cell build uses, and uv's resolver: which releases install together, without installing.

Apart from cells/pinning.py (a cell's pins made concrete) and cells/envs.py (its venv built), which both use it, so
that what resolves a cell's companions (cells/companion_match.py) can ask the resolver too.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from reprobisect.cells.build_jail import install_environ
from reprobisect.errors import EnvBuildError
from reprobisect.util.cmd import run_tool

__all__ = ["installer", "uv_compile"]


def installer() -> str:
    """``uv`` when it is on PATH (fast), else ``pip`` (a GPU image or cluster node may have no uv).

    REPROBISECT_INSTALLER=uv|pip forces one.
    """
    forced = os.environ.get("REPROBISECT_INSTALLER")
    if forced in ("uv", "pip"):
        return forced
    return "uv" if shutil.which("uv") else "pip"


def uv_compile(
    requirements: Sequence[str],
    *,
    python_version: str,
    excluded: Sequence[str],
    platform: str | None = None,
    uv: str = "uv",
    keep_torch: bool = False,
    offline: bool = False,
) -> subprocess.CompletedProcess[str]:
    """``uv pip compile`` of ``requirements`` for a Python (and platform), torch and ``excluded`` left out.

    ``keep_torch``: torch takes part (a companion's own ``torch==`` requirement must meet the cell's torch);
    ``offline``: from uv's cache alone."""
    with tempfile.TemporaryDirectory() as tmp:
        excludes = Path(tmp) / "excludes.txt"
        excludes.write_text("\n".join([*([] if keep_torch else ["torch"]), *excluded]) + "\n")
        cmd = [
            uv,
            "pip",
            "compile",
            "-",
            "--quiet",
            "--no-header",
            "--no-annotate",
            "--python-version",
            python_version,
            "--excludes",
            str(excludes),
        ]
        if platform:
            cmd += ["--python-platform", platform]
        if offline:
            cmd.append("--offline")
        return run_tool(  # uv builds an sdist's metadata (DeepSpeed's setup.py): its environment cleared
            cmd,
            what="uv pip compile",
            timeout=600,
            error=EnvBuildError,
            check=False,
            stdin="\n".join(requirements),
            env=install_environ(os.environ),
        )
