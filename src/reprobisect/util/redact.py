"""Secrets never leave the harness: a value the user hands over as a secret, and the userinfo of a URL.

A secret reaches the run that needs it (``--env HF_TOKEN=…``, ``--fix-env``, a ``matrix.yaml`` env) and nothing
else: whatever shows or stores text — records, logs, summaries, report files, the nightly issue, bisect and nightly
JSON, the terminal — gets ``***`` in its place. One process-wide list of values (``register_secret``) is filled as
the options and ``matrix.yaml`` are read, and applied by :func:`redact`, which every file written through
``util.files.write_atomic`` and every line on the terminal passes; a run's log is redacted as it streams
(``StreamRedactor``). What counts as a secret is one rule, ``secret_name``, which the run's environment scrubber
(``run/child_process.py``) shares: a name that looks like a credential, or one named by ``--secret-env``.

A pin such as ``git+https://user:TOKEN@github.com/org/DeepSpeed@main`` must reach git and pip as it is, but
whatever shows or stores it gets ``https://***@github.com/…``.
"""

from __future__ import annotations

import html
import json
import re
import threading
import urllib.parse
from collections.abc import Iterable, Mapping

__all__ = [
    "MASK",
    "MIN_SECRET_LENGTH",
    "URL_CREDENTIALS",
    "StreamRedactor",
    "credential_looking",
    "declare_secret_name",
    "forget_secrets",
    "redact",
    "redact_bytes",
    "register_secret",
    "register_secret_env",
    "secret_name",
    "secret_values",
]

# scheme://userinfo@ — userinfo being a user, a token, or user:password (``git@`` of an ssh URL is no secret).
# Linear in the text: a scheme starts only where no scheme character precedes it and is at most 32 characters
# long, so a scan never restarts inside a long run of letters or digits (a base64 blob, a hex dump); unanchored,
# ``[A-Za-z][A-Za-z0-9+.-]*://`` tried every start of such a run to its end (10 MiB took minutes).
URL_CREDENTIALS = re.compile(r"(?<![A-Za-z0-9+.-])(?P<scheme>[A-Za-z][A-Za-z0-9+.-]{0,31}://)(?!git@)[^/@\s\"'<>]+@")

MASK = "***"
# Shorter values are not hidden: ``true``, ``false``, ``0`` given to a credential-looking name would otherwise be
# cut out of every line the harness writes, and a value that short is no secret anyway.
MIN_SECRET_LENGTH = 6

