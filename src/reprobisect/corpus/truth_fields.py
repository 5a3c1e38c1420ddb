"""The fields every corpus truth is built from, each read as hostile input: known keys of the right types, lists of
increasing releases, ``owner/repo#N`` references, pull requests with their commits, hand-measured runs and bounded
numbers. ``truth.py`` (one package's releases) and ``interaction.py`` (a grid of two) build on them; every error names
the file, the key, the value and what would be right.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from typing import Any

from packaging.version import InvalidVersion, Version

from reprobisect.corpus.truth_model import Change, MeasuredRelease, fail
from reprobisect.util.bounds import Bound

__all__ = [
    "MAX_RELEASES",
    "SECONDS",
    "TIMEOUT",
    "bounded",
    "change",
    "check_keys",
    "measured",
    "measured_row",
    "ref",
    "releases",
    "strings",
]

_REF = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}/[A-Za-z0-9][A-Za-z0-9._-]{0,99}#[1-9][0-9]{0,6}")
_SHA = re.compile(r"[0-9a-f]{7,40}")
_CHANGE = {"pr": str, "commit": str, "parent": str, "how": str}
_RUN = {"exit": int, "last_line": str, "seconds": (int, float), "version": str, "step_ms": list}
TIMEOUT = Bound(1, 7 * 24 * 3600, unit="seconds")  # the entry's runs: whole seconds, up to a week
SECONDS = Bound(0, 7 * 24 * 3600, whole=False, unit="seconds")  # how long a hand run took
MAX_RELEASES = 64  # releases of one axis: a grid measured by hand is at most 64 × 64 cells


def check_keys(table: Mapping[str, Any], known: Mapping[str, object], where: str, prefix: str) -> None:
    """Unknown keys and wrongly typed values are errors (a typo must not drop a fact)."""
    for key, value in table.items():
        if key not in known:
            close = difflib.get_close_matches(key, list(known), 1, 0.6)
            hint = f"perhaps you meant {close[0]!r}" if close else f"known keys: {', '.join(known)}"
            raise fail(where, prefix + key, value, f"unknown key; {hint}")
        wanted = known[key]
        if isinstance(value, bool) or not isinstance(value, wanted):  # type: ignore[arg-type]
            types = wanted if isinstance(wanted, tuple) else (wanted,)
            names = " or ".join(t.__name__ for t in types)
            raise fail(where, prefix + key, value, f"must be a {names}")


def strings(values: list[Any], where: str, key: str) -> list[str]:
    """A list whose every item is a string."""
    for value in values:
        if not isinstance(value, str):
            raise fail(where, key, value, "must be a list of strings")
    return list(values)


def releases(values: list[Any], where: str, key: str = "releases") -> tuple[str, ...]:
    """At least two versions (at most ``MAX_RELEASES``), distinct and increasing: the range measured on."""
    found = strings(values, where, key)
    if not 2 <= len(found) <= MAX_RELEASES:
        right = f"list 2 to {MAX_RELEASES} releases (the range the truth was measured on)"
        raise fail(where, key, values, right)
    parsed = []
    for release in found:
        try:
            parsed.append(Version(release))
        except InvalidVersion:
            raise fail(where, key, release, "not a version (write 0.16.5)") from None
    if parsed != sorted(set(parsed)):
        raise fail(where, key, values, "must be distinct and in increasing order")
    return tuple(found)


def ref(value: str, where: str, key: str) -> str:
    """An ``owner/repo#N`` reference."""
    if not _REF.fullmatch(value):
        raise fail(where, key, value, "must be owner/repo#N (deepspeedai/DeepSpeed#7018)")
    return value


def change(table: Mapping[str, Any], where: str, key: str) -> Change:
    """A pull request with the commit it was checked at (and its parent, and how)."""
    check_keys(table, _CHANGE, where, key + ".")
    for name in ("pr", "commit"):
        if name not in table:
            raise fail(where, f"{key}.{name}", None, "missing; the pull request and the commit it was checked at")
    for name in ("commit", "parent"):
        if name in table and not _SHA.fullmatch(table[name]):
            raise fail(where, f"{key}.{name}", table[name], "must be a commit sha (7-40 lowercase hex digits)")
    return Change(pr=ref(table["pr"], where, key + ".pr"), **{k: table[k] for k in table if k != "pr"})


def measured(table: Mapping[str, Any], where: str, key: str) -> dict[str, MeasuredRelease]:
    """Every row of a measured table (``[runs]``, ``[commits]``, ``[cells]``), by its key."""
    return {name: measured_row(row, where, f"{key}.{name}") for name, row in table.items()}


def measured_row(row: object, where: str, key: str) -> MeasuredRelease:
    """One hand run as the tool writes it: exit, last line, seconds (and a performance entry's step times)."""
    if not isinstance(row, dict):
        raise fail(where, key, row, "must be a table {exit, last_line, seconds}")
    check_keys(row, _RUN, where, f"{key}.")
    missing = [k for k in ("exit", "last_line", "seconds") if k not in row]
    if missing:
        raise fail(where, key, row, f"missing {', '.join(missing)}; rerun tools/corpus_truth.py")
    bounded(row["seconds"], SECONDS, where, f"{key}.seconds")
    return MeasuredRelease(**{**row, "step_ms": _step_ms(row.get("step_ms", []), where, key)})


def bounded(value: object, bound: Bound, where: str, key: str) -> int | float:
    """A number of the file inside its range (TOML has nan and inf, and whole numbers of any size), else an error
    naming the key, the value cut to a readable length and the range."""
    if not bound.holds(value):
        raise fail(where, key, value, f"must be {bound.describe()}")
    return value  # type: ignore[return-value]


def _step_ms(values: list[Any], where: str, key: str) -> tuple[float, ...]:
    """Each run's median step in milliseconds: finite positive numbers."""
    for value in values:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 1e9:
            raise fail(where, f"{key}.step_ms", value, "must be a list of positive numbers (milliseconds)")
    return tuple(float(v) for v in values)
