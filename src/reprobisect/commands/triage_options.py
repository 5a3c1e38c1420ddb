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
from reprobisect.commands.options import CLONES, CULPRITS, CommonOptions, add_common
from reprobisect.commands.run_options import RunOptions, add_run_options
from reprobisect.commands.script_options import ScriptOptions, add_script_options
from reprobisect.commands.timing_options import TimingOptions, add_timing

__all__ = ["TriageOptions", "add_triage_options", "parse_triage"]


def add_triage_options(parser: argparse.ArgumentParser) -> None:
    """``triage``'s script and options, in the order its ``--help`` lists them."""
    parser.add_argument(
        "script", type=Path, nargs="?", help="the script to run (any file; it is run as untrusted code), or --pytest"
    )
    add_script_options(parser, script=False)
    add_run_options(parser)
    CLONES.add_to(
        parser,
        "git",
        "with a range pin: a whole clone of the package whose releases vary; the commits between the tags of "
        "each change are bisected for the one that introduced (or fixed) the bug. With ranges on two packages, "
        "one per package (--git deepspeed=CLONE --git lightning=CLONE): the commit behind each edge of the grid, "
        "along that package, the other held at the edge's release; a package given none is not searched",
    )
    CULPRITS.add_to(
        parser,
        "culprits",
        "as --git, with a clone of the package's known repository the harness makes (network allowing); "
        "beside two ranges, for each package --git does not name",
    )
    parser.add_argument(
        "--full-grid",
        action="store_true",
        help="with ranges on two packages: run every cell of their grid instead of searching it for the boundary "
        "of the failing region",
    )
    add_timing(parser, compare_with=False)
    add_common(parser)


@dataclasses.dataclass(frozen=True, kw_only=True)
class TriageOptions:
    """``triage``'s command line, read once: the script (or tests), the run, the clone for the commits."""

    script: ScriptOptions = dataclasses.field(default_factory=ScriptOptions)
    run: RunOptions = dataclasses.field(default_factory=RunOptions)
    git: Path | None = None  # --git CLONE: the clone of the one package a range varies
    git_for: Mapping[str, Path] = dataclasses.field(default_factory=dict)  # --git PACKAGE=CLONE, by package
    culprits: bool = False
    timing: TimingOptions = dataclasses.field(default_factory=TimingOptions)  # --slower-than: the first release's
    full_grid: bool = False  # two ranges: every cell (the matrix as before), not the grid search
    common: CommonOptions

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> TriageOptions:
        """The command line as parsed."""
        common = CommonOptions.from_args(args)
        bare, named = named_clones(args.git)
        return cls(
            script=ScriptOptions.from_args(args, script_args=args.script_args),
            run=RunOptions.from_args(args),
            git=bare,
            git_for=named,
            culprits=args.culprits,
            timing=TimingOptions.from_args(args),
            full_grid=args.full_grid,
            common=common,
        )


def parse_triage(argv: Sequence[str]) -> TriageOptions:
    """A triage command line (the words after ``reprobisect triage``, none after ``--``) read as ``triage`` reads
    its own; argparse's usage error (exit 2) where it is not one."""
    parser = argparse.ArgumentParser(prog="reprobisect triage")
    add_triage_options(parser)
    args = parser.parse_args(list(argv))
    args.script_args = ()
    return TriageOptions.from_args(args)
