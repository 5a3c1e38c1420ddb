"""``reprobisect repro NAME``: one repro's forms × fixes in one cell, the table, a hint, a Markdown summary."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Literal

from reprobisect.commands.declared import Flag, add_fields, composed, option, read_fields
from reprobisect.commands.options import (
    BACKEND,
    FIXES,
    FORMS,
    JOBS,
    NPROC,
    NPROC_HELP,
    REPEAT,
    TIMEOUT,
    TIMEOUT_HELP,
    CommonOptions,
    Subparsers,
    add_common,
    prepare,
    run_context,
)
from reprobisect.commands.output import print_runs
from reprobisect.commands.script_options import ScriptOptions, add_cli_fixes, cli_fix_options, with_script
from reprobisect.config.load import load_config
from reprobisect.config.scripts import CliFixes
from reprobisect.model.repro import repro_head
from reprobisect.report.summary import markdown_summary
from reprobisect.report.terminal import next_step
from reprobisect.run.reproduce import ReproRequest, reproduce
from reprobisect.util.files import write_atomic
from reprobisect.util.invocation import followed_by
from reprobisect.util.neutral import command_line
from reprobisect.util.shell import shown_setting

__all__ = ["RunReproOptions", "run_from_args", "setup_arguments"]


REPRO = Flag.of("repro")
RESUME = Flag.of("--resume", action="store_true")


@dataclasses.dataclass(frozen=True, kw_only=True)
class RunReproOptions:
    """``repro``'s command line, read once; each option declared here once, as its field, in the order ``--help``
    lists them (commands/declared.py)."""

    repro: str = option(REPRO, help="repro name from matrix.yaml (gan, zero3)")
    backend: Literal["auto", "cuda", "cpu"] = option(
        BACKEND, help="auto: the cuda form when torch sees a GPU, else the CPU forms"
    )
    fixes: tuple[str, ...] = option(
        FIXES,
        help="fix name(s), comma-separated or repeated; 'all' for every fix; default: the repro's default_fixes in "
        "matrix.yaml (the report's code and the fixes that answer it), else every fix",
        dest="fix",
    )  # 'all' for every fix
    forms: tuple[str, ...] = option(FORMS, help="form(s) to run instead of the backend's", dest="form")
    repeat: int = option(REPEAT, help="run each form × fix N times")
    jobs: int | None = option(
        dataclasses.replace(JOBS, default=None),
        help="runs at a time (default: one per core the harness may use, at most 8; on the cuda backend they share "
        "the GPUs round-robin)",
    )  # None: one per core the harness may use, at most 8
    resume: bool = option(RESUME, help="reuse stored records of identical runs")
    nproc: str | None = option(NPROC, help=NPROC_HELP)
    timeout: float | None = option(TIMEOUT, help=TIMEOUT_HELP)
    cli_fixes: CliFixes = composed(add_cli_fixes, cli_fix_options, CliFixes)
    common: CommonOptions = composed(add_common, CommonOptions.from_args)

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> RunReproOptions:
        """The command line as parsed."""
        return read_fields(cls, args)


def setup_arguments(subparsers: Subparsers) -> None:
    """Add ``repro`` and its options (``RunReproOptions``)."""
    parser = subparsers.add_parser("repro", help="run one repro's forms × fixes in one cell and print the table")
    add_fields(parser, RunReproOptions)
    parser.set_defaults(run=run_from_args)


def _reproduce_command(options: RunReproOptions) -> str:
    """The nox command that re-runs exactly this selection (pins made exact from the records)."""
    extra: list[str] = []
    for name, value in options.common.pins.items():
        extra += [f"--{name}", value]
    if options.backend != "auto":
        extra += ["--backend", options.backend]
    if options.fixes:
        extra += ["--fix", ",".join(options.fixes)]
    if options.forms:
        extra += ["--form", ",".join(options.forms)]
    if options.nproc:
        extra += ["--nproc", options.nproc]
    given = options.cli_fixes
    for flag, values in (
        ("--fix-args", given.args),
        ("--fix-patch", given.patch),
        ("--fix-override", given.override),
        ("--fix-env", given.env),
    ):
        for value in values:
            extra += [flag, shown_setting(value, fix=True) if flag == "--fix-env" else value]
    return command_line(followed_by(repro_head(options.repro), extra))


def run_from_args(args: argparse.Namespace) -> int:
    """Run the selection, print the table and the next step, write ``summary-NAME.md``; 0 whatever the outcomes."""
    options = RunReproOptions.from_args(args)
    common = options.common
    prepare(common)
    config, _ = with_script(
        load_config(common.config),
        ScriptOptions(fixes=options.cli_fixes),
        timeout=options.timeout,
        repros=(options.repro,),
        rerun=(),
    )
    request = ReproRequest(
        repro=options.repro,
        backend=options.backend,
        fixes=options.fixes,
        forms=options.forms,
        pins=common.pins,
        nproc=tuple(v.strip() for v in options.nproc.split(",") if v.strip()) if options.nproc else (),
        repeat=options.repeat,
        jobs=options.jobs,
        resume=options.resume,
        timeout=options.timeout,
        cpus_per_run=common.cpus_per_run,
        confinement=common.confinement,
    )
    ctx = run_context(common)
    records = reproduce(config, request, ctx)
    print_runs(records)
    hint = next_step(
        records,
        repro=options.repro,
        expected=config.repro(options.repro).expected_signature,
        stored=ctx.store.iter_records(options.repro),
        rerun=repro_head(options.repro),
        pins=common.pins,
    )
    if hint is not None:
        print()
        print("\n".join(hint.lines()))
    summary = common.out / f"summary-{options.repro}.md"
    summary.parent.mkdir(parents=True, exist_ok=True)
    title = f"{config.repro(options.repro).title}"
    command = _reproduce_command(options)
    write_atomic(summary, markdown_summary(records, title=title, command=command), what="the session summary")
    print(f"\nRecords: {common.out / 'records' / options.repro}  Summary: {summary}")
    return 0
