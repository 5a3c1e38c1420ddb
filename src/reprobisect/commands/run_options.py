"""The options ``matrix`` and ``triage`` share — which forms, fixes and cells run, how many at a time, how often —
declared once, and the ``MatrixRequest`` they make. A group below the commands, so that ``triage`` does not import
the ``matrix`` command for it."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Literal

from reprobisect.commands.engine_options import EngineOptions, add_executor
from reprobisect.commands.options import (
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
from reprobisect.config.expand import MAX_CELLS
from reprobisect.errors import ConfigError
from reprobisect.run.matrix_request import MatrixRequest
from reprobisect.util.bounds import CELLS

__all__ = ["RunOptions", "add_run_options", "axis_values", "matrix_request"]


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
    parser.add_argument("--fresh", action="store_true", help="re-run units that already have a record")
    parser.add_argument("--refresh-index", action="store_true", help="ask the index again for ranges and latest")
    add_timeout(parser)
    parser.add_argument(
        "--max-cells",
        type=number_option("--max-cells", CELLS),
        default=MAX_CELLS,
        metavar="N",
        help=f"plan at most N cells (default {MAX_CELLS}): a matrix whose axes expand to more is refused",
    )
    add_executor(parser)


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
    )
