"""Every path a patch names, checked before any cell is built: a patch may change files only inside its package.

A patch fix is applied by GNU ``patch`` to a private copy of the packages it touches (``cells/patches.py``). A
target such as ``b/deepspeed/../../../PWNED``, an absolute path or a symbolic link would reach outside that copy;
``patch`` happens to refuse most of them, but the harness must not leave its safety to a tool's defaults, and
a refusal at run time says "does not apply" instead of naming the escape. So every header a unified or git diff
can carry (``---``/``+++``, ``*** ``, ``Index:``, ``diff --git``, ``rename``/``copy from``/``to``, and the
modes) is read here, header-like lines inside hunks included, and a path that is absolute,
climbs out of its package after ``-p<strip>`` or is a symlink entry is a ConfigError (exit 2) naming the file,
the line, the path and what would be right.
"""

from __future__ import annotations

import dataclasses
import re
import warnings
from pathlib import Path, PurePosixPath

from reprobisect.errors import ConfigError

__all__ = ["PatchHeader", "check_patch", "new_paths", "patch_headers", "path_problem"]

_HUNK = re.compile(r"^@@ -\d+(?:,(?P<old>\d+))? \+\d+(?:,(?P<new>\d+))? @@")
_NAMED = (  # header prefix -> whether the name carries the a/ b/ prefix that -p strips
    ("--- ", True),
    ("+++ ", True),
    ("*** ", True),
    ("Index: ", True),
    ("rename from ", False),
    ("rename to ", False),
    ("copy from ", False),
    ("copy to ", False),
)
_MODE = re.compile(r"^(?:new file mode|deleted file mode|old mode|new mode|index \S+) (?P<mode>\d{6})\s*$")
_SYMLINK_MODE = "120000"
_NO_FILE = "/dev/null"
_MAX_HUNK_LINES = 10**9
_HUNK_KINDS = (" ", "-", "+", "", "\\")  # context, removed, added, an empty context line, "\\ No newline"


@dataclasses.dataclass(frozen=True, kw_only=True)
class PatchHeader:
    """One header line of a patch: its number, its text, and the names it gives (several for ``diff --git``)."""

    line: int
    text: str
    names: tuple[str, ...]
    prefixed: bool  # the names carry git's a/ b/ prefix, which -p<strip> removes
    symlink: bool = False
    in_hunk: bool = False  # inside a hunk's counted lines: content to patch, checked all the same


def _unquote(name: str) -> str:
    """A git-quoted name (``"b/a\\tb.py"``) as the file name it stands for; others as they are."""
    if len(name) >= 2 and name[0] == name[-1] == '"':
        with warnings.catch_warnings():  # an escape the decoder does not know ("\\/") warns: it stays as written
            warnings.simplefilter("ignore", DeprecationWarning)
            try:
                return name[1:-1].encode("latin-1", "backslashreplace").decode("unicode_escape")
            except UnicodeDecodeError:
                return name[1:-1]
    return name


def _names(rest: str) -> tuple[str, ...]:
    """The name after a header word, as ``patch`` may read it: up to a tab (a timestamp follows), and also its
    first word; both are checked, so no reading of the line hides a path."""
    rest = rest.rstrip("\r\n")
    whole = rest.split("\t", 1)[0].rstrip()
    first = rest.split(None, 1)[0] if rest.split() else ""
    return tuple(dict.fromkeys(_unquote(name) for name in (whole, first) if name))


def _git_names(rest: str) -> tuple[str, ...]:
    """The two names of ``diff --git a/X b/Y``: each word, and each quoted name, checked on its own."""
    quoted = re.findall(r'"(?:[^"\\]|\\.)*"', rest)
    words = re.sub(r'"(?:[^"\\]|\\.)*"', " ", rest).split()
    return tuple(dict.fromkeys([*(_unquote(q) for q in quoted), *words]))


def _header(number: int, line: str) -> PatchHeader | None:
    if line.startswith("diff --git "):
        return PatchHeader(line=number, text=line, names=_git_names(line[len("diff --git ") :]), prefixed=True)
    for prefix, prefixed in _NAMED:
        if line.startswith(prefix):
            return PatchHeader(line=number, text=line, names=_names(line[len(prefix) :]), prefixed=prefixed)
    mode = _MODE.match(line)
    if mode is not None and mode["mode"] == _SYMLINK_MODE:
        return PatchHeader(line=number, text=line, names=(), prefixed=False, symlink=True)
    return None


