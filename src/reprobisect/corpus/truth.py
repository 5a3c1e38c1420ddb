"""Read and check one corpus entry's ``truth.toml``: what a real regression did, measured by hand.

The truth is what the harness's answers are scored against, so a wrong or ambiguous truth would silently turn a
wrong answer into a right one. It is checked as hostile input: every key known, every value of its type, every
release named in a range listed in ``releases``, the script inside the entry's folder, and the hand-written ranges
equal to what the measured runs (``[runs]``, written by ``tools/corpus_truth.py``) say. Every error names the
file, the key, the value and what would be right.
"""

from __future__ import annotations

import difflib
import itertools
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from reprobisect.corpus.truth_checks import check_commits, check_runs
from reprobisect.corpus.truth_model import (
    BACKENDS,
    KINDS,
    PACKAGES,
    PIN_NAMES,
    Change,
    MeasuredRelease,
    SignatureChange,
    SlowdownTruth,
    Span,
    Truth,
    fail,
)
from reprobisect.errors import ConfigError
from reprobisect.util.bounds import Bound
from reprobisect.util.safe_read import UnsafeFileError, load_toml_file

__all__ = ["MAX_TRUTH_BYTES", "load_truth", "parse_truth"]

MAX_TRUTH_BYTES = 1 << 20
_REF = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}/[A-Za-z0-9][A-Za-z0-9._-]{0,99}#[1-9][0-9]{0,6}")
_SHA = re.compile(r"[0-9a-f]{7,40}")
_TOP = {
    "schema": int, "title": str, "report": str, "reporter": str, "kinds": list, "package": str, "releases": list,
    "backend": str, "gpus": int, "precision": str, "seconds": (int, float), "timeout": int, "script": str,
    "pins": dict, "affected": list, "runs": dict, "commits": dict, "notes": str, "slowdown": dict,
}  # fmt: skip
_REQUIRED = ("schema", "title", "report", "reporter", "kinds", "package", "releases", "backend", "precision")
_SPAN = {"first": str, "last": str, "signature": str, "introduced": dict, "fixed": dict, "changed": list}
_CHANGE = {"pr": str, "commit": str, "parent": str, "how": str}
_RUN = {"exit": int, "last_line": str, "seconds": (int, float), "version": str, "step_ms": list}
_SLOWDOWN = {"threshold": (int, float), "metric": str, "repeats": int}


def _keys(table: Mapping[str, Any], known: Mapping[str, object], where: str, prefix: str) -> None:
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


def _strings(values: list[Any], where: str, key: str) -> list[str]:
    for value in values:
        if not isinstance(value, str):
            raise fail(where, key, value, "must be a list of strings")
    return list(values)


def _releases(values: list[Any], where: str) -> tuple[str, ...]:
    releases = _strings(values, where, "releases")
    if len(releases) < 2:
        raise fail(where, "releases", values, "list at least two releases (the range the truth was measured on)")
    parsed = []
    for release in releases:
        try:
            parsed.append(Version(release))
        except InvalidVersion:
            raise fail(where, "releases", release, "not a version (write 0.16.5)") from None
    if parsed != sorted(set(parsed)):
        raise fail(where, "releases", values, "must be distinct and in increasing order")
    return tuple(releases)


def _ref(value: str, where: str, key: str) -> str:
    if not _REF.fullmatch(value):
        raise fail(where, key, value, "must be owner/repo#N (deepspeedai/DeepSpeed#7018)")
    return value


def _change(table: Mapping[str, Any], where: str, key: str) -> Change:
    _keys(table, _CHANGE, where, key + ".")
    for name in ("pr", "commit"):
        if name not in table:
            raise fail(where, f"{key}.{name}", None, "missing; the pull request and the commit it was checked at")
    for name in ("commit", "parent"):
        if name in table and not _SHA.fullmatch(table[name]):
            raise fail(where, f"{key}.{name}", table[name], "must be a commit sha (7-40 lowercase hex digits)")
    return Change(pr=_ref(table["pr"], where, key + ".pr"), **{k: table[k] for k in table if k != "pr"})


def _span(table: Any, releases: tuple[str, ...], where: str, n: int) -> Span:
    key = f"affected[{n}]"
    if not isinstance(table, dict):
        raise fail(where, key, table, "must be a table ([[affected]] with first and last)")
    _keys(table, _SPAN, where, key + ".")
    for end in ("first", "last"):
        if table.get(end) not in releases:
            right = f"must be one of the releases listed in 'releases' ({', '.join(releases)})"
            raise fail(where, f"{key}.{end}", table.get(end), right)
    if releases.index(table["first"]) > releases.index(table["last"]):
        raise fail(where, key, f"{table['first']} … {table['last']}", "first must not come after last")
    ends = {end: _change(table[end], where, f"{key}.{end}") for end in ("introduced", "fixed") if end in table}
    changed = tuple(
        _signature_change(t, (table["first"], table["last"]), releases, where, f"{key}.changed[{i}]")
        for i, t in enumerate(table.get("changed", []))
    )
    if [c.at for c in changed] != sorted({c.at for c in changed}, key=releases.index):
        raise fail(where, f"{key}.changed", [c.at for c in changed], "must be in the order of 'releases', each once")
    return Span(
        first=table["first"],
        last=table["last"],
        signature=table.get("signature", ""),
        introduced=ends.get("introduced"),
        fixed=ends.get("fixed"),
        changed=changed,
    )


