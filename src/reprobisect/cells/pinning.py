"""A cell's pins made concrete: which exact versions they give, before anything is installed.

Exact versions, ``system`` and ``match`` stay as they are; ranges and ``latest`` are resolved together by
``uv pip compile`` (cells/resolver.py) against the index the user's uv configuration points at, or, without uv,
each to the newest final release the index lists (cells/index.py). torch is never resolved: ``system`` is the
base interpreter's, anything else is taken as pinned. The concrete cell names the venv (its id); how one pin is
then asked of the installer (a version, a VCS URL, a local path) is decided here too.

Apart from cells/envs.py, which builds the venv a resolved cell names: what a cell is (its versions, its id) and how
its venv is made are two questions; the first asks only the index, the second installs.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from reprobisect.cells.base import BaseInterpreter
from reprobisect.cells.index import list_versions
from reprobisect.cells.resolver import installer, uv_compile
from reprobisect.errors import ConfigError
from reprobisect.model.cell import MATCH, SYSTEM, Cell

__all__ = ["install_requirement", "resolve_cell"]


def _requirement(name: str, spec: str) -> str:
    if spec == "latest":
        return name
    if spec[0].isdigit():
        return f"{name}=={spec}"
    return f"{name}{spec}"


def resolve_cell(base: BaseInterpreter, pins: Mapping[str, str], *, uv: str = "uv") -> Cell:
    """Turn pins (exact versions, specifiers, ``latest``) into a concrete cell.

    Non-exact pins are resolved together by ``uv pip compile`` against the index the user's uv
    configuration points at, so ``latest`` means the newest releases that install together.
    """
    torch_pin = pins.get("torch", SYSTEM)
    if torch_pin == SYSTEM:
        if base.torch is None:
            msg = (
                f"torch: 'system' but the base interpreter {base.executable} has no torch; "
                "install torch into it (pip install torch) or pin one with --torch VERSION"
            )
            raise ConfigError(msg)
        torch_version, torch_source = base.torch, SYSTEM
    else:
        torch_version, torch_source = torch_pin, "pinned"
    others = {name: spec for name, spec in pins.items() if name != "torch"}
    empty = sorted(name for name, spec in pins.items() if not spec.strip())
    if empty:
        msg = f"pin {empty[0]}: empty; give a version, a specifier, 'latest' or 'system'"
        raise ConfigError(msg)
    # ``match`` (torchvision) stays as it is: cells/companion_match.py makes it concrete once the torch is known
    exact = {
        name: spec
        for name, spec in others.items()
        if spec in (SYSTEM, MATCH) or (spec != "latest" and spec[0].isdigit())
    }
    loose = {name: spec for name, spec in others.items() if name not in exact}
    if loose:
        if installer() == "uv":
            exact.update(_compile(base, [_requirement(n, s) for n, s in loose.items()], exact, uv=uv))
        else:  # no uv to resolve together: the newest release of each that the index lists
            exact.update(_newest(base, loose))
    return Cell(python=base.version, torch=torch_version, torch_source=torch_source, packages=exact)


def _newest(base: BaseInterpreter, loose: Mapping[str, str]) -> dict[str, str]:
    chosen = {}
    for name, spec in loose.items():
        releases = [v for v in list_versions(base.executable, name) if not Version(v).is_prerelease]
        if spec != "latest":
            releases = [v for v in releases if Version(v) in SpecifierSet(spec)]
        if not releases:
            msg = f"{name}{'' if spec == 'latest' else spec}: no release on the configured index"
            raise ConfigError(msg)
        chosen[name] = releases[-1]
    return chosen


def _compile(base: BaseInterpreter, requirements: list[str], fixed: Mapping[str, str], *, uv: str) -> dict[str, str]:
    lines = [*requirements, *(f"{n}=={v}" for n, v in fixed.items() if v not in (SYSTEM, MATCH))]
    out = uv_compile(
        lines,
        python_version=".".join(base.version.split(".")[:2]),
        excluded=[n for n, v in fixed.items() if v == SYSTEM],
        uv=uv,
    )
    if out.returncode != 0:
        msg = f"cannot resolve {', '.join(requirements)} together: {out.stderr.strip()[-800:]}"
        raise ConfigError(msg)
    wanted = {canonicalize_name(name): name for name in (re.split(r"[<>=!~ ]", r, maxsplit=1)[0] for r in requirements)}
    resolved = {}
    for line in out.stdout.splitlines():
        name, sep, version = line.strip().partition("==")
        if sep and canonicalize_name(name.strip()) in wanted:
            resolved[wanted[canonicalize_name(name.strip())]] = version.split(";")[0].strip()
    missing = sorted(set(wanted.values()) - set(resolved))
    if missing:
        msg = f"cannot resolve {missing[0]!r}: uv pip compile named no version of it; check the package's name"
        raise ConfigError(msg)
    return resolved


def install_requirement(name: str, spec: str) -> str:
    """What uv is asked to install for one pin: ``name==1.2``, ``name @ git+...@ref`` or a path."""
    if "://" in spec or spec.startswith("git+"):
        return f"{name} @ {spec}"
    if spec.startswith(("/", "./", "../")) or spec.endswith((".whl", ".tar.gz")):
        return str(Path(spec).resolve())
    return f"{name}=={spec}"
