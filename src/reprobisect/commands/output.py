"""What the run commands (repro, matrix) print when they are done: the table, the signatures, the runs not to
trust. One function so that both end a session the same way."""

from __future__ import annotations

from collections.abc import Sequence

from reprobisect.model.record import Record
from reprobisect.report.frame import flaky_runs
from reprobisect.report.terminal import runs_table, signature_legend
from reprobisect.util.console import WIDTH, cut

__all__ = ["print_runs"]


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