# Words that make a name credential-looking wherever they stand in it (``DS_HUB_PASSWD``, ``NVIDIA_NGC_APIKEY``).
_WORDS = ("TOKEN", "SECRET", "PASSW", "APIKEY", "API_KEY", "AUTH", "CREDENTIAL", "PRIVATE", "COOKIE", "WEBHOOK")
# Words that do only as a whole part of the name between ``_``, ``-`` or ``.``: ``WANDB_API_KEY``, ``SSH_KEYS``,
# ``DB_PASS``, but not ``MONKEY_PATCH``, ``KEYBOARD`` or ``PASSTHROUGH``.
_PARTS = frozenset({"KEY", "KEYS", "PASS"})
# Whole families of names: a cloud's or a forge's variables are too many to tell apart.
_PREFIXES = ("AWS_", "GITHUB_", "AZURE_", "GOOGLE_", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")


def credential_looking(name: str) -> bool:
    """Whether a variable's name says it holds a credential (case aside): one of ``_WORDS`` anywhere in it, one of
    ``_PARTS`` as a whole part of it, or one of ``_PREFIXES`` at its start."""
    upper = name.upper()
    return (
        any(word in upper for word in _WORDS)
        or not _PARTS.isdisjoint(re.split(r"[_.-]+", upper))
        or upper.startswith(_PREFIXES)
    )


class _Registry:
    """The secret names and values of this process, and the patterns that find the values (longest first, so a
    value that holds another is hidden whole). Threads of one harness share it; forked workers inherit it."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.names: frozenset[str] = frozenset()
        self.values: frozenset[str] = frozenset()
        self.text: re.Pattern[str] | None = None
        self.data: re.Pattern[bytes] | None = None

    def add(self, forms: Iterable[str]) -> None:
        with self.lock:
            values = self.values | {form for form in forms if len(form) >= MIN_SECRET_LENGTH}
            if values == self.values:
                return
            ordered = sorted(values, key=lambda v: (-len(v), v))
            self.text = re.compile("|".join(re.escape(v) for v in ordered))
            self.data = re.compile(b"|".join(re.escape(v.encode("utf-8", "surrogatepass")) for v in ordered))
            self.values = values


_REGISTRY = _Registry()


def declare_secret_name(name: str) -> None:
    """``--secret-env NAME``: treat ``NAME`` as a secret's name, whatever it looks like."""
    with _REGISTRY.lock:
        _REGISTRY.names |= {name}


def secret_name(name: str) -> bool:
    """Whether a variable of this name holds a secret: it looks like a credential, or ``--secret-env`` named it."""
    return name in _REGISTRY.names or credential_looking(name)


def _forms(value: str) -> set[str]:
    """The value and the forms a writer may turn it into: JSON's escapes (records), HTML's (report.html), a URL's."""
    return {
        value,
        json.dumps(value)[1:-1],
        json.dumps(value, ensure_ascii=False)[1:-1],
        html.escape(value),
        urllib.parse.quote(value, safe=""),
        urllib.parse.quote_plus(value, safe=""),
    }


def register_secret(value: str) -> bool:
    """Hide ``value`` (and its escaped forms) from everything the harness writes or prints from now on; False
    when it is too short to hide (under ``MIN_SECRET_LENGTH`` characters)."""
    if len(value) < MIN_SECRET_LENGTH:
        return False
    _REGISTRY.add(_forms(value))
    return True


def register_secret_env(env: Mapping[str, str]) -> None:
    """Register the value of every variable of ``env`` whose name is a secret's (``secret_name``)."""
    for name, value in env.items():
        if secret_name(name):
            register_secret(value)


def secret_values() -> frozenset[str]:
    """Every registered form of every secret (tests, and a writer that must check rather than rewrite)."""
    return _REGISTRY.values


def forget_secrets() -> None:
    """Start again with no secret names or values (a test's isolation; a harness never forgets one)."""
    with _REGISTRY.lock:
        _REGISTRY.names, _REGISTRY.values = frozenset(), frozenset()
        _REGISTRY.text = _REGISTRY.data = None


def redact(text: str) -> str:
    """``text`` with every registered secret, and the userinfo of every URL in it, replaced by ``***``."""
    pattern = _REGISTRY.text
    if pattern is not None:
        text = pattern.sub(MASK, text)
    return URL_CREDENTIALS.sub(r"\g<scheme>***@", text)


def redact_bytes(data: bytes) -> bytes:
    """``data`` with every registered secret (as UTF-8) replaced by ``***``."""
    pattern = _REGISTRY.data
    return data if pattern is None else pattern.sub(MASK.encode(), data)


class StreamRedactor:
    """Redacts a byte stream that arrives in chunks (a run's output), whatever the chunks' boundaries.

    It holds back the last ``longest - 1`` bytes of what it was fed, where a secret may begin whose end has not
    arrived: a match that starts earlier is whole, since no secret is longer. Each byte is scanned at most twice,
    so the work is linear in the output. Secrets registered after it was made are not looked for (a run's
    variables are registered before it starts).
    """

    def __init__(self) -> None:
        self.pattern = _REGISTRY.data
        longest = max((len(v.encode("utf-8", "surrogatepass")) for v in _REGISTRY.values), default=1)
        self.hold = longest - 1
        self.pending = b""

    def feed(self, chunk: bytes) -> bytes:
        """What of the stream so far can be written: redacted, less what may be the start of a secret."""
        if self.pattern is None:
            return chunk
        data = self.pending + chunk
        cut = max(0, len(data) - self.hold)
        out: list[bytes] = []
        pos = 0
        for match in self.pattern.finditer(data):
            if match.start() >= cut:
                break
            out += [data[pos : match.start()], MASK.encode()]
            pos = match.end()
        keep_from = max(pos, cut)
        out.append(data[pos:keep_from])
        self.pending = data[keep_from:]
        return b"".join(out)

    def finish(self) -> bytes:
        """The rest of the stream, redacted: its end has come."""
        rest, self.pending = self.pending, b""
        return rest if self.pattern is None else self.pattern.sub(MASK.encode(), rest)
