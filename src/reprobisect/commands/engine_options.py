"""Where a command's cells run: ``--executor local|slurm`` and what passes through to Slurm, as ``EngineOptions``.

The options say which engine; the engine itself (engine/slurm.py: each cell a job, each wave of cells one job array)
is made once per command, with the ``RunContext`` it is handed down in (``run_context(common, engine.engine())``),
and says its losses and overhead at the end (``engine_summary``).
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Literal

from reprobisect.commands.declared import Flag, add_fields, declared_flags, option, read_fields
from reprobisect.commands.options import number_option
from reprobisect.engine.slurm import SlurmExecutor, SlurmOptions, slurm_arg, slurm_available
from reprobisect.errors import ConfigError
from reprobisect.run.context import MatrixExecutor
from reprobisect.util.bounds import Bound, cut

_MINUTES = Bound(1, 60 * 24 * 30, unit="minutes")  # a cell's job: up to the longest limit clusters allow
_CPUS = Bound(1, 1024)

__all__ = ["EngineOptions", "add_executor", "engine_summary"]


def _sbatch_value(value: str | None, option: str) -> str | None:
    """A partition, account or feature list as given, or ConfigError: one that starts with '-' (sbatch would read an
    option), holds a control character (a second ``#SBATCH`` line) or runs longer than 200 characters."""
    if value is None:
        return None
    if value.startswith("-") or len(value) > 200 or any(ord(c) < 32 or ord(c) == 127 for c in value):
        msg = f"{option} {cut(value)}: must be a Slurm name (not starting with '-', one line, at most 200 characters)"
        raise ConfigError(msg)
    return value


_WHERE = (
    "where runs happen",
    "with --executor slurm, --out and --envs must lie on a filesystem every node sees (records, cells, op cache)",
)
EXECUTOR = Flag.of("--executor", choices=("local", "slurm"), default="local")
SLURM_PARTITION = Flag.of("--slurm-partition", metavar="NAME")
SLURM_ACCOUNT = Flag.of("--slurm-account", metavar="NAME")
SLURM_TIME = Flag.of("--slurm-time", metavar="MINUTES", type=number_option("--slurm-time", _MINUTES))
SLURM_CONSTRAINT = Flag.of("--slurm-constraint", metavar="FEATURES")
SLURM_CPUS = Flag.of("--slurm-cpus", metavar="N", type=number_option("--slurm-cpus", _CPUS))
SLURM_ARG = Flag.of("--slurm-arg", action="append", default=[], metavar="KEY=VALUE", read=tuple)
SLURM_FOLDER = Flag.of("--slurm-folder", type=Path, metavar="DIR", read=lambda path: path.resolve() if path else None)


@dataclasses.dataclass(frozen=True, kw_only=True)
class EngineOptions:
    """``--executor local|slurm`` and what passes through to Slurm (engine/slurm.py): each cell a job, each wave of
    cells (a matrix, a round of bisection probes, a nightly slice) one job array. Each option declared here once,
    as its field (commands/declared.py); ``slurm`` is what they say, None for ``--executor local`` (this machine).
    Slurm options without ``--executor slurm`` are refused as the object is built, naming the first: they would be
    ignored; so is a ``--slurm-arg`` that is no sbatch option, and a value sbatch would read as two lines."""

    executor: Literal["local", "slurm"] = option(
        EXECUTOR,
        help="local: this machine; slurm: one job per cell, one job array per wave (submitit, sacct, scancel)",
        group=_WHERE,
    )
    slurm_partition: str | None = option(SLURM_PARTITION, help="the partition every job goes to", group=_WHERE)
    slurm_account: str | None = option(SLURM_ACCOUNT, help="the account the jobs are charged to", group=_WHERE)
    slurm_time: int | None = option(SLURM_TIME, help="time limit of each cell's job (default 60)", group=_WHERE)
    slurm_constraint: str | None = option(
        SLURM_CONSTRAINT, help="node features the jobs need (--constraint)", group=_WHERE
    )
    slurm_cpus: int | None = option(SLURM_CPUS, help="cores per job (--cpus-per-task)", group=_WHERE)
    slurm_arg: tuple[str, ...] = option(
        SLURM_ARG,
        help="any other sbatch option for every job, e.g. qos=high (repeatable); --gres=gpu:N comes from the runs' "
        "nproc on --backend cuda",
        group=_WHERE,
    )
    slurm_folder: Path | None = option(
        SLURM_FOLDER, help="the jobs' pickles and logs (default: --out/slurm)", group=_WHERE
    )

    def __post_init__(self) -> None:
        given = [flag.name for name, flag in declared_flags(EngineOptions).items()
                 if name != "executor" and getattr(self, name) not in (None, ())]  # fmt: skip
        if self.executor == "local" and given:
            msg = f"{given[0]} goes with --executor slurm"
            raise ConfigError(msg)
        _ = self.slurm  # each value one sbatch line, each --slurm-arg an sbatch option: refused here, by flag

    @property
    def slurm(self) -> SlurmOptions | None:
        """What passes through to Slurm with ``--executor slurm``; None: this machine."""
        if self.executor == "local":
            return None
        return SlurmOptions(  # each value one sbatch line: never an option in disguise, never two lines
            partition=_sbatch_value(self.slurm_partition, "--slurm-partition"),
            account=_sbatch_value(self.slurm_account, "--slurm-account"),
            time_minutes=self.slurm_time or 60,
            constraint=_sbatch_value(self.slurm_constraint, "--slurm-constraint"),
            cpus_per_job=self.slurm_cpus,
            extra=dict(slurm_arg(text) for text in self.slurm_arg),
            folder=self.slurm_folder,
        )

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> EngineOptions:
        """The group as parsed."""
        return read_fields(cls, args)

    def engine(self) -> MatrixExecutor | None:
        """A new engine of these options, None for this machine: a command makes one, with its ``RunContext``,
        before anything is built; ``EngineError`` (exit 11, one line) where Slurm is not installed."""
        if self.slurm is None:
            return None
        slurm_available()
        return SlurmExecutor(self.slurm)


def add_executor(parser: argparse.ArgumentParser) -> None:
    """``EngineOptions``' options, in their group."""
    add_fields(parser, EngineOptions)


def engine_summary(engine: MatrixExecutor | None) -> list[str]:
    """What the engine says at the end of a command: jobs lost (and requeued), overhead per job; nothing locally."""
    return list(engine.summary()) if isinstance(engine, SlurmExecutor) else []
