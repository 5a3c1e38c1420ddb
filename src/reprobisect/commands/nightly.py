"""``reprobisect nightly``: DeepSpeed releases newer than the baseline, compared and bisected; exit 1 on a
regression (or, with ``--fail-on-change``, on any change).

nox turns every failing exit into 1, so the night also leaves its verdict (0 or 1) in ``--out/exit-status``:
a workflow tells a regression (a file that says 1) from a harness error (no file)."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
from pathlib import Path

from reprobisect.commands.options import (
    Subparsers,
    add_backend,
    add_common,
    add_executor,
    add_fixes,
    add_forms,
    add_script_options,
    add_timeout,
    confinement,
    engine_summary,
    pins,
    prepare,
    run_context,
    split,
    with_script,
)
from reprobisect.config.load import Config, load_config
from reprobisect.corpus.entries import corpus_slice, gpus_here
from reprobisect.errors import ConfigError, HarnessError
from reprobisect.util.files import write_atomic

__all__ = ["EXIT_STATUS_FILE", "run_from_args", "setup_arguments"]

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
    parser.add_argument("--repro", action="append", help="repro name(s); default: matrix.yaml's nightly.repros")
    add_forms(parser)
    add_fixes(parser)
    parser.add_argument("--jobs", type=int, default=1, help="runs at a time")
    add_timeout(parser)
    parser.add_argument("--max-releases", type=int, default=3, help="run at most the N newest new releases")
    parser.add_argument("--max-bisects", type=int, default=3, help="bisect at most N changed runs")
    parser.add_argument("--fail-on-change", action="store_true", help="exit 1 on any change, not only regressions")
    parser.add_argument("--keep-baseline", action="store_true", help="do not advance the baseline")
    parser.add_argument("--repo", default=None, help="DeepSpeed's git repository, for --deepspeed REF")
    _add_clone_options(parser)
    parser.add_argument("--repeat", type=int, default=1, help="runs of each (repro, form, fix): disagreeing is flaky")
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
    add_executor(parser)
    add_common(
        parser,
        pin_help={
            "deepspeed": "a release (instead of the new ones) or a git ref of DeepSpeed such as main (a VCS cell)"
        },
    )
    parser.set_defaults(run=run_from_args, out=Path("reports/nightly/latest"))


def _add_clone_options(parser: argparse.ArgumentParser) -> None:
    """--git and what goes with it: the clone a night follows (main) or searches between releases' tags."""
    parser.add_argument(
        "--git",
        type=Path,
        help="a whole clone of DeepSpeed: follow --deepspeed REF (default: its default branch, DeepSpeed's master) "
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
    parser.add_argument(
        "--culprits",
        action="store_true",
        help="the release track with a clone of DeepSpeed's repository the harness keeps under <envs>/clones "
        "(cloned once, fetched each night): --track releases without --git",
    )
    parser.add_argument(
        "--no-fetch", action="store_true", help="with --git: use the clone as it is (offline), no git fetch"
    )
    parser.add_argument(
        "--minimize-budget", default="10m", help="with --git: minimize each regression for this long (600, 10m)"
    )


def _night(args: argparse.Namespace) -> int:
    """Check the options, run the night, return its verdict (0, or 1 on a regression)."""
    # imported here: the night imports the report writer (matplotlib), which no other command's start needs
    from reprobisect.bisect import history
    from reprobisect.commands.minimize import parse_budget
    from reprobisect.nightly.main_night import fetch_origin, run_main_night
    from reprobisect.nightly.run import NightlyRequest, run_nightly
    from reprobisect.nightly.targets import AXIS, DEEPSPEED_REPO

    _check_options(args)
    if args.culprits:  # the clone the harness keeps, fetched now (a night with network)
        args.git, args.track, args.no_fetch = history.clone_known(AXIS, args.envs / "clones"), "releases", True
    budget = parse_budget([args.minimize_budget]).seconds
    if budget is None:
        msg = f"--minimize-budget {args.minimize_budget}: give a time (600, 10m), not runs"
        raise ConfigError(msg)
    config, made = with_script(
        load_config(args.config), args, args.script, repros=split(args.repro), rerun=("nox", "-s", "triage", "--")
    )
    config, repros, not_run = _with_corpus(config, args, (*split(args.repro), *made))
    for why in not_run:
        print(f"Not run on this machine: {why}")
    request = NightlyRequest(
        state=args.state,
        out=args.out,
        backend=args.backend,
        deepspeed=args.deepspeed,
        up_to=args.up_to,
        baseline_release=args.baseline_release,
        pins={k: v for k, v in pins(args).items() if k != "deepspeed"},
        repros=repros,
        not_run=not_run,
        forms=split(args.form),
        fixes=split(args.fix),
        jobs=args.jobs,
        repeat=args.repeat,
        timeout=args.timeout,
        git=args.git,
        minimize_budget=budget,
        max_releases=args.max_releases,
        max_bisects=args.max_bisects,
        fail_on_change=args.fail_on_change,
        keep_baseline=args.keep_baseline,
        repo=args.repo or DEEPSPEED_REPO,
        confinement=confinement(args),
    )
    ctx = run_context(args)
    if args.git is not None and args.track != "releases":
        result = run_main_night(config, request, ctx, fetch=not args.no_fetch)
    else:
        if args.git is not None and not args.no_fetch:
            fetch_origin(args.git)  # the new release's tag
        result = run_nightly(config, request, ctx)
    for line in engine_summary(ctx.executor):
        print(line)
    return result.exit_code


def _check_options(args: argparse.Namespace) -> None:
    """Options that contradict each other or are out of range, named."""
    if min(args.jobs, args.max_releases, args.repeat) < 1 or args.max_bisects < 0:
        msg = f"--jobs {args.jobs} / --max-releases {args.max_releases} / --repeat must be >= 1, --max-bisects >= 0"
        raise ConfigError(msg)
    if args.culprits and (args.git is not None or args.track == "main"):
        msg = "--culprits makes the harness's own clone for the release track: it goes without --git and --track main"
        raise ConfigError(msg)
    if args.track == "main" and args.git is None:
        msg = "--track main follows a clone: give --git CLONE"
        raise ConfigError(msg)
    if args.baseline_release and (args.deepspeed or args.up_to or (args.git and args.track != "releases")):
        msg = (
            "--baseline-release seeds the baseline: it goes without --deepspeed, --up-to and --git "
            "(except with --track releases)"
        )
        raise ConfigError(msg)


def _with_corpus(
    config: Config, args: argparse.Namespace, asked: tuple[str, ...]
) -> tuple[Config, tuple[str, ...], tuple[str, ...]]:
    """``config`` with the corpus entries the night runs as repros, the repros the night runs (empty: matrix.yaml's
    nightly.repros) and the entries this machine cannot run, each with why. ``--corpus`` adds to whatever runs;
    matrix.yaml's ``nightly.corpus`` joins its default slice only (a night of one script stays that script)."""
    named = [name for given in args.corpus for name in split([given])]
    spec = config.nightly
    names = named or (list(spec.corpus) if spec is not None and not asked else [])
    if not names or "none" in names:
        return config, asked, ()
    axes = {**(spec.axes if spec is not None else {}), **pins(args)}
    axes.pop("deepspeed", None)
    backend = args.backend if args.backend != "auto" else ("cuda" if gpus_here() else "cpu")
    root = args.corpus_dir or config.path.parent / "corpus"
    found = corpus_slice(root, names, backend=backend, axes=axes, strict=bool(named))
    base = asked or (spec.repros if spec is not None else ())
    config = dataclasses.replace(config, repros={**config.repros, **found.repros})
    return config, (*base, *found.repros), found.not_run


def _write_status(path: Path, code: int) -> None:
    """The nightly's verdict (0 or 1) beside its outputs; a disk that refuses it must not turn the verdict
    into an error (the exit code says it too)."""
    if code in (0, 1):
        with contextlib.suppress(HarnessError):
            write_atomic(path, f"{code}\n", what="the exit status")


def run_from_args(args: argparse.Namespace) -> int:
    """The night's verdict as the exit code and in ``--out/exit-status``; an error (bad input included)
    leaves no status file, last night's included."""
    status_file = args.out / EXIT_STATUS_FILE
    status_file.unlink(missing_ok=True)  # last night's must not speak for tonight
    prepare(args)
    code = _night(args)
    _write_status(status_file, code)
    return code
