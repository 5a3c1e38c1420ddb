"""How a run command ends its session: the table, the signatures, the runs not to trust on the terminal, and the
Markdown summary with the command that re-runs it. One place, so that ``repro``, ``matrix`` and ``triage`` end the
same way (and ``triage`` imports no other command for it)."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from reprobisect.commands.engine_options import engine_summary
from reprobisect.config.load import Config
from reprobisect.model.record import Record
from reprobisect.report.frame import flaky_runs
from reprobisect.report.summary import markdown_summary
from reprobisect.report.terminal import runs_table, signature_legend
from reprobisect.run.context import RunContext
from reprobisect.run.matrix_request import MatrixRequest
from reprobisect.run.matrix_run import run_matrix
from reprobisect.util.console import WIDTH, cut
from reprobisect.util.files import write_atomic
from reprobisect.util.invocation import rerun_words
from reprobisect.util.neutral import command_line
from reprobisect.util.shell import shown_argv

__all__ = ["own_command", "print_runs", "run_and_summarize", "summarize_runs"]


def print_runs(records: Sequence[Record]) -> None:
    """The end of a session on the terminal: the table, the signatures in full, the runs not to trust."""
    print()
    print(runs_table(records))
    legend = signature_legend(records)
    if legend:
        print()
        print("\n".join(legend))
    for line in flaky_runs(records):
        print(cut(line, WIDTH))


def own_command(name: str) -> str:
    """The command that re-runs this process's command ``name`` with the options it was given, where it runs (nox's
    session of that name in a checkout, ``reprobisect NAME`` installed)."""
    return command_line(rerun_words(name, [name], shown_argv(sys.argv[2:])))


def run_and_summarize(
    config: Config,
    request: MatrixRequest,
    ctx: RunContext,
    out: Path,
    *,
    title: str,
    summary: str,
    cells: tuple[str, ...] = (),
    command: str,
) -> tuple[list[Record], Path]:
    """Run the request where ``ctx`` says, print the table (and what the engine says) and write the Markdown summary
    under ``out``; returns the records and the summary's path. ``command``: the one that re-runs it (``own_command``,
    or what the caller knows better: ``corpus`` runs ``triage`` for each entry, and its own argv would re-run the
    corpus command)."""
    records = run_matrix(config, request, ctx, cells=cells)
    return records, summarize_runs(records, ctx, out, title=title, summary=summary, command=command)


def summarize_runs(
    records: list[Record], ctx: RunContext, out: Path, *, title: str, summary: str, command: str
) -> Path:
    """Print the table of ``records`` (and what the engine says) and write the Markdown summary under ``out``;
    returns its path (a grid search runs its waves itself, then summarizes them as a matrix run is)."""
    print_runs(records)
    for line in engine_summary(ctx.executor):
        print(line)
    path = out / summary
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, markdown_summary(records, title=title, command=command), what="the summary")
    print(f"\nRecords: {out / 'records'}  Summary: {path}")
    return path
