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

from reprobisect.commands.engine_options import EngineOptions, add_executor, engine_summary
from reprobisect.commands.options import (
    CLONE,
    CULPRITS,
    REPROS,
    CommonOptions,
    Subparsers,
    add_backend,
    add_common,
    add_fixes,
    add_forms,
    add_jobs,
    add_repeat,
    add_timeout,
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


def setup_arguments(subparsers: Subparsers) -> None:
    """Add ``nightly`` and its options; ``--deepspeed`` here names what to run instead of the new releases."""
    parser = subparsers.add_parser(
        "nightly", help="run DeepSpeed releases newer than the baseline, compare, bisect; exit 1 on a regression"
    )
    parser.add_argument(
        "--state",
        type=Path,
        default=Path("reports/nightly/state"),
        help="the baseline and history, carried from night to night (a CI artifact)",
    )
    add_backend(parser)
    parser.add_argument("--up-to", help="consider releases up to this one only (what was out on a past night)")
    parser.add_argument("--baseline-release", help="(re)seed: run the slice on this release and make it the baseline")
    REPROS.add_to(parser, "repro", "repro name(s); default: matrix.yaml's nightly.repros")
    add_forms(parser)
    add_fixes(parser)
    add_jobs(parser, help="runs at a time")
    add_timeout(parser)
    parser.add_argument(
        "--max-releases",
        type=number_option("--max-releases", Bound(1, 1000)),
        default=3,
        help="run at most the N newest new releases",
    )
    parser.add_argument(
        "--max-bisects",
        type=number_option("--max-bisects", Bound(0, 1000)),
        default=3,
        help="bisect at most N changed runs",
    )
    parser.add_argument("--fail-on-change", action="store_true", help="exit 1 on any change, not only regressions")
    parser.add_argument("--keep-baseline", action="store_true", help="do not advance the baseline")
    parser.add_argument("--repo", default=None, help="DeepSpeed's git repository, for --deepspeed REF")
    _add_other_side_options(parser)
    _add_clone_options(parser)
    add_repeat(parser, help="runs of each (repro, form, fix): disagreeing is flaky")
    parser.add_argument(
        "--corpus",
        action="append",
        default=[],
        metavar="ENTRY",
        help="run this regression corpus entry (corpus/ENTRY/issue.py) beside the repros, repeatable; 'all' for "
        "every entry, 'none' for none (default: matrix.yaml's nightly.corpus, when no --repro, script or --pytest)",
    )
    parser.add_argument("--corpus-dir", type=Path, help="the corpus folder (default: corpus/ beside matrix.yaml)")
    add_script_options(parser)
    add_timing(parser, compare_with=False)
    add_executor(parser)
    add_common(
        parser,
        pin_help={
            "deepspeed": "a release (instead of the new ones) or a git ref of DeepSpeed such as main (a VCS cell)"
        },
    )
    parser.set_defaults(run=run_from_args, out=Path("reports/nightly/latest"), script_args=())


def _add_other_side_options(parser: argparse.ArgumentParser) -> None:
    """Whether each regression runs again with newer Lightning releases, to say whose side its fix is on."""
    parser.add_argument(
        "--no-other-side",
        dest="other_side",
        action="store_false",
        help="do not run each regression again with the newest Lightning release (and search the first that passes)",
    )
    parser.add_argument(
        "--lightning-up-to",
        help="the newest Lightning release that check tries (default: the newest on the index)",
    )


def _add_clone_options(parser: argparse.ArgumentParser) -> None:
    """--git and what goes with it: the clone a night follows (main) or searches between releases' tags."""
    CLONE.add_to(
        parser,
        "git",
        "a whole clone of DeepSpeed: follow --deepspeed REF (default: its default branch, DeepSpeed's master) "
        "in it, commit by commit, against last night's commit; each regression gets its commit and pull request, "
        "a minimized script and the fixes that pass",
    )
    parser.add_argument(
        "--track",
        choices=("main", "releases"),
        help="with --git: follow the clone's branch commit by commit (main, the default), or run the new releases "
        "and find each regression's commit and pull request between their tags in the clone, with a minimized "
        "script and the fixes that pass (releases)",
    )
    CULPRITS.add_to(
        parser,
        "culprits",
        "the release track with a clone of DeepSpeed's repository the harness keeps under <envs>/clones "
        "(cloned once, fetched each night): --track releases without --git",
    )
    parser.add_argument(
        "--no-fetch", action="store_true", help="with --git: use the clone as it is (offline), no git fetch"
    )
    parser.add_argument(
        "--minimize-budget", default="10m", help="with --git: minimize each regression for this long (600, 10m)"
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class CloneOptions:
    """``_add_clone_options``' group, read once: the clone a night follows (main) or searches between releases'
    tags, and how long each regression of main is minimized."""

    git: Path | None = None
    track: Literal["main", "releases"] | None = None
    culprits: bool = False
    no_fetch: bool = False
    minimize_budget: str = "10m"

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> CloneOptions:
        """The group as parsed."""
        return cls(
            git=args.git,
            track=args.track,
            culprits=args.culprits,
            no_fetch=args.no_fetch,
            minimize_budget=args.minimize_budget,
        )


@dataclasses.dataclass(frozen=True, kw_only=True)
class NightlyOptions:
    """``nightly``'s command line, read once. ``--deepspeed`` (what runs instead of the new releases) is the
    ``deepspeed`` pin of ``common``."""

    state: Path
    backend: Literal["auto", "cuda", "cpu"] = "auto"
    up_to: str | None = None
    baseline_release: str | None = None
    repros: tuple[str, ...] = ()  # --repro, split
    forms: tuple[str, ...] = ()
    fixes: tuple[str, ...] = ()
    jobs: int = 1
    timeout: float | None = None
    max_releases: int = 3
    max_bisects: int = 3
    fail_on_change: bool = False
    keep_baseline: bool = False
    repo: str | None = None
    other_side: bool = True  # --no-other-side: False
    lightning_up_to: str | None = None
    clone: CloneOptions = dataclasses.field(default_factory=CloneOptions)
    repeat: int = 1
    corpus: tuple[str, ...] = ()  # --corpus, split: entries, 'all' or 'none'
    corpus_dir: Path | None = None
    script: ScriptOptions = dataclasses.field(default_factory=ScriptOptions)
    timing: TimingOptions = dataclasses.field(default_factory=TimingOptions)  # --slower-than: the baseline's
    engine: EngineOptions = dataclasses.field(default_factory=EngineOptions)
    common: CommonOptions

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> NightlyOptions:
        """The command line as parsed; --repo, --baseline-release and --up-to are checked as every pin is."""
        common = CommonOptions.from_args(args)
        repo = checked(args.repo, "--repo")
        baseline_release = checked(args.baseline_release, "--baseline-release")
        up_to = checked(args.up_to, "--up-to")
        lightning_up_to = checked(args.lightning_up_to, "--lightning-up-to")
        return cls(
            state=args.state,
            backend=args.backend,
            up_to=up_to,
            baseline_release=baseline_release,
            repros=split(args.repro),
            forms=split(args.form),
            fixes=split(args.fix),
            jobs=args.jobs,
            timeout=args.timeout,
            max_releases=args.max_releases,
            max_bisects=args.max_bisects,
            fail_on_change=args.fail_on_change,
            keep_baseline=args.keep_baseline,
            repo=repo,
            other_side=args.other_side,
            lightning_up_to=lightning_up_to,
            clone=CloneOptions.from_args(args),
            repeat=args.repeat,
            corpus=split(args.corpus),
            corpus_dir=args.corpus_dir,
            script=ScriptOptions.from_args(args, script_args=args.script_args),
            timing=TimingOptions.from_args(args),
            engine=EngineOptions.from_args(args),
            common=common,
        )

    @property
    def deepspeed(self) -> str | None:
        """``--deepspeed``: a release or a git ref to run instead of the new releases."""
        return self.common.pins.get("deepspeed")


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
