"""Writes 68 MiB without a newline (and event-looking text inside it), then passes."""

import sys

chunk = ("x" * 1000 + "@@repro {}") * 64
out = sys.stdout.buffer
for _ in range(68 * 1024 * 1024 // len(chunk)):
    out.write(chunk.encode())
out.write(b"\n")
out.flush()
