"""Expand a matrix into cells: product of the axes, then exclude, then include, then compatibility.

Pure: the index is reached only through the ``resolve`` callable, so expansion is tested on literal
dicts. A cell that a compatibility rule removes is kept, with its reason, and reported as "not
installable together" — never silently dropped.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Literal

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from reprobisect.config.companions import COMPANIONS, MATCH, mismatch
from reprobisect.config.interpreters import check_interpreter
from reprobisect.errors import ConfigError
from reprobisect.util.bounds import CELLS, cut

__all__ = [
    "MAX_CELLS",
    "NON_PACKAGE_AXES",
    "PINNED_AXES",
    "RANKS_AXIS",
    "CompatibilityRule",
    "MatrixSpec",
    "PlannedCell",
    "expand",
    "is_local",
    "is_specifier",
    "matches",
    "resolve_value",
]

INTERPRETER_AXIS = "python"  # an axis that is no package on the index: the interpreter a cell is made from
RANKS_AXIS = "nproc"  # nor is this one: the ranks each run starts (run/child/launch.py); 1 without it
NON_PACKAGE_AXES = (INTERPRETER_AXIS, "torch", RANKS_AXIS)  # torch is a package, but the cell installs it apart
# the axes every cell-building command has an option for (--torch, --deepspeed, …)
PINNED_AXES = ("torch", "deepspeed", "lightning", "torchvision")
_MAX_RANKS = 64
META_KEYS = ("repros", "label")  # include entries may carry these; they are not axes
SYSTEM = "system"
LATEST = "latest"
_SPEC_START = ("<", ">", "=", "!", "~")
MAX_CELLS = 500  # cells a matrix may expand to without --max-cells: a typo in a range must not plan thousands


@dataclasses.dataclass(frozen=True, kw_only=True)
class CompatibilityRule:
    """When every ``when`` pattern matches a cell, every ``require`` pattern must match too."""

    when: Mapping[str, str]
    require: Mapping[str, str]
    reason: str
    # the rule holds only for repros whose scripts may import one of these modules (config/script_imports.py);
    # empty: for every repro
    imports: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True, kw_only=True)
class MatrixSpec:
    """The ``matrix:`` section of matrix.yaml."""

    axes: Mapping[str, tuple[str, ...]]
    exclude: tuple[Mapping[str, str], ...] = ()
    include: tuple[Mapping[str, str], ...] = ()
    rules: tuple[CompatibilityRule, ...] = ()
    prereleases: bool = False


@dataclasses.dataclass(frozen=True, kw_only=True)
class PlannedCell:
    """One combination of concrete values, with the reason it cannot be installed (if any)."""

    pins: Mapping[str, str]
    origin: Literal["product", "include"]
    blocked: str | None = None
    repros: tuple[str, ...] = ()
    label: str = ""

    def runs_repro(self, repro: str) -> bool:
        """Include entries may be limited to some repros."""
        return not self.repros or repro in self.repros


def is_specifier(value: str) -> bool:
    """``>=0.16,<0.20`` style ranges."""
    return value.startswith(_SPEC_START)


def is_local(value: str) -> bool:
    """A path, a wheel or a VCS URL: installed as it is, never looked up on the index."""
    return (
        "://" in value or value.startswith(("/", "./", "../", "git+", "file:")) or value.endswith((".whl", ".tar.gz"))
    )


def _version(value: str, axis: str, system_versions: Mapping[str, str]) -> Version | None:
    raw = system_versions.get(axis) if value == SYSTEM else value
    if raw is None or is_local(raw):
        return None
    try:
        return Version(raw)
    except InvalidVersion:
        return None


def matches(axis: str, value: str, pattern: str, system_versions: Mapping[str, str] | None = None) -> bool:
    """Does a cell's value on ``axis`` match a rule's pattern (exact, glob or specifier)?"""
    system_versions = system_versions or {}
    if is_specifier(pattern):
        version = _version(value, axis, system_versions)
        if version is None:
            return False
        try:
            return SpecifierSet(pattern).contains(version, prereleases=True)
        except InvalidSpecifier as exc:
            msg = f"{pattern!r} is not a valid version specifier ({exc})"
            raise ConfigError(msg) from exc
    if fnmatch.fnmatchcase(value, pattern):
        return True
    return value == SYSTEM and fnmatch.fnmatchcase(system_versions.get(axis, ""), pattern)


def resolve_value(axis: str, value: str, available: Callable[[str], Sequence[str]], *, prereleases: bool) -> list[str]:
    """The concrete values one axis entry stands for: itself, the newest release, or every release in a range.

    The ``python`` axis names interpreters, not packages: its values are taken as given (the cell is made
    from an interpreter of that version found on this machine, or is reported as not buildable here), once
    ``check_interpreter`` has found them to be a version or a Python interpreter's path, without running it."""
    if axis == RANKS_AXIS:
        if not value.isdigit() or not 1 <= int(value) <= _MAX_RANKS:
            msg = f"nproc: {value!r} is not a number of ranks; give a whole number from 1 to {_MAX_RANKS}"
            raise ConfigError(msg)
        return [str(int(value))]
    if value == MATCH:
        if axis not in COMPANIONS:
            msg = f"{axis}: {MATCH!r} is for a package built for one torch ({', '.join(COMPANIONS)}); give a version"
            raise ConfigError(msg)
        return [value]  # the cell resolves it once its torch is known (cells/envs.py)
    if axis == INTERPRETER_AXIS:
        return [check_interpreter(value, "the python axis")]
    if value == SYSTEM or is_local(value):
        return [value]
    if not is_specifier(value) and value != LATEST and not any(c in value for c in "*?["):
        known = available(axis)
        if value not in known:
            newest = [v for v in known if not Version(v).is_prerelease][-3:]
            msg = f"{axis}: {value!r} is not a release on the configured index" + (
                f"; the newest are {', '.join(newest)}" if newest else ""
            )
            raise ConfigError(msg)
        return [value]
    releases = [v for v in available(axis) if prereleases or not Version(v).is_prerelease]
    if value == LATEST:
        if not releases:
            msg = f"{axis}: 'latest' found no release on the configured index"
            raise ConfigError(msg)
        return [releases[-1]]
    if is_specifier(value):
        try:
            spec = SpecifierSet(value)
        except InvalidSpecifier as exc:
            msg = f"{axis}: {value!r} is not a valid version specifier ({exc}); write e.g. '>=0.16,<0.20'"
            raise ConfigError(msg) from exc
        chosen = [v for v in releases if spec.contains(Version(v), prereleases=prereleases)]
    else:
        chosen = [v for v in releases if fnmatch.fnmatchcase(v, value)]
    if not chosen:
        msg = f"{axis}: {value!r} matches no release on the configured index"
        raise ConfigError(msg)
    return chosen


