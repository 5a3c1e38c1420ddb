"""The options ``matrix`` and ``triage`` share — which forms, fixes and cells run, how many at a time, how often —
declared once, and the ``MatrixRequest`` they make. A group below the commands, so that ``triage`` does not import
the ``matrix`` command for it."""

from __future__ import annotations

import argparse
import dataclasses
import re
from collections.abc import Mapping, Sequence
from typing import Literal

from reprobisect.commands.declared import Flag, add_fields, composed, option, read_fields
from reprobisect.commands.engine_options import EngineOptions, add_executor
from reprobisect.commands.options import (
    BACKEND,
    FIXES,
    FORMS,
    FRESH,
    JOBS,
    NPROC,
    NPROC_HELP,
    REPEAT,
    TIMEOUT,
    TIMEOUT_HELP,
    CommonOptions,
    checked,
    number_option,
)
from reprobisect.config.expand import MAX_CELLS, PINNED_AXES
from reprobisect.errors import ConfigError
from reprobisect.run.matrix_request import MatrixRequest
from reprobisect.util.bounds import CELLS

__all__ = ["RunOptions", "add_run_options", "axis_values", "matrix_request", "parse_requires"]


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


SELECT = Flag.of("--select", action="append", default=[], read=tuple)
PYTHON = Flag.of("--python", read=lambda value: checked(value, "--python"))
REFRESH_INDEX = Flag.of("--refresh-index", action="store_true")
MAX_CELLS_FLAG = Flag.of("--max-cells", type=number_option("--max-cells", CELLS), default=MAX_CELLS, metavar="N")
REQUIRE = Flag.of("--require", action="append", default=[], metavar="NAME==VERSION", read=lambda v: parse_requires(v))


@dataclasses.dataclass(frozen=True, kw_only=True)
class RunOptions:
    """The options ``matrix`` and ``triage`` share, read once: which forms, fixes and cells, how many at a time, how
    often. Each declared here once, as its field, in the order ``--help`` lists them (commands/declared.py)."""

    backend: Literal["auto", "cuda", "cpu"] = option(BACKEND, help=None)
    select: tuple[str, ...] = option(SELECT, help="keep cells where AXIS=PATTERN, e.g. 'deepspeed=0.18.*'")
    python: str | None = option(PYTHON, help="replace the python axis (comma-separated values)")  # replaces the axis
    nproc: str | None = option(NPROC, help=NPROC_HELP)  # replaces the nproc axis
    fixes: tuple[str, ...] = option(FIXES, help="fix name(s); default: all", dest="fix")
    forms: tuple[str, ...] = option(FORMS, help="form(s) instead of the backend's", dest="form")
    jobs: int = option(JOBS, help="runs at a time (each gets its GPU or share of cores)")
    repeat: int = option(REPEAT, help="run each unit N times")
    fresh: bool = option(FRESH, help="re-run units that already have a record")
    refresh_index: bool = option(REFRESH_INDEX, help="ask the index again for ranges and latest")
    timeout: float | None = option(TIMEOUT, help=TIMEOUT_HELP)
    max_cells: int = option(
        MAX_CELLS_FLAG,
        help=f"plan at most N cells (default {MAX_CELLS}): a matrix whose axes expand to more is refused",
    )
    requires: Mapping[str, str] = option(
        REQUIRE,
        help="install this package at this version in every cell, beside the matrix's (repeatable): "
        "numpy==1.26.4 where a report's environment had it; the cell's id names it",
        dest="require",
    )  # --require NAME==VERSION, by name
    engine: EngineOptions = composed(add_executor, EngineOptions.from_args, EngineOptions)

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> RunOptions:
        """The group as parsed; --python is checked as every pin is (``checked``)."""
        return read_fields(cls, args)


def add_run_options(parser: argparse.ArgumentParser) -> None:
    """The options ``matrix`` and ``triage`` share: which forms, fixes and cells, how many at a time, how often."""
    add_fields(parser, RunOptions)


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
