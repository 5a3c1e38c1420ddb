"""The options ``matrix`` and ``triage`` share — which forms, fixes and cells run, how many at a time, how often —
declared once, and the ``MatrixRequest`` they make. A group below the commands, so that ``triage`` does not import
the ``matrix`` command for it."""

from __future__ import annotations

import argparse
import dataclasses
import re
from collections.abc import Mapping, Sequence
from typing import Literal

from reprobisect.commands.engine_options import EngineOptions, add_executor
from reprobisect.commands.options import (
    FRESH,
    CommonOptions,
    add_backend,
    add_fixes,
    add_forms,
    add_jobs,
    add_nproc,
    add_repeat,
    add_timeout,
    checked,
    number_option,
    split,
)
from reprobisect.config.expand import MAX_CELLS, PINNED_AXES
from reprobisect.errors import ConfigError
from reprobisect.run.matrix_request import MatrixRequest
from reprobisect.util.bounds import CELLS

__all__ = ["RunOptions", "add_run_options", "axis_values", "matrix_request", "parse_requires"]


def add_run_options(parser: argparse.ArgumentParser) -> None:
    """The options ``matrix`` and ``triage`` share: which forms, fixes and cells, how many at a time, how often."""
    add_backend(parser)
    parser.add_argument(
        "--select", action="append", default=[], help="keep cells where AXIS=PATTERN, e.g. 'deepspeed=0.18.*'"
    )
    parser.add_argument("--python", help="replace the python axis (comma-separated values)")
    add_nproc(parser)
    add_fixes(parser)
    add_forms(parser)
    add_jobs(parser, help="runs at a time (each gets its GPU or share of cores)")
    add_repeat(parser)
    FRESH.add_to(parser, "fresh", "re-run units that already have a record")
    parser.add_argument("--refresh-index", action="store_true", help="ask the index again for ranges and latest")
    add_timeout(parser)
    parser.add_argument(
        "--max-cells",
        type=number_option("--max-cells", CELLS),
        default=MAX_CELLS,
        metavar="N",
        help=f"plan at most N cells (default {MAX_CELLS}): a matrix whose axes expand to more is refused",
    )
    parser.add_argument(
        "--require",
        action="append",
        default=[],
        metavar="NAME==VERSION",
        help="install this package at this version in every cell, beside the matrix's (repeatable): "
        "numpy==1.26.4 where a report's environment had it; the cell's id names it",
    )
    add_executor(parser)


_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,62}[A-Za-z0-9])?")
_VERSION = re.compile(r"[0-9][0-9A-Za-z.+!-]{0,40}")


def parse_requires(values: Sequence[str]) -> dict[str, str]:
    """``--require NAME==VERSION`` as ``{name: version}``: a distribution's name and one exact version (what uv is
    handed is never an option in disguise, a URL or a range); a matrix package (pinned with its own option) or a
    package given twice is refused, naming the value."""
    found: dict[str, str] = {}
    for value in values:
        name, sep, version = value.partition("==")
        name, version = name.strip(), version.strip()
        if not sep or not _NAME.fullmatch(name) or not _VERSION.fullmatch(version):
            msg = f"--require {value[:80]!r}: give NAME==VERSION, one exact version of one package (numpy==1.26.4)"
            raise ConfigError(msg)
        key = name.lower().replace("_", "-")
        if key in (*PINNED_AXES, "python", "nproc"):
            msg = f"--require {value[:80]!r}: {name} is one of the matrix's packages; pin it with --{key}"
            raise ConfigError(msg)
        if key in found:
            msg = f"--require {value[:80]!r}: {name} was required twice"
            raise ConfigError(msg)
        found[key] = version
    return found


def axis_values(value: str) -> tuple[str, ...]:
    """``0.16.4,0.19.8`` is two values; a specifier such as ``>=0.16,<0.20`` is one."""
    if value.startswith(("<", ">", "=", "!", "~")):
        return (value,)
    return tuple(v.strip() for v in value.split(",") if v.strip())


@dataclasses.dataclass(frozen=True, kw_only=True)
class RunOptions:
    """``add_run_options``'s group, read once: the options ``matrix`` and ``triage`` share."""

    backend: Literal["auto", "cuda", "cpu"] = "auto"
    select: tuple[str, ...] = ()
    python: str | None = None  # replaces the python axis
    nproc: str | None = None  # replaces the nproc axis
    fixes: tuple[str, ...] = ()  # --fix, split
    forms: tuple[str, ...] = ()  # --form, split
    jobs: int = 1
    repeat: int = 1
    fresh: bool = False
    refresh_index: bool = False
    timeout: float | None = None
    max_cells: int = MAX_CELLS
    requires: Mapping[str, str] = dataclasses.field(default_factory=dict)  # --require NAME==VERSION, by name
    engine: EngineOptions = dataclasses.field(default_factory=EngineOptions)

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> RunOptions:
        """The group as parsed; --python is checked as every pin is (``checked``)."""
        return cls(
            backend=args.backend,
            select=tuple(args.select),
            python=checked(args.python, "--python"),
            nproc=args.nproc,
            fixes=split(args.fix),
            forms=split(args.form),
            jobs=args.jobs,
            repeat=args.repeat,
            fresh=args.fresh,
            refresh_index=args.refresh_index,
            timeout=args.timeout,
            max_cells=args.max_cells,
            requires=parse_requires(args.require),
            engine=EngineOptions.from_args(args),
        )


def matrix_request(
    options: RunOptions,
    common: CommonOptions,
    repros: tuple[str, ...],
    *,
    base_axes: dict[str, tuple[str, ...]] | None = None,
) -> MatrixRequest:
    """The options as a MatrixRequest; contradictions are refused here, before anything is planned. ``base_axes``
    replace matrix.yaml's axes (triage starts from the default cell) before the command line's do."""
    axes = dict(base_axes or {})
    given = {**common.pins, "python": options.python, "nproc": options.nproc}
    axes.update({name: axis_values(value) for name, value in given.items() if value})
    if options.jobs < 1 or options.repeat < 1:
        msg = f"--jobs {options.jobs} / --repeat {options.repeat}: both must be at least 1"
        raise ConfigError(msg)
    return MatrixRequest(
        repros=repros,
        backend=options.backend,
        axes=axes,
        select=options.select,
        fixes=options.fixes,
        forms=options.forms,
        jobs=options.jobs,
        repeat=options.repeat,
        fresh=options.fresh,
        refresh_index=options.refresh_index,
        timeout=options.timeout,
        cpus_per_run=common.cpus_per_run,
        confinement=common.confinement,
        use_includes=base_axes is None,
        max_cells=options.max_cells,
        requires=dict(options.requires),
    )
