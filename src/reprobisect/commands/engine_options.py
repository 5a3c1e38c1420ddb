"""Where a command's cells run: ``--executor local|slurm`` and what passes through to Slurm, as ``EngineOptions``.

The options say which engine; the engine itself (engine/slurm.py: each cell a job, each wave of cells one job array)
is made once per command, with the ``RunContext`` it is handed down in (``run_context(common, engine.engine())``),
and says its losses and overhead at the end (``engine_summary``).
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from reprobisect.commands.options import number_option
from reprobisect.engine.slurm import SlurmExecutor, SlurmOptions, slurm_arg, slurm_available
from reprobisect.errors import ConfigError
from reprobisect.run.context import MatrixExecutor
from reprobisect.util.bounds import Bound, cut

_MINUTES = Bound(1, 60 * 24 * 30, unit="minutes")  # a cell's job: up to the longest limit clusters allow
_CPUS = Bound(1, 1024)

__all__ = ["EngineOptions", "add_executor", "engine_summary"]


def add_executor(parser: argparse.ArgumentParser) -> None:
    """``--executor local|slurm`` and what passes through to Slurm (engine/slurm.py): each cell a job, each wave of
    cells (a matrix, a round of bisection probes, a nightly slice) one job array."""
    group = parser.add_argument_group(
        "where runs happen",
        "with --executor slurm, --out and --envs must lie on a filesystem every node sees (records, cells, op cache)",
    )
    group.add_argument(
        "--executor",
        choices=("local", "slurm"),
        default="local",
        help="local: this machine; slurm: one job per cell, one job array per wave (submitit, sacct, scancel)",
    )
    group.add_argument("--slurm-partition", metavar="NAME", help="the partition every job goes to")
    group.add_argument("--slurm-account", metavar="NAME", help="the account the jobs are charged to")
    group.add_argument(
        "--slurm-time",
        metavar="MINUTES",
        type=number_option("--slurm-time", _MINUTES),
        help="time limit of each cell's job (default 60)",
    )
    group.add_argument("--slurm-constraint", metavar="FEATURES", help="node features the jobs need (--constraint)")
    group.add_argument(
        "--slurm-cpus", metavar="N", type=number_option("--slurm-cpus", _CPUS), help="cores per job (--cpus-per-task)"
    )
    group.add_argument(
        "--slurm-arg",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="any other sbatch option for every job, e.g. qos=high (repeatable); --gres=gpu:N comes from the runs' "
        "nproc on --backend cuda",
    )
    group.add_argument(
        "--slurm-folder", type=Path, metavar="DIR", help="the jobs' pickles and logs (default: --out/slurm)"
    )


def _slurm_given(args: argparse.Namespace) -> list[str]:
    """The Slurm options given on the command line, by name."""
    given = {
        "--slurm-partition": args.slurm_partition,
        "--slurm-account": args.slurm_account,
        "--slurm-time": args.slurm_time,
        "--slurm-constraint": args.slurm_constraint,
        "--slurm-cpus": args.slurm_cpus,
        "--slurm-arg": args.slurm_arg,
        "--slurm-folder": args.slurm_folder,
    }
    return [option for option, value in given.items() if value not in (None, [])]


def _sbatch_value(value: str | None, option: str) -> str | None:
    """A partition, account or feature list as given, or ConfigError: one that starts with '-' (sbatch would read an
    option), holds a control character (a second ``#SBATCH`` line) or runs longer than 200 characters."""
    if value is None:
        return None
    if value.startswith("-") or len(value) > 200 or any(ord(c) < 32 or ord(c) == 127 for c in value):
        msg = f"{option} {cut(value)}: must be a Slurm name (not starting with '-', one line, at most 200 characters)"
        raise ConfigError(msg)
    return value


@dataclasses.dataclass(frozen=True, kw_only=True)
class EngineOptions:
    """``add_executor``'s group, read once: ``slurm`` holds what passes through to Slurm with ``--executor slurm``;
    None is ``--executor local`` (this machine)."""

    slurm: SlurmOptions | None = None

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> EngineOptions:
        """The group as parsed. Slurm options without ``--executor slurm`` are refused, naming the first: they would
        be ignored; so is a ``--slurm-arg`` that is no sbatch option."""
        if args.executor == "local":
            given = _slurm_given(args)
            if given:
                msg = f"{given[0]} goes with --executor slurm"
                raise ConfigError(msg)
            return cls()
        slurm = SlurmOptions(  # each value one sbatch line: never an option in disguise, never two lines
            partition=_sbatch_value(args.slurm_partition, "--slurm-partition"),
            account=_sbatch_value(args.slurm_account, "--slurm-account"),
            time_minutes=args.slurm_time or 60,
            constraint=_sbatch_value(args.slurm_constraint, "--slurm-constraint"),
            cpus_per_job=args.slurm_cpus,
            extra=dict(slurm_arg(text) for text in args.slurm_arg),
            folder=args.slurm_folder.resolve() if args.slurm_folder else None,
        )
        return cls(slurm=slurm)

    def engine(self) -> MatrixExecutor | None:
        """A new engine of these options, None for this machine: a command makes one, with its ``RunContext``,
        before anything is built; ``EngineError`` (exit 11, one line) where Slurm is not installed."""
        if self.slurm is None:
            return None
        slurm_available()
        return SlurmExecutor(self.slurm)


def engine_summary(engine: MatrixExecutor | None) -> list[str]:
    """What the engine says at the end of a command: jobs lost (and requeued), overhead per job; nothing locally."""
    return list(engine.summary()) if isinstance(engine, SlurmExecutor) else []
