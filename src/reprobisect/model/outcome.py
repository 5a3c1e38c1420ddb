"""The closed set of outcomes a run can have.

ENV_ERROR is never a verdict on the bug (like git bisect's exit 125): a bisection skips it.
"""

from __future__ import annotations

import enum

__all__ = ["Outcome"]


class Outcome(str, enum.Enum):  # noqa: UP042 - StrEnum would change str(outcome) in stored text
    """What one run of a repro says about the bug."""

    PASS = "PASS"  # noqa: S105 - an outcome, not a password
    REPRODUCED = "REPRODUCED"
    OTHER_FAILURE = "OTHER_FAILURE"
    TIMEOUT = "TIMEOUT"
    CRASH = "CRASH"
    ENV_ERROR = "ENV_ERROR"

    @property
    def is_verdict(self) -> bool:
        """True when the run says something about the code under test (not the environment or the clock)."""
        return self not in (Outcome.ENV_ERROR, Outcome.TIMEOUT)

    @property
    def glyph(self) -> str:
        """A one-character mark for tables."""
        return _GLYPHS[self]


_GLYPHS = {
    Outcome.PASS: "✓",
    Outcome.REPRODUCED: "✗",
    Outcome.OTHER_FAILURE: "!",
    Outcome.TIMEOUT: "⏱",
    Outcome.CRASH: "☠",
    Outcome.ENV_ERROR: "∅",
}
