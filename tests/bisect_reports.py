"""Typed bisect reports for tests (model/bisect_report.py): a report from just the fields a test cares about, and
a transition or a state from the dicts a test reads best."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reprobisect.model.bisect_report import BisectReport, ProbeEntry, SeenState, TransitionEntry


def state(side: SeenState | Mapping[str, Any]) -> SeenState:
    """A state from ``{"outcome": ..., "signature_id": ...}`` (the keys a report file writes)."""
    return side if isinstance(side, SeenState) else SeenState(**side)


def transition(
    last: str, first: str, before: SeenState | Mapping[str, Any], after: SeenState | Mapping[str, Any]
) -> TransitionEntry:
    return TransitionEntry(last=last, first=first, before=state(before), after=state(after))


def probe(version: str, side: SeenState | Mapping[str, Any], **kw: Any) -> ProbeEntry:
    return ProbeEntry(version=version, state=state(side), **kw)


def bisect_report(**fields: Any) -> BisectReport:
    """A report of a small release search of gan on deepspeed, with ``fields`` in place of the defaults."""
    versions = tuple(fields.pop("versions", ("0.16.4", "0.16.5")))
    base: dict[str, Any] = {
        "repro": "gan",
        "form": "cpu-deepspeed",
        "precision": "bf16",
        "axis": "deepspeed",
        "fix": "none",
        "mode": "all-transitions",
        "target": None,
        "cell": {},
        "git": None,
        "good": versions[0],
        "bad": versions[-1],
        "versions": versions,
        "transitions": (),
        "probes": (),
        "skipped": (),
        "probed": versions,
        "not_probed": (),
        "assumed_constant": (),
        "runs": len(versions),
        "reused": 0,
        "probes_made": len(versions),
        "releases_in_range": len(versions),
    }
    base.update(fields)
    base["transitions"] = tuple(base["transitions"])
    base["probes"] = tuple(base["probes"])
    return BisectReport(**base)


def report_of(partial: Mapping[str, Any]) -> BisectReport:
    """A report read back (``BisectReport.from_json``) from a file's object that holds only ``partial``'s keys
    besides a small search's own: what a test of the reading side writes."""
    return BisectReport.from_json({**bisect_report().to_json(), **partial}, where="bisect-test.json")
