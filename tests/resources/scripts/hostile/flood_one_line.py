"""Writes 10 MiB of base64-like letters and digits without a newline, then fails: one log line, no end."""

import sys

out = sys.stdout.buffer
chunk = b"QUFBQUFBQUFBQUFB0123456789abcdef" * 2048
for _ in range(10 * 2**20 // len(chunk)):
    out.write(chunk)
out.flush()
sys.exit(3)
