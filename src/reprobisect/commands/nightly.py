"""``reprobisect nightly``: DeepSpeed releases newer than the baseline, compared and bisected; exit 1 on a
regression (or, with ``--fail-on-change``, on any change).

nox turns every failing exit into 1, so the night also leaves its verdict (0 or 1) in ``--out/exit-status``:
a workflow tells a regression (a file that says 1) from a harness error (no file)."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from packaging.version import InvalidVersion, Version

from reprobisect.commands.declared import Flag, add_fields, composed, option, read_fields
from reprobisect.commands.engine_options import EngineOptions, add_executor, engine_summary
from reprobisect.commands.options import (
    BACKEND,
    CLONE,
    CULPRITS,
    FIXES,
    FORMS,
    JOBS,
    REPEAT,
    REPROS,
    TIMEOUT,
    TIMEOUT_HELP,
    CommonOptions,
    Subparsers,
    add_common,
    checked,
    number_option,
    prepare,
    run_context,
    split,
)
from reprobisect.commands.script_options import ScriptOptions, add_script_options, with_script
from reprobisect.commands.timing_options import TimingOptions, add_timing, timing_rule
from reprobisect.config.load import Config, load_config
from reprobisect.config.scripts import instruments_of
from reprobisect.corpus.entries import corpus_slice, gpus_here
from reprobisect.errors import ConfigError, HarnessError
from reprobisect.util.bounds import Bound
from reprobisect.util.files import write_atomic
from reprobisect.util.invocation import rerun_head

if TYPE_CHECKING:  # the night's modules are imported when it runs (see _night)
    from reprobisect.nightly.release_night import NightlyRequest

__all__ = ["EXIT_STATUS_FILE", "CloneOptions", "NightlyOptions", "run_from_args", "setup_arguments"]

EXIT_STATUS_FILE = "exit-status"


STATE = Flag.of("--state", type=Path, default=Path("reports/nightly/state"))
UP_TO = Flag.of("--up-to", read=lambda value: checked(value, "--up-to"))
BASELINE_RELEASE = Flag.of("--baseline-release", read=lambda value: checked(value, "--baseline-release"))
MAX_RELEASES = Flag.of("--max-releases", type=number_option("--max-releases", Bound(1, 1000)), default=3)
MAX_BISECTS = Flag.of("--max-bisects", type=number_option("--max-bisects", Bound(0, 1000)), default=3)
FAIL_ON_CHANGE = Flag.of("--fail-on-change", action="store_true")
KEEP_BASELINE = Flag.of("--keep-baseline", action="store_true")
REPO = Flag.of("--repo", read=lambda value: checked(value, "--repo"))
OTHER_SIDE = Flag.of("--no-other-side", action="store_false")
LIGHTNING_UP_TO = Flag.of("--lightning-up-to", read=lambda value: checked(value, "--lightning-up-to"))
TRACK = Flag.of("--track", choices=("main", "releases"))
NO_FETCH = Flag.of("--no-fetch", action="store_true")
MINIMIZE_BUDGET = Flag.of("--minimize-budget", default="10m")
CORPUS_ENTRIES = Flag.of("--corpus", action="append", default=[], metavar="ENTRY", read=split)  # entries to run
CORPUS_DIR = Flag.of("--corpus-dir", type=Path)


@dataclasses.dataclass(frozen=True, kw_only=True)
class CloneOptions:
    """The clone a night follows (main) or searches between releases' tags, and how long each regression of main is
    minimized; each option declared here once, as its field."""

    git: Path | None = option(
        CLONE,
        help="a whole clone of DeepSpeed: follow --deepspeed REF (default: its default branch, DeepSpeed's master) "
        "in it, commit by commit, against last night's commit; each regression gets its commit and pull request, "
        "a minimized script and the fixes that pass",
    )
    track: Literal["main", "releases"] | None = option(
        TRACK,
        help="with --git: follow the clone's branch commit by commit (main, the default), or run the new releases "
        "and find each regression's commit and pull request between their tags in the clone, with a minimized "
        "script and the fixes that pass (releases)",
    )
    culprits: bool = option(
        CULPRITS,
        help="the release track with a clone of DeepSpeed's repository the harness keeps under <envs>/clones "
        "(cloned once, fetched each night): --track releases without --git",
    )
    no_fetch: bool = option(NO_FETCH, help="with --git: use the clone as it is (offline), no git fetch")
    minimize_budget: str = option(MINIMIZE_BUDGET, help="with --git: minimize each regression for this long (600, 10m)")

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> CloneOptions:
        """The group as parsed."""
        return read_fields(cls, args)


def _add_common(parser: argparse.ArgumentParser) -> None:
    """The common block, with ``--deepspeed``'s meaning here."""
    pin_help = {"deepspeed": "a release (instead of the new ones) or a git ref of DeepSpeed such as main (a VCS cell)"}
    add_common(parser, pin_help=pin_help)


