"""One way to parse Python text that came from elsewhere: whatever the text, the answer is a tree or a SyntaxError.

``ast.parse`` raises more than SyntaxError, and which depends on the interpreter: on Python 3.11.2 (Debian 12's, the
oldest this package supports) a NUL byte raises ``ValueError`` ("source code string cannot contain null bytes"),
where 3.11.4 and later raise SyntaxError; nesting a few thousand levels deep raises ``RecursionError`` or
``MemoryError``. A script pasted from an issue is untrusted text, so every caller that parses one goes through
:func:`parse_python` and handles SyntaxError alone, on every supported Python.
"""

from __future__ import annotations

import ast
import warnings

__all__ = ["PARSE_FAILURES", "parse_python"]

# What ast.parse and compile() raise on text they cannot take, beside SyntaxError, on some supported Python.
PARSE_FAILURES: tuple[type[Exception], ...] = (SyntaxError, ValueError, RecursionError, MemoryError)


def parse_python(source: str, filename: str = "<script>") -> ast.Module:
    """The module tree of ``source``; SyntaxError (with a line where one is known) for any text that does not
    parse on this interpreter, whatever ``ast.parse`` raised for it."""
    try:
        with warnings.catch_warnings():
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
