"""Turn a run's log into a normalized error signature that is stable across versions and machines.

A signature is the exception type, its first message line with numbers, paths and addresses
normalized, and the innermost frames that lie inside torch, deepspeed or lightning as
``module:function`` (no line numbers, no install paths). Two runs that die the same way on different
machines, venvs or releases get the same short id; a drifting symptom gets a new one.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
import signal as signal_module
from pathlib import PurePath

__all__ = [
    "EVENT_MARK",
    "LIBRARY_ROOTS",
    "PATCH_ERROR",
    "Signature",
    "crash_signature",
    "exit_signature",
    "frame_name",
    "last_traceback",
    "normalize_message",
    "script_lines",
    "signature_from_log",
]

# starts an event line (run/child_process.py): what the bootstrap reports, never a failure's words
EVENT_MARK = "@@repro "
PATCH_ERROR = "PatchError"  # an unrun record's signature: its fix's patch does not apply to the cell's release
LIBRARY_ROOTS = ("torch", "deepspeed", "lightning", "pytorch_lightning", "lightning_fabric")
INNERMOST_FRAMES = 3
MAX_MESSAGE = 240

_TRACEBACK_HEAD = "Traceback (most recent call last):"
_FRAME_LINE = re.compile(r'^\s*File "(?P<path>[^"]+)", line (?P<line>\d{1,9}), in ?(?P<func>\S*)')
_EXCEPTION_LINE = re.compile(r"^(?P<type>[A-Za-z_][\w.]*)(?::\s?(?P<msg>.*))?$")
_RANK_PREFIX = re.compile(r"^\[?rank\d+\]?:\s?")
_NORMALIZERS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"0x[0-9a-fA-F]+"), "0x?"),
    (re.compile(r"(?:[A-Za-z]:)?(?:[\\/][\w.+@-]+){2,}[\\/]?"), "<path>"),
    # a number ends where a letter or digit does not follow; "_" may follow: a cell id's versions
    # ("deepspeed-0.17.2_lightning") become N whole, not "N.2"
    (re.compile(r"(?<![\w.])[-+]?\d+(?:\.\d+)*(?:[eE][-+]?\d+)?(?![^\W_])"), "N"),
    (re.compile(r"\s+"), " "),
)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Signature:
    """A normalized failure: what was raised, what it said, and where inside the libraries."""

    exception: str
    message: str
    frames: tuple[str, ...] = ()

    @property
    def id(self) -> str:
        """Short, stable id: the first 10 hex digits of a hash over the normalized parts."""
        text = "|".join((self.exception, self.message, ">".join(self.frames)))
        return hashlib.sha1(text.encode()).hexdigest()[:10]  # noqa: S324 - an id, not security

    @property
    def text(self) -> str:
        """Readable one-liner: ``Type: message @ innermost.module:function``."""
        head = f"{self.exception}: {self.message}" if self.message else self.exception
        return f"{head} @ {self.frames[-1]}" if self.frames else head

    def to_dict(self) -> dict[str, object]:
        """JSON-ready form stored in records."""
        return {
            "id": self.id,
            "text": self.text,
            "exception": self.exception,
            "message": self.message,
            "frames": list(self.frames),
        }

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> Signature:
        """Inverse of :meth:`to_dict` (the stored id is recomputed, not trusted)."""
        frames = data.get("frames") or []
        return cls(
            exception=str(data["exception"]),
            message=str(data.get("message") or ""),
            frames=tuple(str(f) for f in frames) if isinstance(frames, list) else (),
        )


def normalize_message(message: str) -> str:
    """Replace addresses, paths and numbers so that a message compares equal across runs."""
    text = message.strip()[: 16 * MAX_MESSAGE]  # the result is cut to MAX_MESSAGE: never scan megabytes for it
    for pattern, replacement in _NORMALIZERS:
        text = pattern.sub(replacement, text)
    return text.strip()[:MAX_MESSAGE]


def frame_name(path: str, function: str) -> str | None:
    """``deepspeed.runtime.engine:backward`` for a frame inside a library, else None.

    The module is taken from the path after the last ``site-packages``/``dist-packages`` folder, or
    from the last path part that is a library's top-level package (a source checkout).
    """
    parts = PurePath(path.replace("\\", "/")).parts
    if not parts or not parts[-1].endswith(".py"):
        return None
    start = None
    for index, part in enumerate(parts[:-1]):
        if part in ("site-packages", "dist-packages"):
            start = index + 1
    if start is None or start >= len(parts) or parts[start] not in LIBRARY_ROOTS:
        roots = [i for i, part in enumerate(parts[:-1]) if part in LIBRARY_ROOTS]
        if not roots:
            return None
        start = roots[-1]
    module_parts = [*parts[start:-1], parts[-1][: -len(".py")]]
    if module_parts[-1] == "__init__":
        module_parts.pop()
    return f"{'.'.join(module_parts)}:{function}"


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Traceback:
    frames: tuple[tuple[str, str], ...]
    exception: str
    message: str
    lines: tuple[int, ...] = ()  # each frame's line number


def last_traceback(log: str) -> _Traceback | None:
    """The last complete Python traceback in a log (the one that ended the process), or None.

    Each block is read only up to the next ``Traceback`` line (a chained exception's block ends with its
    exception line before the next one starts), so the scan is linear however many heads a log holds.
    """
    lines = [_RANK_PREFIX.sub("", line.rstrip("\n")) for line in log.splitlines()]
    heads = [i for i, line in enumerate(lines) if line.strip() == _TRACEBACK_HEAD]
    ends = [*heads[1:], len(lines)] if heads else []
    for head, end in zip(reversed(heads), reversed(ends), strict=True):
        parsed = _parse_block(lines, head + 1, end)
        if parsed is not None:
            return parsed
    return None


def _parse_block(lines: list[str], start: int, end: int) -> _Traceback | None:
    """Frames, then the exception line. Tolerates tracebacks pasted into issues with indentation lost."""
    frames: list[tuple[str, str]] = []
    numbers: list[int] = []
    after_frame = False
    for line in lines[start:end]:
        frame = _FRAME_LINE.match(line)
        if frame:
            frames.append((frame["path"], frame["func"]))
            numbers.append(int(frame["line"]))
            after_frame = True
            continue
        stripped = line.strip()
        if line.startswith((" ", "\t")) or not stripped or set(stripped) <= set("^~ "):
            after_frame = False
            continue  # source lines, caret markers, blank separators
        match = _EXCEPTION_LINE.match(stripped)
        if match is None:
            if after_frame:  # an unindented source line of a pasted traceback
                after_frame = False
                continue
            return None
        return _Traceback(
            frames=tuple(frames), exception=match["type"], message=match["msg"] or "", lines=tuple(numbers)
        )
    return None


def script_lines(log: str, filename: str) -> tuple[int, ...]:
    """The line numbers of the last traceback's frames in a file named ``filename`` (the script that ran): where
    the failure passed through the script, outermost first."""
    parsed = last_traceback(log)
    if parsed is None:
        return ()
    return tuple(
        line for (path, _), line in zip(parsed.frames, parsed.lines, strict=True) if PurePath(path).name == filename
    )


def signature_from_log(log: str) -> Signature | None:
    """The signature of the last traceback in ``log``, or None when the log holds no traceback."""
    parsed = last_traceback(log)
    if parsed is None:
        return None
    names = [name for path, func in parsed.frames if (name := frame_name(path, func)) is not None]
    return Signature(
        exception=parsed.exception,
        message=normalize_message(parsed.message),
        frames=tuple(names[-INNERMOST_FRAMES:]),
    )


_SIGKILL_CAUSES = {
    True: " (the out-of-memory killer)",
    False: " (not the out-of-memory killer: sent from inside the run or from outside)",
    None: " (cannot tell whether the out-of-memory killer sent it)",
}


def crash_signature(signal_number: int, *, oom_killed: bool | None = None) -> Signature:
    """Signature of a process killed by a signal (segfault, OOM killer, abort). A SIGKILL says what the kernel
    told the harness of the OOM killer (``run/oom.py``: True, False, or None where it could not tell), never a
    guess: an OOM kill and a kill from the script itself are different failures."""
    try:
        name = signal_module.Signals(signal_number).name
    except ValueError:
        name = f"signal {signal_number}"
    hint = _SIGKILL_CAUSES[oom_killed] if signal_number == signal_module.SIGKILL else ""
    return Signature(exception="Signal", message=f"{name}{hint}")


def exit_signature(exit_code: int, log: str) -> Signature:
    """Signature of a non-zero exit without a traceback: the status and the last line printed (event lines, such
    as the bootstrap's report at exit, are not what the run said)."""
    lines = reversed(log.splitlines())
    tail = next((line for line in lines if line.strip() and not line.startswith(EVENT_MARK)), "")
    return Signature(exception="Exit", message=normalize_message(f"status {exit_code}: {tail}"))
