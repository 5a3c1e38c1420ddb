"""A cell: one combination of pinned packages on one base interpreter, with a stable readable id."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping

__all__ = ["SYSTEM", "Cell", "id_without", "run_cell"]

SYSTEM = "system"
MATCH = "match"  # as config/companions.py says: the release made for the cell's torch
_UNSAFE = re.compile(r"[^A-Za-z0-9.+_-]")


@dataclasses.dataclass(frozen=True, kw_only=True)
class Cell:
    """Concrete versions that run together.

    ``torch_source`` is ``system`` when torch comes from the base interpreter (GPU images, clusters,
    CI without a multi-GB download) and ``pinned`` when the cell installs it.
    """

    python: str
    torch: str
    torch_source: str
    packages: Mapping[str, str]
    python_source: str = SYSTEM

    @property
    def id(self) -> str:
        """``torch-2.13.0+cpu_deepspeed-0.16.4_lightning-2.6.6``: readable, stable, a safe folder name."""
        # a ``match`` pin (torchvision) follows torch: the id names it only when it is pinned on its own
        named = sorted((name, spec) for name, spec in self.packages.items() if spec != MATCH)
        parts = [f"torch-{self.torch}", *(f"{name}-{_short(spec)}" for name, spec in named)]
        if self.python_source != SYSTEM:
            parts.insert(0, f"py{self.python_source}")
        return _UNSAFE.sub("_", "_".join(parts))

    @property
    def versions(self) -> dict[str, str]:
        """Every pinned package, torch included."""
        return {"torch": self.torch, **self.packages}

    def to_dict(self) -> dict[str, object]:
        """JSON-ready form stored in records."""
        return {
            "id": self.id,
            "python": self.python,
            "torch": self.torch,
            "torch_source": self.torch_source,
            "packages": dict(self.packages),
            "python_source": self.python_source,
        }


def _short(spec: str) -> str:
    """A version as it is; a VCS URL as ``git.<ref>``; a path as ``local.<file or folder name>``."""
    if "://" in spec or spec.startswith("git+"):
        ref = spec.rsplit("@", 1)[-1] if "@" in spec.split("://", 1)[-1] else "head"
        return "git." + (ref[:12] if re.fullmatch(r"[0-9a-f]{40}", ref) else ref)
    if spec.startswith(("/", "./", "../", "file:")) or spec.endswith((".whl", ".tar.gz")):
        return "local." + spec.rstrip("/").rsplit("/", 1)[-1]
    return spec


def id_without(cell_id: str, package: str, spec: str) -> str:
    """The id of ``cell_id`` with one package's part left out: runs of two releases of that package meet on it.

    ``id_without("torch-2.13.0+cpu_deepspeed-0.16.4_lightning-2.6.6", "deepspeed", "0.16.4")`` is
    ``torch-2.13.0+cpu_lightning-2.6.6``; the nightly compares a new DeepSpeed release with the baseline so.
    """
    part = re.escape(_UNSAFE.sub("_", f"{package}-{_short(spec)}"))
    return re.sub(rf"(^{part}_|_{part}(?=_|$))", "", cell_id, count=1)


def run_cell(cell: Cell, nproc: int) -> dict[str, object]:
    """The cell as a run's record names it: the cell, and with several ranks ``_nproc-N`` after its id (a run of
    two ranks is another row of a report than a run of one, and its record another file)."""
    data = cell.to_dict()
    if nproc != 1:
        data.update(id=f"{cell.id}_nproc-{nproc}", nproc=nproc)
    return data
