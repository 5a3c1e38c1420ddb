"""The options of a timing search (``--slower-than`` and its company), declared once for the three commands that
take them: ``bisect``, ``triage`` and ``nightly``. A group below the commands, so that no command imports another
for it; what the options become is ``model/slowdown.py``'s ``SlowdownRule``."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Literal

from reprobisect.commands.declared import Flag, add_fields, option, read_fields
from reprobisect.commands.options import number_option
from reprobisect.errors import ConfigError
from reprobisect.model.slowdown import METRICS, SlowdownRule
from reprobisect.util.bounds import TIMING_REPEATS, Bound

__all__ = ["TimingOptions", "add_timing", "refuse_beside_others", "timing_rule"]


_PERCENT = Bound(0, 1000, whole=False, above=True, unit="percent")  # --slower-than: up to 11 times slower


_GROUP = "a timing search (slower, not broken)"
SLOWER_THAN = Flag.of("--slower-than", type=number_option("--slower-than", _PERCENT), metavar="PERCENT")
METRIC = Flag.of("--metric", choices=METRICS, default="step")
COMPARE_WITH = Flag.of("--compare-with", choices=("good", "bad"), default="good")
MIN_REPEATS = Flag.of("--min-repeats", type=number_option("--min-repeats", TIMING_REPEATS), default=3, metavar="N")
MAX_REPEATS = Flag.of("--max-repeats", type=number_option("--max-repeats", TIMING_REPEATS), default=10, metavar="N")


@dataclasses.dataclass(frozen=True, kw_only=True)
class TimingOptions:
    """The options of a timing search, each declared here once (``commands/declared.py``); ``slower_than`` None is
    no timing search."""

    slower_than: float | None = option(
        SLOWER_THAN,
        help="bad = the --metric worse than the good end's (triage: the first release's; nightly: the baseline's) by "
        "more than PERCENT, with confidence (a bootstrap interval of the ratio of medians over repeated runs); an "
        "ambiguous version is skipped and listed",
        group=_GROUP,
    )
    metric: str = option(
        METRIC,
        help="with --slower-than: the median step (default, warm-up left out), peak GPU memory or wall time",
        group=_GROUP,
    )
    compare_with: Literal["good", "bad"] = option(
        COMPARE_WITH,
        help="with --slower-than: the end every version is compared with; good (default): bad = slower than "
        "it, where a slowdown came; bad: bad = no longer slower than the --bad end, where a slowdown went",
        group=_GROUP,
    )
    min_repeats: int = option(MIN_REPEATS, help="with --slower-than: runs a version", group=_GROUP)
    max_repeats: int = option(
        MAX_REPEATS,
        help="with --slower-than: runs a version at most, while its interval straddles the threshold",
        group=_GROUP,
    )

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> TimingOptions:
        """The group as parsed (without ``--compare-with``, where the command does not take it: good)."""
        return read_fields(cls, args)


def add_timing(parser: argparse.ArgumentParser, *, compare_with: bool = True) -> None:
    """The options of a timing search: bad = slower than the good end beyond a threshold, with confidence
    (``compare_with``: whether the end compared with can be chosen; triage and the nightly compare with their
    first release and their baseline)."""
    add_fields(parser, TimingOptions, skip=() if compare_with else ("compare_with",))


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
