"""``reprobisect bisect``: which release (or commit) of one package changed a repro's outcome; with
``--all-transitions`` every change in the range (every release probed when the range is short enough), and with
``--culprits`` the commit behind each change. Prints the transitions and where the report was written."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Literal

from reprobisect.bisect import history
from reprobisect.bisect.culprits import find_culprits
from reprobisect.bisect.probes import BisectRequest, run_bisect
from reprobisect.bisect.search import PROBE_ALL_UP_TO
from reprobisect.bisect.timed import ambiguous_versions
from reprobisect.commands.declared import Flag, add_fields, composed, option, read_fields
from reprobisect.commands.engine_options import EngineOptions, add_executor, engine_summary
from reprobisect.commands.options import (
    BACKEND,
    CLONE,
    CULPRITS,
    FORM,
    FRESH,
    JOBS,
    NPROC,
    NPROC_HELP,
    REPEAT,
    TIMEOUT,
    CommonOptions,
    Subparsers,
    add_common,
    checked,
    number_option,
    prepare,
    run_context,
)
from reprobisect.commands.script_options import ScriptOptions, add_script_options, source_options, with_script
from reprobisect.commands.timing_options import TimingOptions, add_timing, refuse_beside_others, timing_rule
from reprobisect.config.load import check_pin, load_config
from reprobisect.errors import AMBIGUOUS_EXIT, ConfigError
from reprobisect.model.bisect_report import BisectReport, SeenState, write_bisect_report
from reprobisect.model.culprit import Culprit
from reprobisect.model.slowdown import SlowdownRule
from reprobisect.report.timing_view import timing_lines
from reprobisect.util.bounds import Bound
from reprobisect.util.console import cut
from reprobisect.util.invocation import rerun_head

__all__ = ["BisectOptions", "run_from_args", "setup_arguments"]


REPRO = Flag.of("--repro")  # one repro: a search follows one
AXIS = Flag.of("--axis", default="deepspeed")
GOOD = Flag.of("--good", required=True, read=lambda value: check_pin(value, "--good"))
BAD = Flag.of("--bad", required=True, read=lambda value: check_pin(value, "--bad"))
FIX = Flag.of("--fix", default="none")  # one fix: a probe is one run
SIGNATURE = Flag.of("--signature", read=lambda value: checked(value, "--signature"))
ANY_FAILURE = Flag.of("--any-failure", action="store_true")
TARGET_OUTCOME = Flag.of("--target-outcome", choices=("PASS", "REPRODUCED", "OTHER_FAILURE", "CRASH"))
ALL_TRANSITIONS = Flag.of("--all-transitions", action="store_true")
PROBE_ALL = Flag.of(
    "--probe-all-up-to",
    type=number_option("--probe-all-up-to", Bound(2, 100_000)),
    default=PROBE_ALL_UP_TO,
    metavar="N",
)
PRE = Flag.of("--pre", action="store_true")
ALL_PARENTS = Flag.of("--all-parents", action="store_true")


@dataclasses.dataclass(frozen=True, kw_only=True)
class BisectOptions:
    """``bisect``'s command line, read once: what is searched, for what, how, and where it runs. Each option is
    declared here once, as its field, in the order ``--help`` lists them (commands/declared.py). Its ``--form`` and
    ``--fix`` name one of each (a probe is one run), so they are not the repeatable ones of the other commands."""

    repro: str | None = option(REPRO, help="repro name from matrix.yaml")
    script: ScriptOptions = composed(add_script_options, ScriptOptions.from_args)
    axis: str = option(AXIS, help="the package whose releases are searched")
    good: str = option(GOOD, help="a release (or git revision) without the target")
    bad: str = option(BAD, help="a release (or git revision) with the target")
    backend: Literal["auto", "cuda", "cpu"] = option(BACKEND, help=None)
    form: str | None = option(FORM, help="the form to probe (default: cpu-deepspeed on the CPU, cuda on a GPU)")
    fix: str = option(FIX, help="the fix to probe (default: none; or one of --fix-*)")
    nproc: str | None = option(NPROC, help=NPROC_HELP)
    signature: str | None = option(SIGNATURE, help="bad = this signature id (default: the repro's expected signature)")
    any_failure: bool = option(ANY_FAILURE, help="bad = any failure")
    target_outcome: str | None = option(
        TARGET_OUTCOME,
        help="bad = this outcome (with --signature: and that signature); PASS finds the change that fixed a bug",
    )
    # how the range is searched: every transition or one, probed how often and how many at a time, releases or a
    # clone's commits
    all_transitions: bool = option(ALL_TRANSITIONS, help="map every change of outcome in the range")
    probe_all_up_to: int = option(
        PROBE_ALL,
        help=f"--all-transitions probes every version of a range of at most N (default {PROBE_ALL_UP_TO}); a longer "
        "one is sampled (ends, each minor series' first and last release, evenly spaced), then bisected",
    )
    culprits: bool = option(
        CULPRITS,
        help="with --all-transitions over releases: bisect the commits between the two tags of each transition in "
        "--git CLONE (or a clone of the package's known repository the harness makes, network allowing)",
    )
    repeat: int = option(REPEAT, help="runs per probe; disagreeing repeats mark it flaky")
    pre: bool = option(PRE, help="include pre-releases")
    git: Path | None = option(
        CLONE,
        help="a whole local clone of the --axis package: bisect its commits (--good/--bad are revisions), or with "
        "--culprits the clone whose commits between release tags are searched",
    )
    all_parents: bool = option(
        ALL_PARENTS,
        help="commits: every commit on the ancestry path, not only the first-parent line of --bad's branch",
    )
    fresh: bool = option(FRESH, help="re-run probes that already have a record")
    jobs: int = option(
        JOBS,
        help="probes at a time: both ends, then every open segment's middle together (--all-transitions), or N "
        "evenly spaced versions a round (a search for one change, commits included)",
    )
    timeout: float | None = option(TIMEOUT, help="seconds per run")
    timing: TimingOptions = composed(add_timing, TimingOptions.from_args, TimingOptions)
    engine: EngineOptions = composed(add_executor, EngineOptions.from_args, EngineOptions)
    common: CommonOptions = composed(add_common, CommonOptions.from_args)

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> BisectOptions:
        """The command line as parsed; --good, --bad and --signature are checked as every pin is (``checked``)."""
        return read_fields(cls, args)


def setup_arguments(subparsers: Subparsers) -> None:
    """Add ``bisect`` and its options (``BisectOptions``)."""
    parser = subparsers.add_parser(
        "bisect", help="which release (or commit) changed the outcome; every change with --all-transitions"
    )
    add_fields(parser, BisectOptions)
    parser.set_defaults(run=run_from_args, script_args=())


def _slowdown(options: BisectOptions) -> SlowdownRule | None:
    """The timing rule of ``--slower-than``, or None; contradictions and impossible values refused by flag."""
    timing = options.timing
    if timing.slower_than is None:
        return None
    if options.any_failure or options.signature or options.target_outcome:
        msg = "--slower-than is the target of the search: it contradicts --signature, --any-failure, --target-outcome"
        raise ConfigError(msg)
    refuse_beside_others(options.jobs, options.repeat, options.backend)
    return timing_rule(timing)


def _request(options: BisectOptions, repro: str) -> BisectRequest:
    """The options as a BisectRequest; contradictions are refused here, before anything is built."""
    if options.any_failure and (options.signature or options.target_outcome):
        msg = "--any-failure contradicts --signature and --target-outcome: choose one target"
        raise ConfigError(msg)
    if options.culprits and not options.all_transitions:
        msg = "--culprits names the commit behind each transition: it goes with --all-transitions"
        raise ConfigError(msg)
    if options.probe_all_up_to < 2:
        msg = f"--probe-all-up-to {options.probe_all_up_to}: at least 2 (the two ends)"
        raise ConfigError(msg)
    fixed = dict(options.common.pins)
    fixed.pop(options.axis, None)  # the axis is what the bisection varies
    if options.nproc:
        fixed["nproc"] = options.nproc
    if options.jobs < 1:
        msg = f"--jobs {options.jobs}: at least 1"
        raise ConfigError(msg)
    return BisectRequest(
        repro=repro,
        axis=options.axis,
        good=options.good,
        bad=options.bad,
        backend=options.backend,
        form=options.form,
        fix=options.fix,
        target=options.signature,
        any_failure=options.any_failure,
        all_transitions=options.all_transitions,
        repeat=options.repeat,
        prereleases=options.pre,
        pins=fixed,
        git=None if options.culprits else options.git,
        fresh=options.fresh,
        timeout=options.timeout,
        confinement=options.common.confinement,
        jobs=options.jobs,
        target_outcome=options.target_outcome,
        probe_all_up_to=options.probe_all_up_to,
        first_parent=not options.all_parents,
        slowdown=_slowdown(options),
        compare_with=options.timing.compare_with,
    )


def _print_report(report: BisectReport, path: Path, *, all_transitions: bool) -> None:
    """The transitions with their signatures and culprits, what was skipped or never probed, the cost, where the
    report is."""
    print()
    culprits = {(c.last, c.first): c for c in report.culprits or ()}
    for t in report.transitions:
        between = f" (skipped between: {', '.join(t.skipped_between)})" if t.skipped_between else ""
        print(f"{t.last} {_side(t.before)} -> {t.first} {_side(t.after)}{between}")
        for side in (t.before, t.after):
            if side.signature:
                print(f"    {side.signature_id}: {side.signature}")
        if (t.last, t.first) in culprits:
            print(f"    {culprit_line(culprits[t.last, t.first])}")
    if not report.transitions:
        print(
            "No transition: the outcome is the same at both ends"
            + (f" and at every one of the {len(report.probed)} versions probed." if all_transitions else ".")
        )
    for skip in report.skipped:
        print(f"skipped {skip.version}: {skip.why}")
    for line in timing_lines(report):
        print(line)
    for stretch in report.assumed_constant:
        print(
            f"not probed: {', '.join(stretch.unprobed)} — assumed {stretch.outcome} like "
            f"{stretch.last_probed} and {stretch.next_probed} around them"
        )
    print(
        f"\n{report.probes_made} probes over {report.releases_in_range} versions; "
        f"{report.runs} runs executed, {report.reused} reused from records. Report: {path}"
    )


def _side(side: SeenState) -> str:
    """``PASS 36b244a365``, or in a timing search ``PASS slower ×1.52``."""
    if side.slower is None:
        return f"{side.outcome} {side.signature_id or ''}"
    ratio = (side.timing or {}).get("ratio")
    shown = f" ×{ratio:.2f}" if isinstance(ratio, (int, float)) and ratio else ""
    return f"{side.outcome} {'slower' if side.slower else 'not slower'}" + shown


def culprit_line(culprit: Culprit) -> str:
    """``introduced by 1a2b3c4d5e6f Subject (owner/repo#N)``, or why no commit is named."""
    commit = culprit.commit
    if commit is None:
        return f"{culprit.kind} by: unknown — {cut(str(culprit.why), 2000)}"
    pr = f" ({commit.pull_request})" if commit.pull_request else ""
    skipped = culprit.skipped_between
    around = f" (or one of {len(skipped)} commits before it that do not build)" if skipped else ""
    subject = cut(commit.subject, 200)  # a commit subject is the clone's text: one inert line
    return f"{culprit.kind} by {commit.sha[:12]} {subject}{pr}{around}"


def run_from_args(args: argparse.Namespace) -> int:
    """Bisect and print the transitions; 0 when the bisection names them (no transition included), ``AMBIGUOUS_EXIT``
    when a timing search left versions ambiguous."""
    options = BisectOptions.from_args(args)
    prepare(options.common)
    script = options.script
    if bool(script.script) + bool(options.repro) + len(script.pytest) != 1:
        msg = "bisect needs exactly one of --repro NAME, --script PATH or --pytest PATH::TEST"
        raise ConfigError(msg)
    config, made = with_script(
        load_config(options.common.config),
        script,
        timeout=options.timeout,
        repros=(options.repro,) if options.repro else (),
        rerun=tuple(rerun_head("triage", ["triage"])),
    )
    request = _request(options, made[0] if made else options.repro or "")
    ctx = run_context(options.common, options.engine.engine())
    _, report, path = run_bisect(config, request, ctx)
    if options.culprits:
        envs = options.common.envs
        clone = options.git if options.git is not None else history.clone_known(options.axis, envs / "clones")
        culprits = find_culprits(
            config,
            request,
            report.transitions,
            clone=clone,
            ctx=ctx,
            form=report.form,
            source=source_options(options.repro, script, options.common),
        )
        report = report.with_culprits(culprits)
        write_bisect_report(path, report)
    _print_report(report, path, all_transitions=options.all_transitions)
    for line in engine_summary(ctx.executor):
        print(line)
    return _timing_exit(report)


def _timing_exit(report: BisectReport) -> int:
    """0, or ``AMBIGUOUS_EXIT`` when a timing search left versions ambiguous (its result is written either way)."""
    ambiguous = ambiguous_versions(report)
    if not ambiguous:
        return 0
    print(
        f"ambiguous: {', '.join(ambiguous[:10])}{' …' if len(ambiguous) > 10 else ''} stayed ambiguous at "
        f"--max-repeats; the transitions above may move with more runs (exit {AMBIGUOUS_EXIT})"
    )
    return AMBIGUOUS_EXIT
