"""How spread out step times are: the one quantile every view, table and plot of the report uses.

There were three (the plots' deciles, the views' deciles, the frame's percentiles), each with its own answer
for one sample and for none. ``quantile`` takes the k-th of n quantiles so that each caller keeps the exact
floats it wrote before: the frame's p10 is the 10th of 100, the views' the 1st of 10 — the same point, but
computed another way, and a report's numbers must not move by a last bit because the code moved.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

__all__ = ["quantile", "spread"]


def quantile(values: Sequence[float], k: int, n: int) -> float | None:
    """The ``k``-th of ``n`` quantiles of ``values`` (inclusive method: the samples are the whole population's
    ends); the one value of a single sample; None of none."""
    if not values:
        return None
    if len(values) == 1:
        return values[0]
    return float(statistics.quantiles(values, n=n, method="inclusive")[k - 1])


def spread(values: Sequence[float]) -> tuple[float, float, float]:
    """Median, p10 and p90 of pooled step times (at least one)."""
    p10, p90 = quantile(values, 1, 10), quantile(values, 9, 10)
    assert p10 is not None and p90 is not None  # values is not empty
    return statistics.median(values), p10, p90