@dataclasses.dataclass(frozen=True, kw_only=True)
class NightlyOptions:
    """``nightly``'s command line, read once; each option declared here once, as its field, in the order ``--help``
    lists them (commands/declared.py). ``--deepspeed`` (what runs instead of the new releases) is the ``deepspeed``
    pin of ``common``; --repo, --baseline-release and --up-to are checked as every pin is."""

    state: Path = option(STATE, help="the baseline and history, carried from night to night (a CI artifact)")
    backend: Literal["auto", "cuda", "cpu"] = option(BACKEND, help=None)
    up_to: str | None = option(UP_TO, help="consider releases up to this one only (what was out on a past night)")
    baseline_release: str | None = option(
        BASELINE_RELEASE, help="(re)seed: run the slice on this release and make it the baseline"
    )
    repros: tuple[str, ...] = option(REPROS, help="repro name(s); default: matrix.yaml's nightly.repros", dest="repro")
    forms: tuple[str, ...] = option(FORMS, help="form(s) instead of the backend's", dest="form")
    fixes: tuple[str, ...] = option(FIXES, help="fix name(s); default: all", dest="fix")
    jobs: int = option(JOBS, help="runs at a time")
    timeout: float | None = option(TIMEOUT, help=TIMEOUT_HELP)
    max_releases: int = option(MAX_RELEASES, help="run at most the N newest new releases")
    max_bisects: int = option(MAX_BISECTS, help="bisect at most N changed runs")
    fail_on_change: bool = option(FAIL_ON_CHANGE, help="exit 1 on any change, not only regressions")
    keep_baseline: bool = option(KEEP_BASELINE, help="do not advance the baseline")
    repo: str | None = option(REPO, help="DeepSpeed's git repository, for --deepspeed REF")
    # whether each regression runs again with newer Lightning releases, to say whose side its fix is on
    other_side: bool = option(
        OTHER_SIDE,
        help="do not run each regression again with the newest Lightning release (and search the first that passes)",
    )
    lightning_up_to: str | None = option(
        LIGHTNING_UP_TO, help="the newest Lightning release that check tries (default: the newest on the index)"
    )
    clone: CloneOptions = composed(
        lambda parser: add_fields(parser, CloneOptions), CloneOptions.from_args, CloneOptions
    )
    repeat: int = option(REPEAT, help="runs of each (repro, form, fix): disagreeing is flaky")
    corpus: tuple[str, ...] = option(
        CORPUS_ENTRIES,
        help="run this regression corpus entry (corpus/ENTRY/issue.py) beside the repros, repeatable; 'all' for "
        "every entry, 'none' for none (default: matrix.yaml's nightly.corpus, when no --repro, script or --pytest)",
    )  # entries, 'all' or 'none'
    corpus_dir: Path | None = option(CORPUS_DIR, help="the corpus folder (default: corpus/ beside matrix.yaml)")
    script: ScriptOptions = composed(add_script_options, ScriptOptions.from_args, ScriptOptions)
    timing: TimingOptions = composed(
        lambda parser: add_timing(parser, compare_with=False), TimingOptions.from_args, TimingOptions
    )  # --slower-than: compared with the baseline's
    engine: EngineOptions = composed(add_executor, EngineOptions.from_args, EngineOptions)
    common: CommonOptions = composed(_add_common, CommonOptions.from_args)

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> NightlyOptions:
        """The command line as parsed."""
        return read_fields(cls, args)

    @property
    def deepspeed(self) -> str | None:
        """``--deepspeed``: a release or a git ref to run instead of the new releases."""
        return self.common.pins.get("deepspeed")


