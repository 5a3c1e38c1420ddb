"""The long frame's runs folded into one verdict per (repro, cell, form, fix), by ``model.verdict``'s rule."""

from __future__ import annotations

import pandas as pd

from reprobisect.model.verdict import Verdict, fold_repeats

__all__ = ["KEY", "Key", "verdicts"]

KEY = ["repro", "cell", "form", "fix"]
Key = tuple[str, str, str, str]


def verdicts(frame: pd.DataFrame) -> dict[Key, Verdict]:
    """One verdict per (repro, cell, form, fix), folding repeats."""
    folded: dict[Key, Verdict] = {}
    for key, group in frame.groupby(KEY, sort=False):
        repro, cell, form, fix = (str(part) for part in key)
        pairs = zip(group["outcome"], group["signature_id"], strict=True)
        folded[(repro, cell, form, fix)] = fold_repeats(pairs, tuple(group["run_id"]))
    return folded
