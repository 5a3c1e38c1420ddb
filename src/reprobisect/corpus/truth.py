"""Read and check one corpus entry's ``truth.toml``: what a real regression did, measured by hand.

The truth is what the harness's answers are scored against, so a wrong or ambiguous truth would silently turn a
wrong answer into a right one. It is checked as hostile input: every key known, every value of its type, every
release named in a range listed in ``releases``, the script inside the entry's folder, and the hand-written ranges
equal to what the measured runs (``[runs]``, written by ``tools/corpus_truth.py``) say. Every error names the
file, the key, the value and what would be right.
"""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from reprobisect.corpus.interaction import INTERACTION_KEYS, parse_interaction
from reprobisect.corpus.truth_checks import check_commits, check_runs
from reprobisect.corpus.truth_fields import SECONDS, TIMEOUT, bounded, check_keys, measured, ref, strings
from reprobisect.corpus.truth_fields import change as read_change
from reprobisect.corpus.truth_fields import releases as read_releases
from reprobisect.corpus.truth_model import (
    AXES,
    BACKENDS,
    KINDS,
    PACKAGES,
    PIN_NAMES,
    SignatureChange,
    SlowdownTruth,
    Span,
    Truth,
    fail,
)
from reprobisect.errors import ConfigError
from reprobisect.util.safe_read import UnsafeFileError, load_toml_file

__all__ = ["MAX_TRUTH_BYTES", "load_truth", "parse_truth"]

MAX_TRUTH_BYTES = 1 << 20
_TOP = {
    "schema": int, "title": str, "report": str, "reporter": str, "kinds": list, "package": str, "releases": list,
    "backend": str, "gpus": int, "precision": str, "seconds": (int, float), "timeout": int, "script": str,
    "pins": dict, "affected": list, "runs": dict, "commits": dict, "notes": str, "slowdown": dict,
    "partner": str, "partner_releases": list, "region": list, "change": list, "cells": dict, "requires": dict,
}  # fmt: skip
_ONE_PACKAGE_KEYS = ("affected", "runs", "commits", "slowdown")  # an interaction's truth is its grid instead
_REQUIRED = ("schema", "title", "report", "reporter", "kinds", "package", "releases", "backend", "precision")
_SPAN = {"first": str, "last": str, "signature": str, "introduced": dict, "fixed": dict, "changed": list}
_SLOWDOWN = {"threshold": (int, float), "metric": str, "repeats": int}


def _span(table: Any, releases: tuple[str, ...], where: str, n: int) -> Span:
    key = f"affected[{n}]"
    if not isinstance(table, dict):
        raise fail(where, key, table, "must be a table ([[affected]] with first and last)")
    check_keys(table, _SPAN, where, key + ".")
    for end in ("first", "last"):
        if table.get(end) not in releases:
            right = f"must be one of the releases listed in 'releases' ({', '.join(releases)})"
            raise fail(where, f"{key}.{end}", table.get(end), right)
    if releases.index(table["first"]) > releases.index(table["last"]):
        raise fail(where, key, f"{table['first']} … {table['last']}", "first must not come after last")
    ends = {end: read_change(table[end], where, f"{key}.{end}") for end in ("introduced", "fixed") if end in table}
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
    change = read_change({k: v for k, v in table.items() if k != "at"}, where, key)
    return SignatureChange(pr=change.pr, commit=change.commit, parent=change.parent, how=change.how, at=at)


def _slowdown(data: Mapping[str, Any], where: str) -> SlowdownTruth | None:
    """The ``[slowdown]`` table, present exactly when the entry's kinds say ``performance``."""
    table, performance = data.get("slowdown"), "performance" in data["kinds"]
    if table is None and not performance:
        return None
    if table is None or not performance:
        right = "a performance entry needs [slowdown] threshold = PERCENT, and only a performance entry has one"
        raise fail(where, "slowdown", table, right)
    check_keys(table, _SLOWDOWN, where, "slowdown.")
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


def _pins(table: Mapping[str, Any], varied: Sequence[str], where: str) -> dict[str, str]:
    """Every package that does not vary, pinned to a version (or ``system``)."""
    for name, value in table.items():
        if name not in PIN_NAMES or name in varied:
            why = "the package varies: releases" if len(varied) == 1 else "package and partner vary: the grid's axes"
            right = f"pin one of {', '.join(n for n in PIN_NAMES if n not in varied)} ({why})"
            raise fail(where, f"pins.{name}", value, right)
        if not isinstance(value, str) or not value or value.startswith("-") or not value.isprintable():
            raise fail(where, f"pins.{name}", value, "must be a version such as '2.6.6', or 'system'")
    return dict(table)


