"""One rule for what the repeats of a run say together, used by bisection probes, reports, the comparison
with a baseline and the flaky check alike: the most common (outcome, signature) pair wins, a tie goes to the
worse outcome, and repeats that disagree make the verdict flaky (said, never hidden behind the majority)."""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterable, Sequence

from reprobisect.model.outcome import Outcome

__all__ = ["SEVERITY", "Verdict", "fold_repeats"]

SEVERITY = {o.value: i for i, o in enumerate(Outcome)}  # the enum lists outcomes from best to worst


@dataclasses.dataclass(frozen=True, kw_only=True)
class Verdict:
    """What the repeats of one run say together."""

    outcome: str
    signature_id: str
    agree: int
    runs: int
    run_ids: tuple[str, ...] = ()
    states: tuple[str, ...] = ()

    @property
    def flaky(self) -> bool:
        """Repeats disagree: worth saying, never hidden behind the majority."""
        return self.agree < self.runs

    @property
    def label(self) -> str:
        """``✗ 36b244a365``, with ``(2/3)`` when repeats disagree."""
        text = f"{Outcome(self.outcome).glyph} {self.signature_id}".rstrip()
        return f"{text} ({self.agree}/{self.runs})" if self.flaky else text


def fold_repeats(runs: Iterable[tuple[str, str]], run_ids: Sequence[str] = ()) -> Verdict:
    """The verdict of repeats given as (outcome, signature id) pairs, an empty id for none."""
    pairs = [(str(outcome), str(sig or "")) for outcome, sig in runs]
    if not pairs:
        msg = "no runs to fold"
        raise ValueError(msg)
    counts = Counter(pairs)
    (outcome, sig), agree = max(counts.items(), key=lambda item: (item[1], SEVERITY.get(item[0][0], -1)))
    states = tuple(sorted(f"{o} {s}".strip() for o, s in counts))
    return Verdict(
        outcome=outcome, signature_id=sig, agree=agree, runs=len(pairs), run_ids=tuple(run_ids), states=states
    )
