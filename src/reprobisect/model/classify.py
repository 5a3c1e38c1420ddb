"""Map what a child process did (status, signal, timeout, log) to one outcome and signature.

This is the one place where exit statuses become outcomes, like nox's ``SessionRunner.execute``.
Known signatures (and the upstream reports they belong to) live in ``data/known_signatures.toml``.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.resources
import re
import tomllib
from collections.abc import Mapping
from typing import Literal

from reprobisect.errors import ConfigError
from reprobisect.model.outcome import Outcome
from reprobisect.model.record import Record
from reprobisect.model.signature import Signature, crash_signature, exit_signature, signature_from_log

__all__ = ["Classification", "KnownSignature", "classify", "find_known", "known_name", "known_signatures"]

_SIGNAL_EXIT_BASE = 128  # a shell reports "killed by signal N" as exit status 128 + N
_UNCAUGHT_EXIT = 1  # Python's status after an uncaught exception: only then did the last traceback end the run


@dataclasses.dataclass(frozen=True, kw_only=True)
class KnownSignature:
    """A failure seen before, with the upstream reports it belongs to."""

    name: str
    kind: Literal["bug", "env"]
    exception: str
    message: str
    frame: str | None = None
    upstream: tuple[str, ...] = ()
    note: str = ""
    reproduced_on: Mapping[str, str] = dataclasses.field(default_factory=dict)

    def matches(self, signature: Signature) -> bool:
        """True when type, message and (if given) one innermost frame all match."""
        if not re.fullmatch(self.exception, signature.exception):
            return False
        if not re.search(self.message, signature.message):
            return False
        return self.frame is None or any(re.search(self.frame, f) for f in signature.frames)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Classification:
    """An outcome with the signature that explains it (None only for PASS), and a traceback the run printed and
    handled before it ended otherwise (a signal, another exit code): context, never the signature."""

    outcome: Outcome
    signature: Signature | None = None
    known: KnownSignature | None = None
    context: Signature | None = None


@functools.cache
def known_signatures() -> tuple[KnownSignature, ...]:
    """The packaged table of known signatures, in match order."""
    resource = importlib.resources.files("reprobisect") / "data" / "known_signatures.toml"
    data = tomllib.loads(resource.read_text(encoding="utf-8"))
    entries = []
    for index, raw in enumerate(data.get("known", [])):
        if raw.get("kind") not in ("bug", "env"):
            msg = f"known_signatures.toml: known[{index}].kind: {raw.get('kind')!r} is not 'bug' or 'env'"
            raise ConfigError(msg)
        entries.append(
            KnownSignature(
                name=raw["name"],
                kind=raw["kind"],
                exception=raw["exception"],
                message=raw["message"],
                frame=raw.get("frame"),
                upstream=tuple(raw.get("upstream", ())),
                note=raw.get("note", ""),
                reproduced_on=_reproduced_on(raw.get("reproduced_on", {}), index),
            )
        )
    return tuple(entries)


def _reproduced_on(raw: object, index: int) -> dict[str, str]:
    """Where the harness last saw a known bug reproduce ({package: version}): what a session suggests next."""
    if not isinstance(raw, dict) or not all(isinstance(v, str) for v in raw.values()):
        msg = f'known_signatures.toml: known[{index}].reproduced_on: {raw!r} is not a table of package = "version"'
        raise ConfigError(msg)
    return {str(k): v for k, v in raw.items()}


def find_known(signature: Signature) -> KnownSignature | None:
    """The first known signature that matches, or None."""
    return next((known for known in known_signatures() if known.matches(signature)), None)


def known_name(record: Record) -> str | None:
    """The record's known signature, or the one today's table gives it (records older than an entry have none)."""
    if record.known_signature or not record.signature:
        return record.known_signature
    try:
        known = find_known(record.signature)
    except (KeyError, TypeError, ValueError, re.error):
        return None
    return known.name if known is not None else None


def expected_matches(expected: str | None, signature: Signature, known: KnownSignature | None) -> bool:
    """Does a failure count as the repro's bug? ``expected`` is a known name or a signature id."""
    if not expected:
        return False
    return expected in (signature.id, known.name if known else None)


def classify(
    *,
    exit_code: int | None,
    timed_out: bool,
    log: str,
    expected: str | None,
    oom_killed: bool | None = None,
) -> Classification:
    """Classify one finished child.

    Args:
        exit_code: the child's status as ``subprocess`` reports it (negative: killed by that signal).
        timed_out: the runner killed it at its timeout.
        log: everything the child wrote (stdout and stderr together).
        expected: the repro's expected signature (a known name or a signature id), if any.
        oom_killed: whether the kernel's OOM killer killed it (``run/oom.py``); None where nothing could tell.
    """
    traced = signature_from_log(log)
    if timed_out:
        return Classification(outcome=Outcome.TIMEOUT, signature=traced or Signature(exception="Timeout", message=""))
    if exit_code is None:
        msg = "classify: a run that did not time out must have an exit code"
        raise ValueError(msg)
    if exit_code == 0:
        return Classification(outcome=Outcome.PASS)
    if exit_code < 0:  # killed by a signal: a CRASH whatever it printed before (a handled traceback, say)
        signature = crash_signature(-exit_code, oom_killed=oom_killed)
        return Classification(outcome=Outcome.CRASH, signature=signature, context=traced)
    signal_number = _shell_signal(exit_code)
    if signal_number is not None and traced is None:  # a shell's 128+N: a signal only when nothing explains it
        return Classification(outcome=Outcome.CRASH, signature=crash_signature(signal_number, oom_killed=oom_killed))
    if traced is not None and exit_code != _UNCAUGHT_EXIT:  # handled, then exit(N): the exit code is the failure
        return _failure(exit_signature(exit_code, log), expected, context=traced)
    return _failure(traced or exit_signature(exit_code, log), expected)


def _failure(signature: Signature, expected: str | None, *, context: Signature | None = None) -> Classification:
    """REPRODUCED when ``signature`` is the expected one, ENV_ERROR when a known environment failure, else
    OTHER_FAILURE."""
    known = find_known(signature)
    if expected_matches(expected, signature, known):
        outcome = Outcome.REPRODUCED
    elif known is not None and known.kind == "env":
        outcome = Outcome.ENV_ERROR
    else:
        outcome = Outcome.OTHER_FAILURE
    return Classification(outcome=outcome, signature=signature, known=known, context=context)


def _shell_signal(exit_code: int) -> int | None:
    signal_number = exit_code - _SIGNAL_EXIT_BASE
    return signal_number if 0 < signal_number < 65 else None
