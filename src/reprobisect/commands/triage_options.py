"""``triage``'s options, declared here once, and ``TriageOptions``, the typed object they become.

A module of its own below the commands, so that ``corpus``, which triages every entry as a maintainer would, reads
an entry's triage command line exactly as ``triage`` does without importing the ``triage`` command
(tests/unit/test_command_imports.py: no command module imports another).
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path

from reprobisect.bisect.edge_culprits import named_clones
from reprobisect.commands.declared import Flag, add_fields, composed, option, read_fields
from reprobisect.commands.options import CLONES, CULPRITS, CommonOptions, add_common
from reprobisect.commands.run_options import RunOptions, add_run_options
from reprobisect.commands.script_options import ScriptOptions, add_script_options
from reprobisect.commands.timing_options import TimingOptions, add_timing

__all__ = ["TriageOptions", "add_triage_options", "parse_triage"]


FULL_GRID = Flag.of("--full-grid", action="store_true")
SCRIPT_ARGUMENT = Flag.of("script", type=Path, nargs="?")  # triage's script: its argument, not --script


def _add_script(parser: argparse.ArgumentParser) -> None:
    """The script, triage's argument (not ``--script``), and what goes with it."""
    SCRIPT_ARGUMENT.add_to(parser, "script", "the script to run (any file; it is run as untrusted code), or --pytest")
    add_script_options(parser, script=False)


@dataclasses.dataclass(frozen=True, kw_only=True)
class TriageOptions:
    """``triage``'s command line, read once: the script (or tests), the run, the clones for the commits. Each option
    declared here once, as its field, in the order ``--help`` lists them (commands/declared.py)."""

    script: ScriptOptions = composed(_add_script, ScriptOptions.from_args, ScriptOptions)
    run: RunOptions = composed(add_run_options, RunOptions.from_args, RunOptions)
    clones: tuple[str, ...] = option(
        CLONES,
        help="with a range pin: a whole clone of the package whose releases vary; the commits between the tags of "
        "each change are bisected for the one that introduced (or fixed) the bug. With ranges on two packages, "
        "one per package (--git deepspeed=CLONE --git lightning=CLONE): the commit behind each edge of the grid, "
        "along that package, the other held at the edge's release; a package given none is not searched",
        dest="git",
    )  # as given: ``git`` and ``git_for`` read them
    culprits: bool = option(
        CULPRITS,
        help="as --git, with a clone of the package's known repository the harness makes (network allowing); "
        "beside two ranges, for each package --git does not name",
    )
    full_grid: bool = option(
        FULL_GRID,
        help="with ranges on two packages: run every cell of their grid instead of searching it for the boundary "
        "of the failing region",
    )  # two ranges: every cell (the matrix as before), not the grid search
    timing: TimingOptions = composed(
        lambda parser: add_timing(parser, compare_with=False), TimingOptions.from_args, TimingOptions
    )  # --slower-than: compared with the first release's
    common: CommonOptions = composed(add_common, CommonOptions.from_args)

    def __post_init__(self) -> None:
        named_clones(self.clones)  # a wrong --git is refused as the options are read, naming the value

    @property
    def git(self) -> Path | None:
        """``--git CLONE``: the clone of the one package a range varies."""
        return named_clones(self.clones)[0]

    @property
    def git_for(self) -> Mapping[str, Path]:
        """``--git PACKAGE=CLONE``, by package."""
        return named_clones(self.clones)[1]

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> TriageOptions:
        """The command line as parsed."""
        return read_fields(cls, args)


def add_triage_options(parser: argparse.ArgumentParser) -> None:
    """``triage``'s script and options (``TriageOptions``), in the order its ``--help`` lists them."""
    add_fields(parser, TriageOptions)


def parse_triage(argv: Sequence[str]) -> TriageOptions:
    """A triage command line (the words after ``reprobisect triage``, none after ``--``) read as ``triage`` reads
    its own; argparse's usage error (exit 2) where it is not one."""
    parser = argparse.ArgumentParser(prog="reprobisect triage")
    add_triage_options(parser)
    args = parser.parse_args(list(argv))
    args.script_args = ()
    return TriageOptions.from_args(args)
