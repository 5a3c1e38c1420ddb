"""The environment a child of the harness starts with: an allowlist, never a secret, the cell first on PATH.

Repros are often scripts pasted from issues, and the builds and op prebuilds the harness starts in a cell run
code of a release: each child gets only the names a run or a GPU needs (PATH, locale, CUDA/NCCL/torch/DeepSpeed
settings), and a secret's name (``util.redact.secret_name``: the one rule the redactor shares) or a URL with
credentials in its value never passes unless the user named it (``allow``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from reprobisect.cells.envs import CellEnv
from reprobisect.util.redact import URL_CREDENTIALS, secret_name

__all__ = ["cell_environ", "scrubbed_environ"]

_PASSED_NAMES = frozenset(
    {
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "LANG",
        "TERM",
        "TZ",
        "TMPDIR",
        "SHELL",
        "LD_LIBRARY_PATH",
        "CUDA_HOME",
        "CUDA_PATH",
        "CC",
        "CXX",
        "OMP_NUM_THREADS",
        "SSL_CERT_FILE",
        "REQUESTS_CA_BUNDLE",
        "XDG_CACHE_HOME",
        "CUDA_VISIBLE_DEVICES",
        "PYTHONDONTWRITEBYTECODE",  # no child writes byte code into the user's interpreter (run/bytecode.py)
    }
)
_PASSED_PREFIXES = ("LC_", "CUDA_", "NVIDIA_", "NCCL_", "TORCH_", "DS_", "MKL_", "KMP_", "TRITON_", "NVSHMEM_")


def scrubbed_environ(environ: Mapping[str, str], *, allow: Sequence[str] = ()) -> dict[str, str]:
    """The part of ``environ`` a repro child may see.

    Only names a build or a GPU run needs pass (PATH, locale, CUDA/NCCL/torch/DeepSpeed settings), and
    credentials never pass unless named in ``allow``: repros are often scripts pasted from issues.
    """
    allowed = set(allow)
    kept = {}
    for name, value in environ.items():
        if name in allowed:
            kept[name] = value
            continue
        if _secret_looking(name, value):
            continue
        if name in _PASSED_NAMES or name.startswith(_PASSED_PREFIXES):
            kept[name] = value
    return kept


def cell_environ(env: CellEnv, environ: Mapping[str, str], *, allow: Sequence[str] = ()) -> dict[str, str]:
    """What every child the harness starts in a cell begins with: the scrubbed environment (``allow`` as for
    ``scrubbed_environ``), the cell first on PATH and as the active venv, its op folder, unbuffered output."""
    child = scrubbed_environ(environ, allow=allow)
    child |= {
        "PATH": f"{env.path / 'bin'}{os.pathsep}{child.get('PATH', os.defpath)}",
        "VIRTUAL_ENV": str(env.path),
        "TORCH_EXTENSIONS_DIR": str(env.torch_extensions),  # ops the shared cache does not serve
        "PYTHONUNBUFFERED": "1",
    }
    return child


def _secret_looking(name: str, value: str) -> bool:
    """A secret's name (``util.redact.secret_name``: the one rule the redactor shares, also under an allowed prefix:
    ``DS_HUB_PASSWD``, ``NVIDIA_NGC_APIKEY``), or credentials in a URL."""
    return secret_name(name) or bool(URL_CREDENTIALS.search(value))
