"""A culprit: the commit behind one release transition, or why none is named — as a type, JSON only at the edge.

A commit search (bisect/culprits.py) answers once per transition, and that answer is read by the bisect and triage
commands, the timing answer, the corpus's scoring and the nightly. As a ``dict`` shaped like the JSON on disk a
renamed key was found at run time; as this frozen type mypy finds it. ``to_json`` writes the very dict the reports
held before (same keys, same order), and ``from_json`` reads one back, refusing by key and value what is not one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Literal

from reprobisect.errors import ConfigError
from reprobisect.model.json_object import JsonObject

__all__ = ["ChangeKind", "Commit", "Culprit", "SearchTarget"]

ChangeKind = Literal["introduced", "fixed", "changed"]
_KINDS: tuple[ChangeKind, ...] = ("introduced", "fixed", "changed")


@dataclasses.dataclass(frozen=True, kw_only=True)
class Commit:
    """One commit as a culprit is reported: its hash, subject, and the pull request its subject names."""

    sha: str
    subject: str
    pull_request: str | None  # ``deepspeedai/DeepSpeed#7018``, or None when the subject names none

    def describe(self) -> dict[str, str | None]:
        return {"sha": self.sha, "subject": self.subject, "pull_request": self.pull_request}


@dataclasses.dataclass(frozen=True, kw_only=True)
class SearchTarget:
    """What the commit search looks for: the later release's outcome and signature (PASS, None where a bug went)."""

    outcome: str
    signature_id: str | None

    def to_json(self) -> dict[str, object]:
        return {"outcome": self.outcome, "signature_id": self.signature_id}


@dataclasses.dataclass(frozen=True, kw_only=True)
class Culprit:
    """The first commit with the later state between the tags of ``last`` and ``first`` (two releases), or ``why``
    none is named. ``commits`` is the count searched (None before a search), ``probes`` the runs it made,
    ``rerun`` the command that searches again, ``release_sources`` what was said about an end that is not its tag.
    ``target`` is None only where no search was asked (the corpus's ``--no-culprits``)."""

    last: str
    first: str
    kind: ChangeKind
    target: SearchTarget | None
    commit: Commit | None = None
    last_good_commit: Commit | None = None
    commits: int | None = None
    probes: int = 0
    skipped_between: tuple[str, ...] = ()
    why: str | None = None
    rerun: str | None = None
    release_sources: tuple[str, ...] = ()

    def to_json(self) -> dict[str, object]:
        """The report's entry: the keys in the order the reports have always had them; ``release_sources`` only
        where an end was said."""
        data: dict[str, object] = {
            "last": self.last,
            "first": self.first,
            "kind": self.kind,
            "target": self.target.to_json() if self.target is not None else None,
            "commit": self.commit.describe() if self.commit is not None else None,
            "last_good_commit": self.last_good_commit.describe() if self.last_good_commit is not None else None,
            "commits": self.commits,
            "probes": self.probes,
            "skipped_between": list(self.skipped_between),
            "why": self.why,
            "rerun": self.rerun,
        }
        if self.release_sources:
            data["release_sources"] = list(self.release_sources)
        return data

    @classmethod
    def from_json(cls, data: object, *, where: str) -> Culprit:
        """One entry of a report's ``culprits`` read back; a ConfigError names ``where``, the key and the value."""
        if not isinstance(data, Mapping):
            raise ConfigError(f"{where}: a culprit must be a JSON object, not {type(data).__name__}")
        kind = data.get("kind")
        if kind not in _KINDS:
            raise ConfigError(f"{where}: culprit 'kind' is {kind!r}; expected one of {', '.join(_KINDS)}")
        target = data.get("target")
        read = JsonObject(data, where, "culprit")
        commits = data.get("commits")
        return cls(
            last=read.text("last", "a release (a string)"),
            first=read.text("first", "a release (a string)"),
            kind=kind,
            target=None if target is None else _target(target, where),
            commit=_commit(data.get("commit"), f"{where}: culprit 'commit'"),
            last_good_commit=_commit(data.get("last_good_commit"), f"{where}: culprit 'last_good_commit'"),
            commits=None if commits is None else read.count("commits"),
            probes=read.count("probes"),
            skipped_between=read.texts("skipped_between", required=False),
            why=read.maybe_text("why"),
            rerun=read.maybe_text("rerun"),
            release_sources=read.texts("release_sources", required=False),
        )


def _target(value: object, where: str) -> SearchTarget:
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where}: culprit 'target' is {value!r}; expected an object with outcome, signature_id")
    outcome, signature_id = value.get("outcome"), value.get("signature_id")
    if not isinstance(outcome, str) or (signature_id is not None and not isinstance(signature_id, str)):
        raise ConfigError(f"{where}: culprit 'target' is {value!r}; expected an outcome and a signature id or null")
    return SearchTarget(outcome=outcome, signature_id=signature_id)


def _commit(value: object, where: str) -> Commit | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where} is {value!r}; expected an object with sha, subject, pull_request")
    sha, subject, pr = value.get("sha"), value.get("subject"), value.get("pull_request")
    if not isinstance(sha, str) or not isinstance(subject, str) or (pr is not None and not isinstance(pr, str)):
        raise ConfigError(f"{where} is {value!r}; expected a sha and a subject (strings) and a pull request or null")
    return Commit(sha=sha, subject=subject, pull_request=pr)