def _signature_change(
    table: Any, span: tuple[str, str], releases: tuple[str, ...], where: str, key: str
) -> SignatureChange:
    """A ``[[affected.changed]]`` table: ``at``, the first release of the range with the new signature (never the
    range's first: the failure must have had another signature before it), and the pull request checked as an end's."""
    if not isinstance(table, dict):
        raise fail(where, key, table, "must be a table ([[affected.changed]] with at, pr, commit)")
    at = table.get("at")
    inside = releases[releases.index(span[0]) + 1 : releases.index(span[1]) + 1]
    if at not in inside:
        right = f"must name the first release with the new signature, one of {', '.join(inside) or 'none'}"
        raise fail(where, f"{key}.at", at, right)
    change = _change({k: v for k, v in table.items() if k != "at"}, where, key)
    return SignatureChange(pr=change.pr, commit=change.commit, parent=change.parent, how=change.how, at=at)


def _measured(table: Mapping[str, Any], where: str, key: str) -> dict[str, MeasuredRelease]:
    found = {}
    for name, row in table.items():
        if not isinstance(row, dict):
            raise fail(where, f"{key}.{name}", row, "must be a table {exit, last_line, seconds}")
        _keys(row, _RUN, where, f"{key}.{name}.")
        missing = [k for k in ("exit", "last_line", "seconds") if k not in row]
        if missing:
            raise fail(where, f"{key}.{name}", row, f"missing {', '.join(missing)}; rerun tools/corpus_truth.py")
        _bounded(row["seconds"], _SECONDS, where, f"{key}.{name}.seconds")
        found[name] = MeasuredRelease(**{**row, "step_ms": _step_ms(row.get("step_ms", []), where, f"{key}.{name}")})
    return found


_TIMEOUT = Bound(1, 7 * 24 * 3600, unit="seconds")  # the entry's runs: whole seconds, up to a week
_SECONDS = Bound(0, 7 * 24 * 3600, whole=False, unit="seconds")  # how long a hand run took


def _bounded(value: object, bound: Bound, where: str, key: str) -> int | float:
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


def _slowdown(data: Mapping[str, Any], where: str) -> SlowdownTruth | None:
    """The ``[slowdown]`` table, present exactly when the entry's kinds say ``performance``."""
    table, performance = data.get("slowdown"), "performance" in data["kinds"]
    if table is None and not performance:
        return None
    if table is None or not performance:
        right = "a performance entry needs [slowdown] threshold = PERCENT, and only a performance entry has one"
        raise fail(where, "slowdown", table, right)
    _keys(table, _SLOWDOWN, where, "slowdown.")
    threshold, metric, repeats = table.get("threshold"), table.get("metric", "step"), table.get("repeats", 3)
    if threshold is None or not 0 < threshold < 10000:
        raise fail(where, "slowdown.threshold", threshold, "must be a percentage above 0 (50: 1.5 times slower)")
    if metric != "step":
        raise fail(where, "slowdown.metric", metric, "must be 'step' (what tools/corpus_truth.py measures by hand)")
    if not 2 <= repeats <= 20:
        raise fail(where, "slowdown.repeats", repeats, "must be 2 to 20 (runs of each release by hand)")
    return SlowdownTruth(threshold=float(threshold), metric=metric, repeats=repeats)


def _script(folder: Path, value: str, where: str) -> Path:
    """The script, which must lie inside the entry's folder (no absolute path, no '..', no link out of it)."""
    path = Path(value)
    if path.is_absolute() or ".." in path.parts or not value:
        raise fail(where, "script", value, "must be a file name inside the entry's folder (issue.py)")
    resolved = (folder / path).resolve()
    if not resolved.is_relative_to(folder.resolve()):
        raise fail(where, "script", value, "leads out of the entry's folder (a link?); keep the script inside it")
    if not resolved.is_file():
        raise fail(where, "script", value, f"no such file in {folder}")
    return resolved


def _pins(table: Mapping[str, Any], package: str, where: str) -> dict[str, str]:
    for name, value in table.items():
        if name not in PIN_NAMES or name == package:
            right = f"pin one of {', '.join(n for n in PIN_NAMES if n != package)} (the package varies: releases)"
            raise fail(where, f"pins.{name}", value, right)
        if not isinstance(value, str) or not value or value.startswith("-") or not value.isprintable():
            raise fail(where, f"pins.{name}", value, "must be a version such as '2.6.6', or 'system'")
    return dict(table)