def _requires(table: Mapping[str, Any], where: str) -> dict[str, str]:
    """Packages besides the matrix's that the entry's cells need at one version (``numpy = "1.26.4"``: DeepSpeed
    before 0.14.4 does not import with numpy 2), each a distribution name and an exact version."""
    for name, value in table.items():
        if name in PIN_NAMES or not re.fullmatch(r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,62}[A-Za-z0-9])?", name):
            right = "a package name other than the matrix's (pin those under [pins]), such as numpy"
            raise fail(where, f"requires.{name[:80]}", value, right)
        if not isinstance(value, str) or not re.fullmatch(r"[0-9][0-9A-Za-z.+!-]{0,40}", value):
            raise fail(where, f"requires.{name}", value, "must be an exact version such as '1.26.4'")
    return dict(table)


def _check_header(data: Mapping[str, Any], where: str) -> None:
    check_keys(data, _TOP, where, "")
    missing = [k for k in _REQUIRED if k not in data]
    if missing:
        raise fail(where, missing[0], None, f"missing; an entry needs {', '.join(_REQUIRED)}")
    if data["schema"] != 1:
        raise fail(where, "schema", data["schema"], "must be 1 (the only format so far)")
    interaction = "interaction" in strings(data["kinds"], where, "kinds")
    _check_kind_keys(data, interaction, where)
    for key, allowed in (("package", AXES if interaction else PACKAGES), ("backend", BACKENDS)):
        if data[key] not in allowed:
            raise fail(where, key, data[key], f"must be one of {', '.join(allowed)}")
    unknown = [k for k in strings(data["kinds"], where, "kinds") if k not in KINDS]
    if unknown:
        raise fail(where, "kinds", unknown[0], f"must be among {', '.join(KINDS)}")
    gpus = data.get("gpus", 0)
    need = {"cpu": gpus == 0, "gpu": gpus == 1, "gpus": gpus >= 2}[data["backend"]]
    if not need:
        raise fail(where, "gpus", gpus, f"does not fit backend {data['backend']!r} (cpu: 0, gpu: 1, gpus: 2 or more)")
    ref(data["report"], where, "report")


def _check_kind_keys(data: Mapping[str, Any], interaction: bool, where: str) -> None:
    """An interaction entry's truth is its grid (``partner``, ``[cells]``, ``[[region]]``); a one-package entry's
    is its releases' runs and ranges. A key of the other kind is an error, not a fact quietly ignored."""
    if interaction:
        wrong = next((key for key in _ONE_PACKAGE_KEYS if key in data), None)
        right = "an interaction entry's truth is [cells] and [[region]]; drop it (or 'interaction' from kinds)"
    else:
        wrong = next((key for key in INTERACTION_KEYS if key in data), None)
        right = "only an entry of kind 'interaction' has it; add 'interaction' to kinds, or drop it"
    if wrong is not None:
        raise fail(where, wrong, data[wrong], right)
    if interaction and "performance" in data["kinds"]:
        raise fail(where, "kinds", data["kinds"], "an interaction entry's bug is a failure, not a time; not both")


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
    listed = read_releases(data["releases"], where)
    spans = [_span(t, listed, where, n) for n, t in enumerate(data.get("affected", []))]
    _check_spans(spans, listed, where)
    interaction = None
    if "interaction" in data["kinds"]:
        interaction = parse_interaction(data, data["package"], listed, where)
    varied = [data["package"], *([interaction.partner] if interaction else [])]
    truth = Truth(
        name=folder.name,
        folder=folder,
        title=data["title"],
        report=data["report"],
        reporter=data["reporter"],
        kinds=tuple(data["kinds"]),
        package=data["package"],
        releases=listed,
        backend=data["backend"],
        gpus=data.get("gpus", 0),
        precision=data["precision"],
        seconds=float(bounded(data.get("seconds", 0), SECONDS, where, "seconds")),
        timeout=int(bounded(data.get("timeout", 900), TIMEOUT, where, "timeout")),
        script=_script(folder, data.get("script", "issue.py"), where),
        pins=_pins(data.get("pins", {}), varied, where),
        requires=_requires(data.get("requires", {}), where),
        affected=tuple(spans),
        runs=measured(data.get("runs", {}), where, "runs"),
        commits=measured(data.get("commits", {}), where, "commits"),
        slowdown=_slowdown(data, where),
        interaction=interaction,
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
