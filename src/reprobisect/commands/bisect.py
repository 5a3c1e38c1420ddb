"""``reprobisect bisect``: which release (or commit) of one package changed a repro's outcome; with
``--all-transitions`` every change in the range. Prints the transitions and where the report was written."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from reprobisect.bisect.probes import BisectRequest, run_bisect
from reprobisect.cells.envs import base_interpreter
from reprobisect.commands.options import (
    Subparsers,
    add_backend,
    add_common,
    add_nproc,
    add_script_options,
    add_timeout,
    confinement,
    pins,
    prepare,
    with_script,
)
from reprobisect.config.load import load_config
from reprobisect.errors import ConfigError
from reprobisect.run.store import Store

__all__ = ["run_from_args", "setup_arguments"]


def setup_arguments(subparsers: Subparsers) -> None:
    """Add ``bisect`` and its options. Its ``--form`` and ``--fix`` name one of each (a probe is one run), so
    they are not the repeatable ones of the other commands."""
    parser = subparsers.add_parser(
        "bisect", help="which release (or commit) changed the outcome; every change with --all-transitions"
    )
    parser.add_argument("--repro", help="repro name from matrix.yaml")
    add_script_options(parser)
    parser.add_argument("--axis", default="deepspeed", help="the package whose releases are searched")
    parser.add_argument("--good", required=True, help="a release (or git revision) without the target")
    parser.add_argument("--bad", required=True, help="a release (or git revision) with the target")
    add_backend(parser)
    parser.add_argument("--form", help="the form to probe (default: cpu-deepspeed on the CPU, cuda on a GPU)")
    parser.add_argument("--fix", default="none", help="the fix to probe (default: none; or one of --fix-*)")
    add_nproc(parser)
    parser.add_argument("--signature", help="bad = this signature id (default: the repro's expected signature)")
    parser.add_argument("--any-failure", action="store_true", help="bad = any failure")
    parser.add_argument("--all-transitions", action="store_true", help="map every change of outcome in the range")
    parser.add_argument("--repeat", type=int, default=1, help="runs per probe; disagreeing repeats mark it flaky")
    parser.add_argument("--pre", action="store_true", help="include pre-releases")
    parser.add_argument("--git", type=Path, help="bisect the commits of a local clone of the --axis package")
    parser.add_argument("--fresh", action="store_true", help="re-run probes that already have a record")
    parser.add_argument(
        "--jobs", type=int, default=1, help="probes at a time: both ends, then every open segment's middle together"
    )
    add_timeout(parser, help="seconds per run")
    add_common(parser)
    parser.set_defaults(run=run_from_args, script_args=())


def _request(args: argparse.Namespace, repro: str) -> BisectRequest:
    """The options as a BisectRequest; contradictions are refused here, before anything is built."""
    if args.signature and args.any_failure:
        msg = "--signature and --any-failure contradict each other: choose one target"
        raise ConfigError(msg)
    fixed = pins(args)
    fixed.pop(args.axis, None)  # the axis is what the bisection varies
    if args.nproc:
        fixed["nproc"] = args.nproc
    if args.jobs < 1:
        msg = f"--jobs {args.jobs}: at least 1"
        raise ConfigError(msg)
    return BisectRequest(
        repro=repro,
        axis=args.axis,
        good=args.good,
        bad=args.bad,
        backend=args.backend,
        form=args.form,
        fix=args.fix,
        target=args.signature,
        any_failure=args.any_failure,
        all_transitions=args.all_transitions,
        repeat=args.repeat,
        prereleases=args.pre,
        pins=fixed,
        git=args.git,
        fresh=args.fresh,
        timeout=args.timeout,
        confinement=confinement(args),
        jobs=args.jobs,
    )


def _print_report(report: dict[str, Any], path: Path, *, all_transitions: bool) -> None:
    """The transitions with their signatures, the skipped versions, the cost, where the report is."""
    print()
    for t in report["transitions"]:
        between = f" (skipped between: {', '.join(t['skipped_between'])})" if t["skipped_between"] else ""
        print(
            f"{t['last']} {t['from']['outcome']} {t['from']['signature_id'] or ''} -> "
            f"{t['first']} {t['to']['outcome']} {t['to']['signature_id'] or ''}{between}"
        )
        for side in ("from", "to"):
            if t[side]["signature"]:
                print(f"    {t[side]['signature_id']}: {t[side]['signature']}")
    if not report["transitions"]:
        print(
            "No transition: the outcome is the same at both ends"
            + (" and every probe between." if all_transitions else ".")
        )
    for skip in report["skipped"]:
        print(f"skipped {skip['version']}: {skip['why']}")
    print(
        f"\n{report['probes_made']} probes over {report['releases_in_range']} versions; "
        f"{report['runs']} runs executed, {report['reused']} reused from records. Report: {path}"
    )


def run_from_args(args: argparse.Namespace) -> int:
    """Bisect and print the transitions; 0 when the bisection names them (no transition included)."""
    prepare(args)
    if bool(args.script) + bool(args.repro) + len(args.pytest or ()) != 1:
        msg = "bisect needs exactly one of --repro NAME, --script PATH or --pytest PATH::TEST"
        raise ConfigError(msg)
    config, made = with_script(
        load_config(args.config),
        args,
        args.script,
        repros=(args.repro,) if args.repro else (),
        rerun=("nox", "-s", "triage", "--"),
    )
    request = _request(args, made[0] if made else args.repro)
    _, report, path = run_bisect(
        config,
        request,
        base=base_interpreter(args.base_python),
        store=Store(args.out),
        envs_dir=args.envs,
        environ=os.environ,
    )
    _print_report(report, path, all_transitions=args.all_transitions)
    return 0
