"""What a commit hash and a ref name may look like when they come from a file someone else wrote (a nightly state).

Both reach ``git`` as arguments. A "commit" of ``--upload-pack=touch /tmp/x`` is an option, ``HEAD~1`` or
``main`` is a name that moves; a "ref" of ``-x`` is an option and ``a..b`` a range. So a commit must be a full
hash, as ``git rev-parse`` prints it (40 hex digits for SHA-1, 64 for SHA-256), and a ref must be a name
``git check-ref-format --allow-onelevel`` accepts that does not start with ``-``.
"""

from __future__ import annotations

import re

__all__ = ["MAX_REF_LENGTH", "is_commit_hash", "ref_problem"]

MAX_REF_LENGTH = 255
_HASH = re.compile(r"(?:[0-9a-f]{40}|[0-9a-f]{64})")
_FORBIDDEN = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]")  # controls, space and git's special characters


def is_commit_hash(value: object) -> bool:
    """Is ``value`` a full commit hash as ``git rev-parse`` prints it (lowercase; SHA-1 or SHA-256)?"""
    return isinstance(value, str) and _HASH.fullmatch(value) is not None


def ref_problem(value: object) -> str | None:
    """Why ``value`` is no ref name git would take as one (``git check-ref-format --allow-onelevel``'s rules, and no
    leading ``-``), or None where it is one."""
    if not isinstance(value, str) or not value:
        return "a ref must be a non-empty string"
    if len(value) > MAX_REF_LENGTH:
        return f"a ref is at most {MAX_REF_LENGTH} characters"
    if value.startswith("-"):
        return "a ref cannot start with '-' (git would read an option)"
    if _FORBIDDEN.search(value):
        return "a ref holds no space, control character or any of ~ ^ : ? * [ \\"
    if ".." in value or "@{" in value or value == "@":
        return "a ref holds no '..' or '@{' and is not '@'"
    if value.startswith("/") or value.endswith(("/", ".")) or "//" in value:
        return "a ref neither starts nor ends with '/', ends with '.' nor holds '//'"
    if any(part.startswith(".") or part.endswith(".lock") for part in value.split("/")):
        return "no part of a ref starts with '.' or ends with '.lock'"
    return None
