"""Packages built for one torch release: torchvision's releases follow torch's, series for series.

torchvision 0.N is made for one torch minor series (its wheels require ``torch==X.Y.Z`` exactly): 0.N for torch
1.(N-1) up to torchvision 0.14 / torch 1.13, then 0.N for torch 2.(N-15) from torchvision 0.15 / torch 2.0 (the
table in torchvision's README). A cell that pairs them otherwise imports a torchvision whose C++ ops were built
against another torch: it is "not installable together", with this reason, and never built.

Within a series the patch releases do not line up one to one (torch 2.0.0 came with torchvision 0.15.1); the pin
``match`` (the default) leaves that to the resolver, which picks the torchvision whose own requirement accepts the
cell's torch. Pure: versions in, words out.
"""

from __future__ import annotations

from packaging.version import InvalidVersion, Version

from reprobisect.model.cell import MATCH  # a companion's pin: the release made for the cell's torch, if any

__all__ = ["COMPANIONS", "MATCH", "mismatch", "torchvision_series"]

COMPANIONS = ("torchvision",)


def _release(version: str) -> tuple[int, ...] | None:
    """``2.13.0+cpu`` as ``(2, 13, 0)``; None for what is no version (a path, a git URL, ``system``)."""
    try:
        return Version(version).release
    except InvalidVersion:
        return None


def torchvision_series(torch_version: str) -> str | None:
    """The torchvision series made for a torch version: ``2.13.0+cpu`` → ``0.28``; None when no rule is known."""
    release = _release(torch_version)
    if release is None or len(release) < 2:
        return None
    major, minor = release[:2]
    if major == 1 and minor >= 1:
        return f"0.{minor + 1}"
    if major == 2:
        return f"0.{minor + 15}"
    return None  # torch 0.x predates the rule; a torch 3 has no known series yet


def mismatch(torch_version: str, torchvision_version: str) -> str | None:
    """Why torchvision ``torchvision_version`` cannot run with torch ``torch_version``; None when it can, or when
    either is no version the rule can judge (a git ref, a local checkout, a torch the rule does not know)."""
    series = torchvision_series(torch_version)
    release = _release(torchvision_version)
    if series is None or release is None or len(release) < 2:
        return None
    if f"{release[0]}.{release[1]}" == series:
        return None
    torch_series = ".".join(torch_version.split(".")[:2])
    return (
        f"torchvision {torchvision_version} is not made for torch {torch_version}: torch {torch_series} takes "
        f"torchvision {series}.x (torchvision pins its torch exactly; its compiled ops need that torch)"
    )
