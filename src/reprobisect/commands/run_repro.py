"""``reprobisect repro NAME``: one repro's forms × fixes in one cell, the table, a hint, a Markdown summary."""

from __future__ import annotations

import argparse
import shlex

from reprobisect.commands.options import (
    Subparsers,
    add_backend,
    add_cli_fixes,
    add_common,
    add_fixes,
    add_forms,
    add_nproc,
    add_timeout,
    confinement,
    pins,
    prepare,
    run_context,
    split,
    with_script,
)
from reprobisect.commands.output import print_runs
from reprobisect.config.expand import PINNED_AXES
from reprobisect.config.load import load_config
from reprobisect.report.summary import markdown_summary
from reprobisect.report.terminal import next_step
from reprobisect.run.reproduce import ReproRequest, reproduce
from reprobisect.util.files import write_atomic

__all__ = ["run_from_args", "setup_arguments"]


def setup_arguments(subparsers: Subparsers) -> None:
    """Add ``repro`` and its options."""
    parser = subparsers.add_parser("repro", help="run one repro's forms × fixes in one cell and print the table")
    parser.add_argument("repro", help="repro name from matrix.yaml (gan, zero3)")
    add_backend(parser, help="auto: the cuda form when torch sees a GPU, else the CPU forms")
    add_fixes(
        parser,
        help="fix name(s), comma-separated or repeated; 'all' for every fix; default: the repro's default_fixes in "
        "matrix.yaml (the report's code and the fixes that answer it), else every fix",
    )
    add_forms(parser, help="form(s) to run instead of the backend's")
    parser.add_argument("--repeat", type=int, default=1, help="run each form × fix N times")
    parser.add_argument(
        "--jobs",
        type=int,
        default=None,
        help="runs at a time (default: one per core the harness may use, at most 8; on the cuda backend they share "
        "the GPUs round-robin)",
    )
    parser.add_argument("--resume", action="store_true", help="reuse stored records of identical runs")
    add_nproc(parser)
    add_timeout(parser)
    add_cli_fixes(parser)
    add_common(parser)
    parser.set_defaults(run=run_from_args)


def _reproduce_command(args: argparse.Namespace) -> str:
    """The nox command that re-runs exactly this selection (pins made exact from the records)."""
    extra: list[str] = []
    for name in PINNED_AXES:
        if getattr(args, name):
            extra += [f"--{name}", getattr(args, name)]
    if args.backend != "auto":
        extra += ["--backend", args.backend]
    for option in ("fix", "form"):
        if getattr(args, option):
            extra += [f"--{option}", ",".join(split(getattr(args, option)))]
    if args.nproc:
        extra += ["--nproc", args.nproc]
    for option in ("fix_args", "fix_patch", "fix_override", "fix_env"):
        for value in getattr(args, option):
            extra += [f"--{option.replace('_', '-')}", value]
    return f"nox -s repro_{args.repro}" + (f" -- {shlex.join(extra)}" if extra else "")


def run_from_args(args: argparse.Namespace) -> int:
    """Run the selection, print the table and the next step, write ``summary-NAME.md``; 0 whatever the outcomes."""
    prepare(args)
    config, _ = with_script(load_config(args.config), args, None, repros=(args.repro,), rerun=())
    request = ReproRequest(
        repro=args.repro,
        backend=args.backend,
        fixes=split(args.fix),
        forms=split(args.form),
        pins=pins(args),
        nproc=tuple(v.strip() for v in args.nproc.split(",") if v.strip()) if args.nproc else (),
        repeat=args.repeat,
        jobs=args.jobs,
        resume=args.resume,
        timeout=args.timeout,
        cpus_per_run=args.cpus_per_run,
        confinement=confinement(args),
    )
    ctx = run_context(args)
    store = ctx.store
    records = reproduce(config, request, ctx)
    print_runs(records)
    hint = next_step(
        records,
        repro=args.repro,
        expected=config.repro(args.repro).expected_signature,
        stored=store.iter_records(args.repro),
        command=f"nox -s repro_{args.repro}",
        pins=pins(args),
    )
    if hint is not None:
        print()
        print("\n".join(hint.lines()))
    command = _reproduce_command(args)
    summary = args.out / f"summary-{args.repro}.md"
    summary.parent.mkdir(parents=True, exist_ok=True)
    title = f"{config.repro(args.repro).title}"
    write_atomic(summary, markdown_summary(records, title=title, command=command), what="the session summary")
    print(f"\nRecords: {args.out / 'records' / args.repro}  Summary: {summary}")
    return 0
