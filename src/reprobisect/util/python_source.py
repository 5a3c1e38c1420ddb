"""One way to parse Python text that came from elsewhere: whatever the text, the answer is a tree or a SyntaxError.

``ast.parse`` raises more than SyntaxError, and which depends on the interpreter: on Python 3.11.2 (Debian 12's, the
oldest this package supports) a NUL byte raises ``ValueError`` ("source code string cannot contain null bytes"),
where 3.11.4 and later raise SyntaxError; nesting a few thousand levels deep raises ``RecursionError`` or
``MemoryError``. A script pasted from an issue is untrusted text, so every caller that parses one goes through
:func:`parse_python` and handles SyntaxError alone, on every supported Python.

It also parses one text at a time. On Python 3.11 the tree builder keeps its recursion depth in one counter per
interpreter, not per thread, and each parse sets it to its own caller's depth: when a garbage collection inside one
thread's parse runs a finalizer that lets another thread parse, the first one ends on a depth it did not start from
and raises ``SystemError: AST constructor recursion depth mismatch`` for a perfectly good script. The minimizer runs
the bad and the good cell side by side, and each reads the script's imports, so a lock keeps parses from overlapping.
"""

from __future__ import annotations

import ast
import threading
import warnings

__all__ = ["PARSE_FAILURES", "parse_python"]

# What ast.parse and compile() raise on text they cannot take, beside SyntaxError, on some supported Python.
PARSE_FAILURES: tuple[type[Exception], ...] = (SyntaxError, ValueError, RecursionError, MemoryError)

# Held for the whole of every parse: the 3.11 tree builder's depth counter is shared by all threads (see above).
_ONE_PARSE_AT_A_TIME = threading.RLock()  # re-entrant: a finalizer that parses mid-parse errs, never hangs


def parse_python(source: str, filename: str = "<script>") -> ast.Module:
    """The module tree of ``source``; SyntaxError (with a line where one is known) for any text that does not
    parse on this interpreter, whatever ``ast.parse`` raised for it."""
    try:
        with _ONE_PARSE_AT_A_TIME, warnings.catch_warnings():
            warnings.simplefilter("ignore")  # SyntaxWarning for an odd escape is the script's business
            return ast.parse(source, filename=filename)
    except SyntaxError as exc:
        if exc.lineno is None:  # NUL bytes on 3.11.4 and later: no file, no line
            raise _syntax_error(filename, source, str(exc.msg)) from exc
        raise
    except ValueError as exc:  # NUL bytes on Python < 3.11.4
        raise _syntax_error(filename, source, str(exc)) from exc
    except (RecursionError, MemoryError) as exc:
        raise _syntax_error(filename, source, "nests too deeply to parse") from exc


def _syntax_error(filename: str, source: str, why: str) -> SyntaxError:
    """A SyntaxError for text that failed otherwise, on the line of its first NUL byte where it has one."""
    line = source.count("\n", 0, source.index("\0")) + 1 if "\0" in source else 1
    error = SyntaxError(why)
    error.filename, error.lineno, error.offset = filename, line, None
    return error