def _check_header(data: Mapping[str, Any], where: str) -> None:
    _keys(data, _TOP, where, "")
    missing = [k for k in _REQUIRED if k not in data]
    if missing:
        raise fail(where, missing[0], None, f"missing; an entry needs {', '.join(_REQUIRED)}")
    if data["schema"] != 1:
        raise fail(where, "schema", data["schema"], "must be 1 (the only format so far)")
    for key, allowed in (("package", PACKAGES), ("backend", BACKENDS)):
        if data[key] not in allowed:
            raise fail(where, key, data[key], f"must be one of {', '.join(allowed)}")
    unknown = [k for k in _strings(data["kinds"], where, "kinds") if k not in KINDS]
    if unknown:
        raise fail(where, "kinds", unknown[0], f"must be among {', '.join(KINDS)}")
    gpus = data.get("gpus", 0)
    need = {"cpu": gpus == 0, "gpu": gpus == 1, "gpus": gpus >= 2}[data["backend"]]
    if not need:
        raise fail(where, "gpus", gpus, f"does not fit backend {data['backend']!r} (cpu: 0, gpu: 1, gpus: 2 or more)")
    _ref(data["report"], where, "report")


def _check_spans(spans: list[Span], releases: tuple[str, ...], where: str) -> None:
    """Ranges in order, not touching (two neighbouring ranges are one range), the ends' changes where they can be."""
    for before, after in itertools.pairwise(spans):
        if releases.index(after.first) <= releases.index(before.last) + 1:
            raise fail(where, "affected", f"{before.last} and {after.first}", "ranges must be apart and in order")
    for n, span in enumerate(spans):
        if span.introduced is not None and span.first == releases[0]:
            right = "the first release listed is affected, so no release transition brings it; drop it or list more"
            raise fail(where, f"affected[{n}].introduced", span.introduced.pr, right)
        if span.fixed is not None and span.last == releases[-1]:
            right = "the last release listed is affected, so no release transition mends it; drop it or list more"
            raise fail(where, f"affected[{n}].fixed", span.fixed.pr, right)


def parse_truth(data: Mapping[str, Any], folder: Path, *, where: str) -> Truth:
    """A checked Truth from the parsed TOML of ``folder``'s truth.toml (``where`` names it in errors)."""
    _check_header(data, where)
    releases = _releases(data["releases"], where)
    spans = [_span(t, releases, where, n) for n, t in enumerate(data.get("affected", []))]
    _check_spans(spans, releases, where)
    truth = Truth(
        name=folder.name,
        folder=folder,
        title=data["title"],
        report=data["report"],
        reporter=data["reporter"],
        kinds=tuple(data["kinds"]),
        package=data["package"],
        releases=releases,
        backend=data["backend"],
        gpus=data.get("gpus", 0),
        precision=data["precision"],
        seconds=float(_bounded(data.get("seconds", 0), _SECONDS, where, "seconds")),
        timeout=int(_bounded(data.get("timeout", 900), _TIMEOUT, where, "timeout")),
        script=_script(folder, data.get("script", "issue.py"), where),
        pins=_pins(data.get("pins", {}), data["package"], where),
        affected=tuple(spans),
        runs=_measured(data.get("runs", {}), where, "runs"),
        commits=_measured(data.get("commits", {}), where, "commits"),
        slowdown=_slowdown(data, where),
    )
    check_runs(truth, where)
    check_commits(truth, where)
    return truth


def load_truth(folder: Path) -> Truth:
    """The checked truth of one entry folder; a ConfigError names the file, key, value and the fix. The file is read
    as hostile (``util.safe_read``): a FIFO, a socket or a device named truth.toml, a link out of the entry's folder
    (or an entry folder that is a link out of the corpus), TOML nested 100,000 deep or a 5,000-digit number is one
    ConfigError naming the file, never a hang or a traceback."""
    path = folder / "truth.toml"
    where = str(path)
    if not os.path.lexists(path):
        msg = f"{where}: no such file; every corpus entry holds issue.py and truth.toml (corpus/README.md)"
        raise ConfigError(msg)
    if not folder.resolve().is_relative_to(folder.absolute().parent.resolve()):
        msg = f"{where}: its entry folder is a link to {str(folder.resolve())[:120]!r}, outside the corpus; not read"
        raise ConfigError(msg)
    try:
        data = load_toml_file(path, root=folder, max_bytes=MAX_TRUTH_BYTES)
    except UnsafeFileError as exc:
        msg = f"{where}: {exc.why}; a truth file is a page of TOML in the entry's folder"
        raise ConfigError(msg) from exc
    return parse_truth(data, folder, where=where)
