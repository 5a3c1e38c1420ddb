"""Offline cells: a wheelhouse built here, used where there is no network (GPU nodes, air-gapped clusters).

``--wheelhouse DIR`` makes uv and pip read only DIR (``UV_NO_INDEX``/``UV_FIND_LINKS`` and
``PIP_NO_INDEX``/``PIP_FIND_LINKS``): ranges and ``latest`` then resolve against what DIR holds.
``build_wheelhouse`` fills DIR for a target Python and platform: DeepSpeed's sdists become pure-Python
wheels (``DS_BUILD_OPS=0``, built against this machine's torch; ops compile just in time there) and
DeepSpeed's own dependencies come as binary wheels for the target, torch and ``system`` packages left out.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Mapping, MutableMapping, Sequence
from pathlib import Path

from reprobisect.cells.resolver import uv_compile
from reprobisect.errors import EnvBuildError
from reprobisect.util.cmd import run_tool
from reprobisect.util.echo import Echo

__all__ = ["build_wheelhouse", "use_wheelhouse"]

DEFAULT_PLATFORMS = (
    "manylinux_2_28_x86_64",
    "manylinux_2_27_x86_64",
    "manylinux_2_17_x86_64",
    "manylinux2014_x86_64",
    "manylinux1_x86_64",
)


def use_wheelhouse(path: Path, environ: MutableMapping[str, str] = os.environ) -> None:
    """Point uv and pip (in this process and every child) at ``path`` and nothing else."""
    if not path.is_dir():
        msg = f"--wheelhouse {path}: no such folder; build one with `nox -s wheelhouse` on a machine with network"
        raise EnvBuildError(msg)
    where = str(path.resolve())
    # Offline, what the base interpreter already has must count as installed: pip sees it, uv does not.
    environ.setdefault("REPROBISECT_INSTALLER", "pip")
    environ.update(
        {"UV_NO_INDEX": "1", "UV_FIND_LINKS": where, "UV_OFFLINE": "1", "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": where}
    )


def _run(cmd: Sequence[str], what: str, env: Mapping[str, str] | None = None) -> str:
    return run_tool(cmd, what=f"{what} failed", timeout=1800, error=EnvBuildError, env=env).stdout


def _deepspeed_wheel(python: str, version: str, dest: Path, scratch: Path) -> Path:
    existing = list(dest.glob(f"deepspeed-{version}-*.whl"))
    if existing:
        return existing[0]
    sdists = scratch / f"sdist-{version}"
    _run(
        [
            python,
            "-m",
            "pip",
            "download",
            "--quiet",
            "--no-deps",
            "--no-binary",
            ":all:",
            f"deepspeed=={version}",
            "-d",
            str(sdists),
        ],
        f"downloading the deepspeed {version} sdist",
    )
    sdist = next(sdists.iterdir())
    env = {**os.environ, "DS_BUILD_OPS": "0"}
    _run(
        [python, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", str(sdist), "-w", str(dest)],
        f"building a deepspeed {version} wheel (needs torch, setuptools and wheel in {python})",
        env=env,
    )
    return next(dest.glob(f"deepspeed-{version}-*.whl"))


def _dependencies(
    newest: str, python_version: str, platform: str, excluded: Sequence[str], extra: Sequence[str]
) -> list[str]:
    """Pins of everything deepspeed (and ``extra``) needs on the target, torch and ``excluded`` left out."""
    out = uv_compile(
        [f"deepspeed=={newest}", *extra], python_version=python_version, excluded=excluded, platform=platform
    )
    if out.returncode != 0:
        msg = f"resolving deepspeed {newest}'s dependencies for Python {python_version}: {out.stderr.strip()[-800:]}"
        raise EnvBuildError(msg)
    return [
        line.split(";")[0].strip()
        for line in out.stdout.splitlines()
        if "==" in line and not line.startswith("deepspeed==")
    ]


def build_wheelhouse(
    python: str,
    deepspeed: Sequence[str],
    dest: Path,
    *,
    python_version: str,
    excluded: Sequence[str] = (),
    extra: Sequence[str] = (),
    echo: Echo = print,
) -> list[Path]:
    """Fill ``dest`` with deepspeed wheels for ``deepspeed`` versions and the dependencies a cell needs."""
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="reprobisect-wheelhouse-") as tmp:
        scratch = Path(tmp)
        for version in deepspeed:
            wheel = _deepspeed_wheel(python, version, dest, scratch)
            echo(f"{wheel.name} ({wheel.stat().st_size // 1024} KiB)")
        # setuptools too: pip checks the base torch's own requirements (setuptools>=77 on recent torch)
        pins = _dependencies(deepspeed[-1], python_version, "x86_64-manylinux_2_28", excluded, [*extra, "setuptools"])
        platforms = [arg for p in DEFAULT_PLATFORMS for arg in ("--platform", p)]
        for pin in pins:
            _run(
                [
                    python,
                    "-m",
                    "pip",
                    "download",
                    "--quiet",
                    "--no-deps",
                    "--only-binary=:all:",
                    "--python-version",
                    python_version,
                    "--implementation",
                    "cp",
                    *platforms,
                    pin,
                    "-d",
                    str(dest),
                ],
                f"downloading {pin} for Python {python_version}",
            )
        echo(f"{len(pins)} dependencies: {' '.join(pins)}")
    shutil.rmtree(dest / "__pycache__", ignore_errors=True)
    return sorted(dest.iterdir())
