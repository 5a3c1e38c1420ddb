"""A cell's ``torchvision: match`` made concrete at build time: the release made for the cell's torch, if any.

The base interpreter's own torchvision serves a ``system`` torch when it was made for it (GPU images ship the
pair). Otherwise the resolver picks it: ``uv pip compile "torchvision==0.28.*" "torch==2.13.0"`` answers with
the release whose own requirement accepts the cell's torch, from uv's cache first (offline) and the index only
when the cache cannot say.

A release of the right series can still be another *build*: the index's Linux torchvision is built against a
CUDA torch, and its compiled ops then need ``libtorch_cuda.so``, which a CPU torch has not. Importing such a
torchvision fails, and Lightning imports it (through torchmetrics) whenever it is installed: a cell holding it
could not even start Lightning. So after the install the compiled ops' needed libraries are read from the ELF
file (no import, milliseconds) and checked against the torch the cell sees; a ``match`` that fails is removed
again with its reason in the build log (the GAN then feeds bare tensors and says so), an explicit pin that
fails is a build error. ``match`` is not part of a cell's id: it follows torch, and records name the version.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Iterable
from pathlib import Path

from packaging.version import InvalidVersion, Version

from reprobisect.cells.base import BaseInterpreter
from reprobisect.cells.index import list_versions
from reprobisect.cells.resolver import installer, uv_compile
from reprobisect.config.companions import mismatch, torchvision_series
from reprobisect.errors import EnvBuildError, ToolError
from reprobisect.model.cell import SYSTEM

__all__ = ["matching_torchvision", "needed_libraries", "unusable_torchvision"]

_MAX_ELF_BYTES = 256 * 1024 * 1024


def matching_torchvision(base: BaseInterpreter, torch: str, torch_source: str) -> str | None:
    """``system`` when the base's torchvision was made for its torch and the cell uses that torch; else the
    release the resolver picks for ``torch``; None when there is none to be had."""
    if torch_source == SYSTEM and base.torchvision and base.torch and mismatch(base.torch, base.torchvision) is None:
        return SYSTEM
    return _resolved(base.executable, base.version, torch)


@functools.lru_cache(maxsize=64)
def _resolved(executable: str, python_version: str, torch: str) -> str | None:
    series = torchvision_series(torch)
    if series is None:
        return None
    try:
        public = Version(torch).public
    except InvalidVersion:
        return None
    if installer() != "uv":  # pip alone cannot resolve without installing: the newest release of the series
        releases = [v for v in list_versions(executable, "torchvision") if v.startswith(f"{series}.")]
        return releases[-1] if releases else None
    wanted = [f"torchvision=={series}.*", f"torch=={public}"]
    python = ".".join(python_version.split(".")[:2])
    for offline in (True, False):
        try:
            out = uv_compile(wanted, python_version=python, excluded=(), keep_torch=True, offline=offline)
        except (EnvBuildError, ToolError):
            continue
        for line in out.stdout.splitlines() if out.returncode == 0 else ():
            name, sep, version = line.strip().partition("==")
            if sep and name.strip().lower() == "torchvision":
                return version.split(";")[0].strip()
    return None


def unusable_torchvision(site_dirs: Iterable[Path], torch_version: str) -> str | None:
    """Why the torchvision the cell sees cannot load with its torch; None when it can (or there is none).

    ``site_dirs``: the cell's site folders, its own first (where a cell's torchvision and torch are found)."""
    dirs = list(site_dirs)
    vision = next((d / "torchvision" for d in dirs if (d / "torchvision" / "__init__.py").is_file()), None)
    torch_lib = next((d / "torch" / "lib" for d in dirs if (d / "torch" / "__init__.py").is_file()), None)
    if vision is None or torch_lib is None:
        return None
    ops = next(iter(sorted(vision.glob("_C*.so"))), None)
    if ops is None:
        return None
    needed = needed_libraries(ops)
    if needed is None:
        return None  # not an ELF file this reader knows: the import will tell
    missing = sorted(n for n in needed if n.startswith(("libtorch", "libc10")) and not (torch_lib / n).exists())
    if not missing:
        return None
    build = "a CPU build" if not any("cuda" in p.name for p in torch_lib.glob("lib*.so")) else "another build"
    return (
        f"torchvision's compiled ops ({ops.name}) need {', '.join(missing)}, which torch {torch_version} "
        f"({build}) lacks: that torchvision was built for another build of torch (a CPU torch takes torchvision's "
        "CPU build, from the index that holds it)"
    )


def needed_libraries(path: Path) -> list[str] | None:
    """The DT_NEEDED entries of a 64-bit little-endian ELF shared object; None for anything else or a broken one."""
    try:
        with path.open("rb") as handle:
            data = handle.read(_MAX_ELF_BYTES)
    except OSError:
        return None
    try:
        return _dt_needed(data)
    except (struct.error, IndexError, ValueError):
        return None


def _dt_needed(data: bytes) -> list[str] | None:
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return None
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    if shentsize < 64 or shnum > 4096:
        return None
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    dynamic = next((s for s in sections if s[1] == 6), None)  # SHT_DYNAMIC
    if dynamic is None or dynamic[6] >= len(sections):
        return []
    strtab_offset, strtab_size = sections[dynamic[6]][4], sections[dynamic[6]][5]
    offset, size = dynamic[4], dynamic[5]
    needed = []
    for entry in range(offset, offset + min(size, 1 << 20), 16):
        tag, value = struct.unpack_from("<qQ", data, entry)
        if tag == 0:  # DT_NULL
            break
        if tag == 1 and value < strtab_size:  # DT_NEEDED
            start = strtab_offset + value
            end = data.index(b"\0", start, strtab_offset + strtab_size)
            needed.append(data[start:end].decode("utf-8", "replace"))
    return needed