def setup_arguments(subparsers: Subparsers) -> None:
    """Add ``nightly`` and its options (``NightlyOptions``); ``--deepspeed`` here names what to run instead of the
    new releases."""
    parser = subparsers.add_parser(
        "nightly", help="run DeepSpeed releases newer than the baseline, compare, bisect; exit 1 on a regression"
    )
    add_fields(parser, NightlyOptions)
    parser.set_defaults(run=run_from_args, out=Path("reports/nightly/latest"), script_args=())


def _night(options: NightlyOptions) -> int:
    """Check the options, run the night, return its verdict (0, or 1 on a regression)."""
    # imported here: the night imports the report writer (matplotlib), which no other command's start needs
    from reprobisect.bisect import history
    from reprobisect.minimize.request import parse_budget
    from reprobisect.nightly.main_night import fetch_origin, run_main_night
    from reprobisect.nightly.release_night import run_nightly
    from reprobisect.nightly.targets import AXIS

    _check_options(options)
    clone = options.clone
    if clone.culprits:  # the clone the harness keeps, fetched now (a night with network)
        git = history.clone_known(AXIS, options.common.envs / "clones")
        clone = dataclasses.replace(clone, git=git, track="releases", no_fetch=True)
    budget = parse_budget([clone.minimize_budget]).seconds
    if budget is None:
        msg = f"--minimize-budget {clone.minimize_budget}: give a time (600, 10m), not runs"
        raise ConfigError(msg)
    config, made = with_script(
        load_config(options.common.config),
        options.script,
        timeout=options.timeout,
        repros=options.repros,
        rerun=tuple(rerun_head("triage", ["triage"])),
    )
    config, repros, not_run = _with_corpus(config, options, (*options.repros, *made))
    for why in not_run:
        print(f"Not run on this machine: {why}")
    request = _request(options, clone, repros=repros, not_run=not_run, budget=budget)
    ctx = run_context(options.common, options.engine.engine())
    if clone.git is not None and clone.track != "releases":
        result = run_main_night(config, request, ctx, fetch=not clone.no_fetch)
    else:
        if clone.git is not None and not clone.no_fetch:
            fetch_origin(clone.git)  # the new release's tag
        result = run_nightly(config, request, ctx)
    for line in engine_summary(ctx.executor):
        print(line)
    return result.exit_code


def _request(
    options: NightlyOptions,
    clone: CloneOptions,
    *,
    repros: tuple[str, ...],
    not_run: tuple[str, ...],
    budget: float,
) -> NightlyRequest:
    """The night as asked for: the options, with the repros it runs and those it cannot, and the clone it follows."""
    from reprobisect.nightly.release_night import NightlyRequest  # as in _night
    from reprobisect.nightly.targets import DEEPSPEED_REPO

    return NightlyRequest(
        state=options.state,
        out=options.common.out,
        backend=options.backend,
        deepspeed=options.deepspeed,
        up_to=options.up_to,
        baseline_release=options.baseline_release,
        pins={k: v for k, v in options.common.pins.items() if k != "deepspeed"},
        repros=repros,
        not_run=not_run,
        forms=options.forms,
        fixes=options.fixes,
        jobs=options.jobs,
        repeat=options.repeat,
        timeout=options.timeout,
        git=clone.git,
        minimize_budget=budget,
        max_releases=options.max_releases,
        max_bisects=options.max_bisects,
        fail_on_change=options.fail_on_change,
        keep_baseline=options.keep_baseline,
        repo=options.repo or DEEPSPEED_REPO,
        confinement=options.common.confinement,
        slowdown=timing_rule(options.timing),
        other_side=options.other_side,
        lightning_up_to=options.lightning_up_to,
    )


