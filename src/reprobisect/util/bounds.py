"""Bounded numbers: every count and duration a person or a file hands the harness, with its allowed range.

``--timeout nan`` used to pass argparse's ``float`` and make every run time out at once; ``--repeat -1`` made no run
and said nothing; a corpus entry's ``timeout = 1e18`` overflowed a timer. One place decides what a number may be
(finite, whole where a count, inside its range) and words the refusal the same way everywhere: the option or key,
the value cut to a readable length, and the range allowed.
"""

from __future__ import annotations

import dataclasses
import math

__all__ = ["CELLS", "JOBS", "REPEATS", "TIMEOUT", "TIMING_REPEATS", "Bound", "cut"]

_SHOWN = 80  # characters of a refused value an error quotes


def cut(value: object, limit: int = _SHOWN) -> str:
    """``repr`` of a refused value, at most about ``limit`` characters: an error line stays one readable line."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclasses.dataclass(frozen=True)
class Bound:
    """A range of numbers: whole or not, from ``low`` (excluded when ``above``) to ``high``, in ``unit``."""

    low: float
    high: float
    whole: bool = True
    above: bool = False  # low itself is refused: "above 0" for a duration
    unit: str = ""

    def describe(self) -> str:
        """``a whole number from 1 to 100`` or ``a number of seconds above 0 and at most 604800``."""
        kind = "a whole number" if self.whole else "a number"
        kind += f" of {self.unit}" if self.unit else ""
        low, high = f"{self.low:g}", f"{self.high:g}"
        return f"{kind} above {low} and at most {high}" if self.above else f"{kind} from {low} to {high}"

    def holds(self, value: object) -> bool:
        """Whether ``value`` is a number of this range (a bool is no number)."""
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False
        if self.whole and not isinstance(value, int):
            return False
        if not math.isfinite(value):
            return False
        return (value > self.low if self.above else value >= self.low) and value <= self.high

    def refusal(self, name: str, value: object) -> str:
        """The one-line error for ``value`` given as ``name`` (``""``: where the caller names it already)."""
        return f"{name} {cut(value)}: must be {self.describe()}".lstrip()

    def parse(self, text: str) -> int | float:
        """``text`` as a number of this range; ``ValueError`` naming the range otherwise (the command line's
        ``number_option`` in commands/options.py turns it into argparse's usage error)."""
        stripped = text.strip()
        try:
            value: int | float = int(stripped) if self.whole else float(stripped)
        except ValueError:
            value = math.nan
        if not self.holds(value):
            raise ValueError(self.describe())
        return value


# The ranges every command shares; a command's own ranges stay beside its options.
TIMEOUT = Bound(0, 7 * 24 * 3600, whole=False, above=True, unit="seconds")  # a run: up to a week
REPEATS = Bound(1, 100)  # runs of each unit (--repeat)
TIMING_REPEATS = Bound(2, 100)  # a timing search's runs a version (--min-repeats, --max-repeats)
JOBS = Bound(1, 256)  # runs or probes at a time
CELLS = Bound(1, 1_000_000)  # --max-cells
BUDGET_SECONDS = Bound(0, 30 * 24 * 3600, whole=False, above=True, unit="seconds")  # a minimization: up to 30 days
BUDGET_RUNS = Bound(1, 10_000_000)  # a minimization's runs