def _rule_matches(cell: Mapping[str, str], rule: Mapping[str, str], system_versions: Mapping[str, str]) -> bool:
    return all(axis in cell and matches(axis, cell[axis], pattern, system_versions) for axis, pattern in rule.items())


def _blocked(
    cell: Mapping[str, str], rules: Sequence[CompatibilityRule], system_versions: Mapping[str, str]
) -> str | None:
    for rule in rules:
        if not _rule_matches(cell, rule.when, system_versions):
            continue
        # A git ref or a local checkout has no version a range could judge: the rule cannot say it is wrong.
        failing = [
            axis
            for axis, pattern in rule.require.items()
            if axis in cell
            and not (is_specifier(pattern) and _version(cell[axis], axis, system_versions) is None)
            and not matches(axis, cell[axis], pattern, system_versions)
        ]
        if failing:
            return rule.reason
    return _companion_mismatch(cell, system_versions)


def _companion_mismatch(cell: Mapping[str, str], system_versions: Mapping[str, str]) -> str | None:
    """A built-in rule: a torchvision pinned to a release made for another torch (``match`` never is)."""
    torch = cell.get("torch", SYSTEM)
    torch = system_versions.get("torch", "") if torch == SYSTEM else torch
    for name in COMPANIONS:
        pin = cell.get(name, MATCH)
        version = system_versions.get(name, "") if pin == SYSTEM else pin
        if pin != MATCH and version and torch and (reason := mismatch(torch, version)):
            return reason
    return None


def _check_size(names: Sequence[str], values: Sequence[Sequence[str]], includes: int, max_cells: int) -> None:
    """ConfigError when the axes (and includes) expand to more than ``max_cells`` cells, counted before any is made
    (ten axes of ten values are 10^10 combinations: never iterated)."""
    if not CELLS.holds(max_cells):
        raise ConfigError(CELLS.refusal("--max-cells", max_cells))
    total = math.prod(len(v) for v in values) + includes
    if total <= max_cells:
        return
    shape = " × ".join(f"{len(v)} {name}" for name, v in zip(names, values, strict=True))
    more = f", plus {includes} included" if includes else ""
    msg = f"the matrix expands to {total} cells ({shape}{more}), more than {max_cells}; narrow the axes or --select, "
    msg += f"or give --max-cells {total}"
    raise ConfigError(msg)


def expand(
    spec: MatrixSpec,
    available: Callable[[str], Sequence[str]],
    *,
    system_versions: Mapping[str, str] | None = None,
    max_cells: int = MAX_CELLS,
) -> list[PlannedCell]:
    """Product of the resolved axes → minus ``exclude`` → plus ``include`` → compatibility verdicts.

    More than ``max_cells`` cells (the product before ``exclude``, plus the includes) is refused before any is
    made: ``--max-cells`` raises the bound.

    Args:
        spec: the matrix as configured.
        available: releases of a package on the index, oldest first (only called for ranges/latest/globs).
        system_versions: versions behind ``system`` values (e.g. ``{"torch": "2.13.0+cpu"}``), for rules.
    """
    system_versions = system_versions or {}
    names = list(spec.axes)
    values = [
        [v for raw in spec.axes[name] for v in resolve_value(name, raw, available, prereleases=spec.prereleases)]
        for name in names
    ]
    _check_size(names, values, len(spec.include), max_cells)
    cells: list[dict[str, str]] = []
    for combination in itertools.product(*values):
        cell = dict(zip(names, combination, strict=True))
        if not any(_rule_matches(cell, rule, system_versions) for rule in spec.exclude):
            cells.append(cell)
    planned = [PlannedCell(pins=c, origin="product", blocked=_blocked(c, spec.rules, system_versions)) for c in cells]
    for raw_entry in spec.include:
        entry = {k: v for k, v in raw_entry.items() if k not in META_KEYS}
        if INTERPRETER_AXIS in entry:
            check_interpreter(entry[INTERPRETER_AXIS], f"include {cut(dict(entry), 60)}")
        removed_by = next((rule for rule in spec.exclude if _rule_matches(entry, rule, system_versions)), None)
        if removed_by is not None:
            msg = f"include {dict(entry)!r} is removed again by exclude {dict(removed_by)!r}: contradicting rules"
            raise ConfigError(msg)
        if any(dict(p.pins) == dict(entry) for p in planned):
            continue
        repros = tuple(r.strip() for r in raw_entry.get("repros", "").split(",") if r.strip())
        planned.append(
            PlannedCell(
                pins=entry,
                origin="include",
                blocked=_blocked(entry, spec.rules, system_versions),
                repros=repros,
                label=raw_entry.get("label", ""),
            )
        )
    return planned
