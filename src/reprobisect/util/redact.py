"""Credentials inside URLs never leave the harness: ``https://user:TOKEN@host/…`` becomes ``https://***@host/…``.

A pin such as ``git+https://user:TOKEN@github.com/org/DeepSpeed@main`` must reach git and pip as it is, but
whatever shows or stores it — records, summaries, report files, the nightly issue, a progress line — gets the
redacted form. Every file goes through :func:`reprobisect.atomic.write_atomic`, which redacts text.
"""

from __future__ import annotations

import re

__all__ = ["URL_CREDENTIALS", "redact"]

# scheme://userinfo@ — userinfo being a user, a token, or user:password (``git@`` of an ssh URL is no secret).
# Linear in the text: a scheme starts only where no scheme character precedes it and is at most 32 characters
# long, so a scan never restarts inside a long run of letters or digits (a base64 blob, a hex dump); unanchored,
# ``[A-Za-z][A-Za-z0-9+.-]*://`` tried every start of such a run to its end (10 MiB took minutes).
URL_CREDENTIALS = re.compile(r"(?<![A-Za-z0-9+.-])(?P<scheme>[A-Za-z][A-Za-z0-9+.-]{0,31}://)(?!git@)[^/@\s\"'<>]+@")


def redact(text: str) -> str:
    """``text`` with the userinfo of every URL in it replaced by ``***``."""
    return URL_CREDENTIALS.sub(r"\g<scheme>***@", text)
