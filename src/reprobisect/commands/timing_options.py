"""The options of a timing search (``--slower-than`` and its company), declared once for the three commands that
take them: ``bisect``, ``triage`` and ``nightly``. A group below the commands, so that no command imports another
for it; what the options become is ``model/slowdown.py``'s ``SlowdownRule``."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Literal

from reprobisect.commands.options import number_option
from reprobisect.errors import ConfigError
from reprobisect.model.slowdown import METRICS, SlowdownRule
from reprobisect.util.bounds import TIMING_REPEATS, Bound

__all__ = ["TimingOptions", "add_timing", "refuse_beside_others", "timing_rule"]


_PERCENT = Bound(0, 1000, whole=False, above=True, unit="percent")  # --slower-than: up to 11 times slower


def add_timing(parser: argparse.ArgumentParser, *, compare_with: bool = True) -> None:
    """The options of a timing search: bad = slower than the good end beyond a threshold, with confidence
    (``compare_with``: whether the end compared with can be chosen; triage and the nightly compare with their
    first release and their baseline)."""
    group = parser.add_argument_group("a timing search (slower, not broken)")
    group.add_argument(
        "--slower-than",
        type=number_option("--slower-than", _PERCENT),
        metavar="PERCENT",
        help="bad = the --metric worse than the good end's (triage: the first release's; nightly: the baseline's) by "
        "more than PERCENT, with confidence (a bootstrap interval of the ratio of medians over repeated runs); an "
        "ambiguous version is skipped and listed",
    )
    group.add_argument(
        "--metric",
        choices=METRICS,
        default="step",
        help="with --slower-than: the median step (default, warm-up left out), peak GPU memory or wall time",
    )
    if compare_with:
        group.add_argument(
            "--compare-with",
            choices=("good", "bad"),
            default="good",
            help="with --slower-than: the end every version is compared with; good (default): bad = slower than "
            "it, where a slowdown came; bad: bad = no longer slower than the --bad end, where a slowdown went",
        )
    group.add_argument(
        "--min-repeats",
        type=number_option("--min-repeats", TIMING_REPEATS),
        default=3,
        metavar="N",
        help="with --slower-than: runs a version",
    )
    group.add_argument(
        "--max-repeats",
        type=number_option("--max-repeats", TIMING_REPEATS),
        default=10,
        metavar="N",
        help="with --slower-than: runs a version at most, while its interval straddles the threshold",
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class TimingOptions:
    """The options of a timing search (``_add_timing``); ``slower_than`` None is no timing search."""

    slower_than: float | None = None  # PERCENT
    metric: str = "step"
    compare_with: Literal["good", "bad"] = "good"
    min_repeats: int = 3
    max_repeats: int = 10

    @classmethod
    def from_args(cls, args: argparse.Namespace, *, compare_with: bool = True) -> TimingOptions:
        """The group as parsed (``compare_with``: as ``add_timing`` was told)."""
        return cls(
            slower_than=args.slower_than,
            metric=args.metric,
            compare_with=args.compare_with if compare_with else "good",
            min_repeats=args.min_repeats,
            max_repeats=args.max_repeats,
        )


def refuse_beside_others(jobs: int, repeat: int, backend: str) -> None:
    """What a timing search refuses, saying why: ``--repeat`` above 1 (it takes its repeats from
    ``--min-repeats``/``--max-repeats``) and ``--jobs`` above 1 on ``--backend cpu`` (runs side by side share caches
    and memory bandwidth). Elsewhere ``--jobs`` is how many of a version's runs may go side by side, one per GPU
    (``bisect/timed.py`` ``timed_slots`` decides, once the backend and the GPUs are known, and says so)."""
    if repeat > 1:
        msg = (
            f"--slower-than with --repeat {repeat}: a timing search takes its repeats from --min-repeats and "
            "--max-repeats; leave --repeat at 1"
        )
        raise ConfigError(msg)
    if jobs > 1 and backend == "cpu":
        msg = (
            f"--slower-than with --jobs {jobs} --backend cpu: a timing search on the CPU runs one run at a time (runs "
            "side by side share caches and memory bandwidth and slow each other unevenly); leave --jobs at 1, or on "
            "a host with several GPUs use --backend cuda: a version's runs then go one per GPU"
        )
        raise ConfigError(msg)


def timing_rule(timing: TimingOptions) -> SlowdownRule | None:
    """``--slower-than``'s rule from its options (None without it), each impossible value refused by flag."""
    if timing.slower_than is None:
        return None
    try:
        return SlowdownRule(
            threshold=timing.slower_than / 100,
            metric=timing.metric,
            min_repeats=timing.min_repeats,
            max_repeats=timing.max_repeats,
        )
    except ValueError as exc:
        msg = (
            f"--slower-than {timing.slower_than} --min-repeats {timing.min_repeats} "
            f"--max-repeats {timing.max_repeats}: {exc}"
        )
        raise ConfigError(msg) from exc
