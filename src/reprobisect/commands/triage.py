"""``reprobisect triage SCRIPT [options] [-- script args]``: a script from an issue in the default cell (or across
the releases its pins name), in every form this machine runs, beside the fixes given on the command line.

It is ``matrix --script`` starting from matrix.yaml's default cell instead of its axes, because a maintainer
triaging a report first asks "does it fail on the newest releases, and does my fix help?"; a range pin
(``--deepspeed '>=0.16,<0.20'``) runs every release in it and ends with the whole answer: the affected releases as
ranges, the change at each end (with ``--git CLONE`` or ``--culprits``, the commit that introduced the bug and the
one that fixed it, with their pull requests), the candidate fixes over the affected range, and the commands that
re-run each finding. With ``--slower-than PERCENT`` it also answers "it got slower": a timing search over every
release of the range against the first (bisect/slowdown_answer.py), with the commit behind each change.
"""

from __future__ import annotations

import argparse
import sys

from reprobisect.bisect.timed import ambiguous_versions
from reprobisect.commands.options import Subparsers
from reprobisect.commands.triage_flow import triage_answers
from reprobisect.commands.triage_options import TriageOptions, add_triage_options
from reprobisect.errors import AMBIGUOUS_EXIT
from reprobisect.util.invocation import rerun_words
from reprobisect.util.neutral import command_line
from reprobisect.util.shell import shown_argv

__all__ = ["run_from_args", "setup_arguments"]


def setup_arguments(subparsers: Subparsers) -> None:
    """Add ``triage`` and its options."""
    parser = subparsers.add_parser(
        "triage",
        help="run a script from an issue in the default cell (or the releases pins name), every form, with fixes",
        description="Arguments after '--' go to the script: reprobisect triage issue.py --fix-env "
        "quiet=NCCL_DEBUG=WARN -- --lr 1e-4",
    )
    add_triage_options(parser)
    parser.set_defaults(run=run_from_args, script_args=())


def run_from_args(args: argparse.Namespace) -> int:
    """Run the script in the default cell (pins replace its values), print the table, write
    ``summary-<script>.md``; 0 whatever the outcomes, ``AMBIGUOUS_EXIT`` when a timing search (``--slower-than``)
    left releases ambiguous (its section is written either way)."""
    rerun = command_line(rerun_words("triage", ["triage"], shown_argv(sys.argv[2:])))
    triaged = triage_answers(TriageOptions.from_args(args), rerun=rerun)
    ambiguous = [v for _, report, _ in triaged.timed if report is not None for v in ambiguous_versions(report)]
    if ambiguous:
        print(f"ambiguous: {', '.join(ambiguous[:10])} stayed ambiguous at --max-repeats (exit {AMBIGUOUS_EXIT})")
        return AMBIGUOUS_EXIT
    return 0
