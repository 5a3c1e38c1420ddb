"""Floods 64 MiB of long @@repro lines (each 60 KiB: under the line limit), then passes."""

import sys

line = b"@@repro " + b'{"event": "note", "pad": "' + b"y" * 60_000 + b'"}\n'
out = sys.stdout.buffer
for _ in range(64 * 1024 * 1024 // len(line)):
    out.write(line)
out.flush()
