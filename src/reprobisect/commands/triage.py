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
import dataclasses
import json
import shlex
import sys
from pathlib import Path
from typing import Any

from reprobisect.bisect import history
from reprobisect.bisect.answer import Answer, answer_markdown, sweep_answers
from reprobisect.bisect.culprits import find_culprits
from reprobisect.bisect.probes import BisectRequest, run_bisect, transition_dict
from reprobisect.bisect.slowdown_answer import slowdown_markdown
from reprobisect.commands.bisect import add_timing, slowdown_rule, source_options
from reprobisect.commands.matrix import add_run_options, axis_values, matrix_request, run_and_summarize
from reprobisect.commands.options import (
    Subparsers,
    add_common,
    add_script_options,
    confinement,
    executor,
    prepare,
    run_context,
    with_script,
)
from reprobisect.config.load import Config, load_config
from reprobisect.errors import BisectInconclusiveError, ConfigError
from reprobisect.minimize.sections import sections_under
from reprobisect.model.slowdown import SlowdownRule
from reprobisect.util.files import write_atomic

__all__ = ["Triaged", "run_from_args", "setup_arguments", "triage_answers"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class Triaged:
    """What one triage answered: each form's outcome answer with the commits behind its changes, and with
    ``--slower-than`` each form's timing search (its report, or None when it could not start) with its commits."""

    answers: list[tuple[Answer, list[dict[str, Any]]]]
    timed: list[tuple[Answer, dict[str, Any] | None, list[dict[str, Any]]]]


def setup_arguments(subparsers: Subparsers) -> None:
    """Add ``triage`` and its options."""
    parser = subparsers.add_parser(
        "triage",
        help="run a script from an issue in the default cell (or the releases pins name), every form, with fixes",
        description="Arguments after '--' go to the script: reprobisect triage issue.py --fix-env "
        "quiet=NCCL_DEBUG=WARN -- --lr 1e-4",
    )
    parser.add_argument(
        "script", type=Path, nargs="?", help="the script to run (any file; it is run as untrusted code), or --pytest"
    )
    add_script_options(parser, script=False)
    add_run_options(parser)
    parser.add_argument(
        "--git",
        type=Path,
        help="with a range pin: a whole clone of the package whose releases vary; the commits between the tags of "
        "each change are bisected for the one that introduced (or fixed) the bug",
    )
    parser.add_argument(
        "--culprits",
        action="store_true",
        help="as --git, with a clone of the package's known repository the harness makes (network allowing)",
    )
    add_timing(parser, compare_with=False)
    add_common(parser)
    parser.set_defaults(run=run_from_args, script_args=())


def run_from_args(args: argparse.Namespace) -> int:
    """Run the script in the default cell (pins replace its values), print the table, write
    ``summary-<script>.md``; 0 whatever the outcomes."""
    triage_answers(args, rerun="nox -s triage -- " + shlex.join(sys.argv[2:]))
    return 0


def triage_answers(args: argparse.Namespace, *, rerun: str) -> Triaged:
    """The work of ``triage``: run, print and write the summary with the answer sections; return each answer with
    the commits found behind its changes (``corpus`` scores them; ``rerun`` is the command that re-runs it)."""
    prepare(args)
    config = load_config(args.config)
    if args.script is None and not args.pytest:
        msg = "triage needs a script (reprobisect triage issue.py) or --pytest PATH[::TEST]"
        raise ConfigError(msg)
    rule = slowdown_rule(args) if args.slower_than is not None else None
    config, made = with_script(config, args, args.script, repros=(), rerun=("nox", "-s", "triage", "--"))
    base_axes = {axis: axis_values(value) for axis, value in config.default_cell.items()}
    request = matrix_request(args, made, base_axes=base_axes)
    title = config.repro(made[0]).title if len(made) == 1 else f"{len(made)} test selections"
    records, summary = run_and_summarize(
        config, request, args, title=title, summary=f"summary-{made[0]}.md", command=rerun
    )
    found = [(answer, _culprits(config, answer, args)) for answer in sweep_answers(records)]
    hint = "" if args.git is not None or args.culprits else _HINT
    sections = [answer_markdown(a, c, rerun=rerun, culprit_hint=hint) for a, c in found]
    timed = [(a, *_timed(config, a, rule, args, (hint, rerun))) for a, _ in found] if rule is not None else []
    sections += [section for _, section, _, _ in timed]
    sections += sections_under([args.out], names=made)  # a minimization of this script, made before
    if sections:
        text = "\n".join(sections)
        print("\n" + text)
        write_atomic(summary, summary.read_text(encoding="utf-8") + "\n" + text, what="the summary")
    return Triaged(answers=found, timed=[(a, report, culprits) for a, _, report, culprits in timed])


_HINT = "the commit: add --git CLONE (a clone of the package's repository) or --culprits"


def _culprits(config: Config, answer: Answer, args: argparse.Namespace) -> list[dict[str, Any]]:
    """The commit behind each change of one form's answer, when a clone is given or asked for."""
    transitions = [transition_dict(t) for t in answer.transitions]
    return _commits_behind(config, _answer_request(answer, args), transitions, args)


def _commits_behind(
    config: Config, request: BisectRequest, transitions: list[dict[str, Any]], args: argparse.Namespace
) -> list[dict[str, Any]]:
    """The commit behind each release transition of a search over the releases (``request``'s), when a clone is
    given or asked for."""
    if (args.git is None and not args.culprits) or not transitions:
        return []
    clone = args.git if args.git is not None else history.clone_known(request.axis, args.envs / "clones")
    return find_culprits(
        config,
        request,
        transitions,
        clone=clone,
        ctx=run_context(args),
        form=str(request.form),
        source=source_options(args),
    )


def _answer_request(answer: Answer, args: argparse.Namespace) -> BisectRequest:
    """The search over one form's releases, as ``bisect`` would make it."""
    return BisectRequest(
        repro=answer.repro,
        form=answer.form,
        axis=answer.axis,
        good=answer.releases[0],
        bad=answer.releases[-1],
        backend=args.backend,
        pins=answer.pins,
        repeat=args.repeat,
        timeout=args.timeout,
        confinement=confinement(args),
        jobs=args.jobs,
        executor=executor(args),
    )


def _timed(
    config: Config, answer: Answer, rule: SlowdownRule, args: argparse.Namespace, words: tuple[str, str]
) -> tuple[str, dict[str, Any] | None, list[dict[str, Any]]]:
    """A timing search over every release of one form's answer against the first, its culprits, as a section
    (``words``: the hint where no clone was given, the command that re-runs the triage); with its report (None
    when the search could not start) and culprits."""
    request = dataclasses.replace(
        _answer_request(answer, args),
        all_transitions=True,
        probe_all_up_to=len(answer.releases),
        slowdown=rule,
    )
    try:
        _, report, path = run_bisect(config, request, run_context(args))
    except BisectInconclusiveError as exc:  # the first release cannot be timed: say so in the answer
        return f"### Slower: {answer.repro} ({answer.form}) across {answer.axis}\n\nNot measured: {exc}\n", None, []
    culprits = _commits_behind(config, request, report["transitions"], args)
    if culprits:
        report["culprits"] = culprits
        write_atomic(path, json.dumps(report, indent=2), what="the timing search's result")
    return slowdown_markdown(report, culprits, name=path.name, hint=words[0], rerun=words[1]), report, culprits
