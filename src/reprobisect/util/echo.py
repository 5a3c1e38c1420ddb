"""How the harness talks while it works: one function that prints a line (``print``, or a test's list.append)."""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["Echo"]

Echo = Callable[[str], None]