def _check_options(options: NightlyOptions) -> None:
    """Options that contradict each other or are out of range, named."""
    clone = options.clone
    if min(options.jobs, options.max_releases, options.repeat) < 1 or options.max_bisects < 0:
        msg = (
            f"--jobs {options.jobs} / --max-releases {options.max_releases} / --repeat must be >= 1, --max-bisects >= 0"
        )
        raise ConfigError(msg)
    if clone.culprits and (clone.git is not None or clone.track == "main"):
        msg = "--culprits makes the harness's own clone for the release track: it goes without --git and --track main"
        raise ConfigError(msg)
    if clone.track == "main" and clone.git is None:
        msg = "--track main follows a clone: give --git CLONE"
        raise ConfigError(msg)
    _check_lightning_up_to(options)
    if options.baseline_release and (options.deepspeed or options.up_to or (clone.git and clone.track != "releases")):
        msg = (
            "--baseline-release seeds the baseline: it goes without --deepspeed, --up-to and --git "
            "(except with --track releases)"
        )
        raise ConfigError(msg)


def _check_lightning_up_to(options: NightlyOptions) -> None:
    """--lightning-up-to bounds the Lightning check: a release number, and only while the check runs."""
    if options.lightning_up_to is None:
        return
    if not options.other_side:
        msg = "--lightning-up-to bounds the Lightning releases each regression is run with: not with --no-other-side"
        raise ConfigError(msg)
    try:
        Version(options.lightning_up_to)
    except InvalidVersion:
        msg = f"--lightning-up-to {options.lightning_up_to!r}: not a release number; give one such as 2.6.0"
        raise ConfigError(msg) from None


def _with_corpus(
    config: Config, options: NightlyOptions, asked: tuple[str, ...]
) -> tuple[Config, tuple[str, ...], tuple[str, ...]]:
    """``config`` with the corpus entries the night runs as repros, the repros the night runs (empty: matrix.yaml's
    nightly.repros) and the entries this machine cannot run, each with why. ``--corpus`` adds to whatever runs;
    matrix.yaml's ``nightly.corpus`` joins its default slice only (a night of one script stays that script)."""
    named = list(options.corpus)
    spec = config.nightly
    names = named or (list(spec.corpus) if spec is not None and not asked else [])
    if not names or "none" in names:
        return config, asked, ()
    axes = {**(spec.axes if spec is not None else {}), **options.common.pins}
    axes.pop("deepspeed", None)
    backend = options.backend if options.backend != "auto" else ("cuda" if gpus_here() else "cpu")
    root = options.corpus_dir or config.path.parent / "corpus"
    instruments = _instruments(config)  # a performance entry times its steps with it
    found = corpus_slice(
        root,
        names,
        backend=backend,
        axes=axes,
        strict=bool(named),
        instruments=instruments,
    )
    base = asked or (spec.repros if spec is not None else ())
    config = dataclasses.replace(config, repros={**config.repros, **found.repros})
    return config, (*base, *found.repros), found.not_run


def _instruments(config: Config) -> Path | None:
    """The repros' instruments beside the config, or None where they are not (a night run from elsewhere)."""
    try:
        return instruments_of(config)
    except ConfigError:
        return None


def _write_status(path: Path, code: int) -> None:
    """The nightly's verdict (0 or 1) beside its outputs; a disk that refuses it must not turn the verdict
    into an error (the exit code says it too)."""
    if code in (0, 1):
        with contextlib.suppress(HarnessError):
            write_atomic(path, f"{code}\n", what="the exit status")


def run_from_args(args: argparse.Namespace) -> int:
    """The night's verdict as the exit code and in ``--out/exit-status``; an error (bad input included)
    leaves no status file, last night's included."""
    status_file = args.out / EXIT_STATUS_FILE  # before the options are read: bad input among them leaves none either
    status_file.unlink(missing_ok=True)  # last night's must not speak for tonight
    options = NightlyOptions.from_args(args)
    prepare(options.common)
    code = _night(options)
    _write_status(status_file, code)
    return code