def patch_headers(text: str) -> list[PatchHeader]:
    """Every line of a patch that has the form of a header, in order. A hunk's body is measured by the counts in
    its ``@@`` line, and header-like lines inside it are marked ``in_hunk``: content to ``patch`` (a changed line
    that starts with ``+++``), but checked all the same, so the check never depends on reading a hunk as
    ``patch`` does."""
    headers = []
    old = new = 0
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.rstrip("\r")
        kind = line[:1]
        in_hunk = (old > 0 or new > 0) and kind in _HUNK_KINDS
        if in_hunk:
            old -= int(kind in (" ", "-", ""))
            new -= int(kind in (" ", "+", ""))
        else:
            old = new = 0  # not hunk content (a hunk cut short): a header, as patch would read it
            hunk = _HUNK.match(line)
            if hunk is not None:
                old = min(int(hunk["old"] or 1), _MAX_HUNK_LINES)
                new = min(int(hunk["new"] or 1), _MAX_HUNK_LINES)
                continue
        header = _header(number, line)
        if header is not None:
            headers.append(dataclasses.replace(header, in_hunk=in_hunk))
    return headers


def path_problem(name: str, strip: int) -> str | None:
    """Why ``name``, after ``patch -p<strip>``, is not a file inside one package folder; None when it is.

    The first part left is the package (the folder copied for the fix); ``..`` may never climb to it or above.
    """
    if name == _NO_FILE:
        return None
    if name.startswith("/"):
        return "is absolute"
    parts = [part for part in name.split("/") if part not in ("", ".")][strip:]
    if not parts:
        return None  # nothing left to name a file: patch takes its name from another header, checked there
    if parts[0] == "..":
        return f"climbs out of the folder the package is copied to (after -p{strip}: {'/'.join(parts)!r})"
    depth = 0
    for part in parts:
        depth += -1 if part == ".." else 1
        if depth < 1:
            return f"climbs out of its package {parts[0]!r} (after -p{strip}: {'/'.join(parts)!r})"
    return None


def _header_problem(header: PatchHeader, strip: int) -> tuple[str, str] | None:
    """The first name of a header that is not safe, with why; checked at every strip ``patch`` may use on it."""
    if header.symlink:
        return header.text, "makes a symbolic link (mode 120000), which could point anywhere"
    strips = (strip,) if header.prefixed else tuple(dict.fromkeys((0, strip)))
    for name in header.names:
        for level in strips:
            why = path_problem(name, level)
            if why is not None:
                return name, why
    return None


def check_patch(patch: Path, strip: int, *, where: str = "") -> None:
    """Refuse a patch that names any path outside its package (see the module's docstring); ``where`` names the
    key or option that gave it (``matrix.yaml: repros.gan.fixes.x.patch``)."""
    try:
        text = patch.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        msg = f"{where or patch}: cannot read the patch {patch} ({exc.strerror or exc})"
        raise ConfigError(msg) from exc
    for header in patch_headers(text):
        problem = _header_problem(header, strip)
        if problem is None:
            continue
        name, why = problem
        shown = header.text if len(header.text) <= 200 else header.text[:199] + "…"
        inside = " (inside a hunk, refused all the same: patch may read it as a header)" if header.in_hunk else ""
        msg = (
            f"{where + ': ' if where else ''}{patch}: line {header.line} ({shown!r}){inside} names {name!r}, "
            f"which {why}; "
            f"a patch may change only regular files inside the package it patches, named as 'b/deepspeed/...' "
            f"with strip 1 (patch -p1) or 'deepspeed/...' with strip 0"
        )
        raise ConfigError(msg)


def new_paths(text: str, strip: int) -> list[PurePosixPath]:
    """The files a patch changes or makes, relative to the folder it applies in (its ``+++`` names, after
    ``-p<strip>``); deleted files (``+++ /dev/null``) are left out."""
    paths = []
    for header in patch_headers(text):
        if header.in_hunk or not header.text.startswith("+++ ") or not header.names:
            continue
        name = header.names[0]
        parts = [part for part in name.split("/") if part not in ("", ".")][strip:]
        if name != _NO_FILE and parts:
            paths.append(PurePosixPath(*parts))
    return paths
