"""How a release's runs meet the baseline's, and which of them regressed.

Two releases' runs differ only in the cell's DeepSpeed pin, so its cell ids differ too: ``masked`` strips that part
of each id, and the two frames then share their keys (repro, cell, form, fix) for the comparison
(report/compare.py) and for ``regressed_keys``, the runs that passed on the baseline and do not pass now.

Apart from nightly/release_night.py, which compares each target with the baseline through these two: which runs
are the same run and which regressed is read from the records' frames alone, with no run and no state.
"""

from __future__ import annotations

import pandas as pd

from reprobisect.model.cell import id_without
from reprobisect.model.outcome import Outcome
from reprobisect.nightly.targets import AXIS
from reprobisect.report.verdicts import Key, verdicts

__all__ = ["flaky_keys", "masked", "regressed_keys"]


def masked(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with each cell id stripped of its DeepSpeed part, so two releases' runs share keys."""
    cells = [id_without(cell, AXIS, spec) for cell, spec in zip(frame["cell"], frame[AXIS], strict=True)]
    return frame.assign(cell=cells)


def regressed_keys(baseline: pd.DataFrame, current: pd.DataFrame) -> list[Key]:
    """(repro, cell, form, fix) keys that passed on the baseline and do not pass now (masked frames). A run whose
    repeats disagree, on either night, is never one: ``flaky_keys`` names it instead."""
    before, after = verdicts(baseline), verdicts(current)
    return sorted(
        k
        for k, v in after.items()
        if k in before
        and before[k].outcome == Outcome.PASS.value
        and v.outcome != Outcome.PASS.value
        and not (v.flaky or before[k].flaky)
    )


def flaky_keys(baseline: pd.DataFrame, current: pd.DataFrame) -> dict[Key, str]:
    """Keys run on both nights whose repeats disagree on either, with every state each night saw
    (``PASS → OTHER_FAILURE abc | PASS``): reported as flaky, never as a regression or a culprit."""
    before, after = verdicts(baseline), verdicts(current)
    return {
        k: f"{' | '.join(before[k].states)} → {' | '.join(v.states)}"
        for k, v in sorted(after.items())
        if k in before and (v.flaky or before[k].flaky)
    }
