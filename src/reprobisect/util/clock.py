"""One way to say when: every record, nightly state and report stamps its times with ``utc_now``.

It lives below every layer that writes a time (a run's record, a night's state), so that those layers
need not import the child runner to read a clock.
"""

from __future__ import annotations

import datetime as dt

__all__ = ["utc_now"]


def utc_now() -> str:
    """The time a record says it started or finished: UTC, to the second, ISO 8601."""
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
