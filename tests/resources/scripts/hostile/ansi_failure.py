"""Fails with an exception whose message tries to repaint the terminal as a PASS."""

raise RuntimeError("boom\x1b[2K\r\x1b[32m✓ PASS\x1b[0m \x1b]0;title\x07 \u202e")
