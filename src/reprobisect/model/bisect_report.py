"""A bisection's report — as a type, JSON only at the edge (``<out>/bisect-*.json``).

A search's answer is read by the bisect and triage commands, the commit searches behind its transitions, the
nightly, the timing answer and the ``report`` command. As a ``dict`` shaped like the file a renamed key was found at
run time, by whichever reader came last; as these frozen types mypy finds it. ``to_json`` writes the very dict the
reports held before (same keys, same order), led by ``schema_version``; ``from_json`` reads one back and refuses,
by file, key and value, what is not one. A file from before ``schema_version`` was written is version 1: the
format did not change when the key came.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal

from reprobisect.errors import ConfigError
from reprobisect.model.culprit import Culprit
from reprobisect.model.json_object import JsonObject
from reprobisect.util.files import write_atomic

__all__ = [
    "BISECT_SCHEMA_VERSION",
    "BisectReport",
    "ProbeEntry",
    "SeenState",
    "SkipEntry",
    "StretchEntry",
    "TimingSection",
    "TransitionEntry",
    "write_bisect_report",
]

BISECT_SCHEMA_VERSION = 1
Mode = Literal["all-transitions", "first-bad"]
_MODES: tuple[Mode, ...] = ("all-transitions", "first-bad")


@dataclasses.dataclass(frozen=True, kw_only=True)
class SeenState:
    """What a version did, as a report writes it: its outcome and signature, and in a timing search whether it was
    slower with the numbers behind that (``timing``, None in a search on outcomes)."""

    outcome: str
    signature_id: str | None = None
    signature: str | None = None
    slower: bool | None = None
    timing: Mapping[str, object] | None = None

    def to_json(self) -> dict[str, object]:
        data: dict[str, object] = {
            "outcome": self.outcome,
            "signature_id": self.signature_id,
            "signature": self.signature,
        }
        if self.timing is not None or self.slower is not None:  # a timing search's: both, always together
            data.update(slower=self.slower, timing=None if self.timing is None else dict(self.timing))
        return data

    @classmethod
    def read(cls, read: JsonObject) -> SeenState:
        slower = read.data.get("slower")
        if slower is not None and not isinstance(slower, bool):
            raise read.refuse("slower", slower, "true, false or null")
        timing = read.json_object("timing")
        return cls(
            outcome=read.text("outcome"),
            signature_id=read.maybe_text("signature_id"),
            signature=read.maybe_text("signature"),
            slower=slower,
            timing=timing,
        )


@dataclasses.dataclass(frozen=True, kw_only=True)
class TransitionEntry:
    """Last version with one state, first with the next, and any skipped versions between them."""

    last: str
    first: str
    before: SeenState  # "from" in the file
    after: SeenState  # "to"
    skipped_between: tuple[str, ...] = ()

    def to_json(self) -> dict[str, object]:
        return {
            "last": self.last,
            "first": self.first,
            "from": self.before.to_json(),
            "to": self.after.to_json(),
            "skipped_between": list(self.skipped_between),
        }

    @classmethod
    def read(cls, read: JsonObject) -> TransitionEntry:
        return cls(
            last=read.text("last"),
            first=read.text("first"),
            before=SeenState.read(read.at("from")),
            after=SeenState.read(read.at("to")),
            skipped_between=read.texts("skipped_between", required=False),
        )


@dataclasses.dataclass(frozen=True, kw_only=True)
class ProbeEntry:
    """One version probed: its state, whether its repeats disagreed, and how many runs it had."""

    version: str
    state: SeenState
    flaky: bool = False
    runs: int = 1

    def to_json(self) -> dict[str, object]:
        return {"version": self.version, **self.state.to_json(), "flaky": self.flaky, "runs": self.runs}

    @classmethod
    def read(cls, read: JsonObject) -> ProbeEntry:
        return cls(
            version=read.text("version"),
            state=SeenState.read(read),
            flaky=read.flag("flaky", False),
            runs=read.count("runs", 1),
        )


@dataclasses.dataclass(frozen=True, kw_only=True)
class SkipEntry:
    """A version the search skipped, and why (ENV_ERROR, TIMEOUT, flaky, or an ambiguous timing)."""

    version: str
    why: str

    def to_json(self) -> dict[str, object]:
        return {"version": self.version, "why": self.why}

    @classmethod
    def read(cls, read: JsonObject) -> SkipEntry:
        return cls(version=read.text("version"), why=read.text("why"))


@dataclasses.dataclass(frozen=True, kw_only=True)
class StretchEntry:
    """Versions never probed, taken to share the state of the two probed ones around them."""

    last_probed: str
    next_probed: str
    outcome: str
    signature_id: str | None
    unprobed: tuple[str, ...]

    def to_json(self) -> dict[str, object]:
        return {
            "last_probed": self.last_probed,
            "next_probed": self.next_probed,
            "outcome": self.outcome,
            "signature_id": self.signature_id,
            "unprobed": list(self.unprobed),
        }

    @classmethod
    def read(cls, read: JsonObject) -> StretchEntry:
        return cls(
            last_probed=read.text("last_probed"),
            next_probed=read.text("next_probed"),
            outcome=read.text("outcome"),
            signature_id=read.maybe_text("signature_id"),
            unprobed=read.texts("unprobed"),
        )


@dataclasses.dataclass(frozen=True, kw_only=True)
class TimingSection:
    """What a timing search adds: its rule (``SlowdownRule.describe``), the version every other was compared with
    and its runs, whether the runs ran alike (``unlike`` where not), a busy machine and step times refused as claims.
    (Its target in words is the report's ``target``.)"""

    slowdown: Mapping[str, object]
    reference: str
    reference_runs: int
    unlike: tuple[str, ...]
    busy: str | None
    claims_refused: tuple[str, ...]

    def to_json(self) -> dict[str, object]:
        return {
            "slowdown": dict(self.slowdown),
            "reference": {"version": self.reference, "runs": self.reference_runs},
            "comparable": not self.unlike,
            "unlike": list(self.unlike),
            "busy": self.busy,
            "claims_refused": list(self.claims_refused),
        }

    @classmethod
    def read(cls, read: JsonObject) -> TimingSection | None:
        rule = read.json_object("slowdown")
        if rule is None:
            return None
        reference = read.at("reference")
        return cls(
            slowdown=rule,
            reference=reference.text("version"),
            reference_runs=reference.count("runs"),
            unlike=read.texts("unlike", required=False),
            busy=read.maybe_text("busy"),
            claims_refused=read.texts("claims_refused", required=False),
        )


@dataclasses.dataclass(frozen=True, kw_only=True)
class BisectReport:
    """One search over ``versions`` of ``axis``: what it was asked, what it found, what it probed and assumed, what
    it cost, and (where asked) its timing rule and the commit behind each transition. ``culprits`` is None where no
    commit search was asked; ``probes_made`` counts the probes, ``runs``/``reused`` the runs behind them. ``target``
    is what counted as bad: a signature, ``any-failure``, the slowdown in words for a timing search, None where every
    transition was asked for."""

    repro: str
    form: str
    precision: str
    axis: str
    fix: str
    mode: Mode
    target: str | None
    cell: Mapping[str, str]
    git: str | None
    good: str
    bad: str
    versions: tuple[str, ...]
    transitions: tuple[TransitionEntry, ...]
    probes: tuple[ProbeEntry, ...]
    skipped: tuple[SkipEntry, ...]
    probed: tuple[str, ...]
    not_probed: tuple[str, ...]
    assumed_constant: tuple[StretchEntry, ...]
    runs: int
    reused: int
    probes_made: int
    releases_in_range: int
    timing: TimingSection | None = None
    culprits: tuple[Culprit, ...] | None = None

    def with_culprits(self, culprits: Sequence[Culprit]) -> BisectReport:
        return dataclasses.replace(self, culprits=tuple(culprits))

    @property
    def version_order(self) -> list[str]:
        """The range's versions as its probes name them: a commit search's shortened to 12 characters."""
        return [v[:12] for v in self.versions] if self.git else list(self.versions)

    def to_json(self) -> dict[str, object]:
        """The file's object, every key in the order the reports have always had them."""
        data: dict[str, object] = {
            "schema_version": BISECT_SCHEMA_VERSION,
            "repro": self.repro,
            "form": self.form,
            "precision": self.precision,
            "axis": self.axis,
            "fix": self.fix,
            "mode": self.mode,
            "target": self.target,
            "cell": dict(self.cell),
            "git": self.git,
            "range": {"good": self.good, "bad": self.bad, "versions": list(self.versions)},
            "transitions": [t.to_json() for t in self.transitions],
            "probes": [p.to_json() for p in self.probes],
            "skipped": [s.to_json() for s in self.skipped],
            "probed": list(self.probed),
            "not_probed": list(self.not_probed),
            "assumed_constant": [a.to_json() for a in self.assumed_constant],
            "runs": self.runs,
            "reused": self.reused,
            "probes_made": self.probes_made,
            "releases_in_range": self.releases_in_range,
        }
        if self.timing is not None:
            data.update(self.timing.to_json())
        if self.culprits is not None:
            data["culprits"] = [c.to_json() for c in self.culprits]
        return data

    @classmethod
    def from_json(cls, data: object, *, where: str) -> BisectReport:
        """A report read back from ``where``; a ConfigError names the file, the key and the value it refuses."""
        read = JsonObject(data, where, "bisect report")
        version = read.data.get("schema_version", BISECT_SCHEMA_VERSION)
        if version != BISECT_SCHEMA_VERSION:
            newer = type(version) is int and version > BISECT_SCHEMA_VERSION
            fix = "upgrade reprobisect to read it" if newer else "bisect again to write it anew"
            msg = f"{where}: schema_version {version!r}, this harness reads {BISECT_SCHEMA_VERSION}; {fix}"
            raise ConfigError(msg)
        return cls(
            repro=read.text("repro"),
            form=read.text("form"),
            precision=read.text("precision"),
            axis=read.text("axis"),
            fix=read.text("fix"),
            mode=_mode(read),
            target=read.maybe_text("target"),
            cell=read.text_map("cell"),
            git=read.maybe_text("git"),
            good=read.at("range").text("good"),
            bad=read.at("range").text("bad"),
            versions=read.at("range").texts("versions"),
            transitions=read.each("transitions", TransitionEntry.read),
            probes=read.each("probes", ProbeEntry.read),
            skipped=read.each("skipped", SkipEntry.read),
            probed=read.texts("probed", required=False),
            not_probed=read.texts("not_probed", required=False),
            assumed_constant=read.each("assumed_constant", StretchEntry.read, required=False),
            runs=read.count("runs"),
            reused=read.count("reused"),
            probes_made=read.count("probes_made"),
            releases_in_range=read.count("releases_in_range"),
            timing=TimingSection.read(read),
            culprits=_culprits(read.data.get("culprits"), where),
        )


def _mode(read: JsonObject) -> Mode:
    mode = read.data.get("mode")
    for known in _MODES:
        if mode == known:
            return known
    raise read.refuse("mode", mode, f"one of {', '.join(_MODES)}")


def _culprits(value: object, where: str) -> tuple[Culprit, ...] | None:
    if value is None:
        return None
    if not isinstance(value, list):
        raise ConfigError(f"{where}: bisect report 'culprits' is {value!r:.200}; expected a list of culprits")
    return tuple(Culprit.from_json(c, where=f"{where} culprits[{i}]") for i, c in enumerate(value))


def write_bisect_report(path: Path, report: BisectReport) -> None:
    """The report's file, written whole or not at all (a search stopped mid-write leaves the last one)."""
    write_atomic(path, json.dumps(report.to_json(), indent=2), what="the bisection's result")
