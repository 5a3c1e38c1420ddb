"""Fails with an error that is not the repro's expected one."""

raise RuntimeError("something else at 0x7f3a2b in /tmp/x/y.py after 12 steps")
