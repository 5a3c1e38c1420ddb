"""Writes argv[1] MiB of zeros into /tmp (in the sandbox: its private tmpfs), then says it got through."""

import sys

with open("/tmp/fill", "wb") as out:
    for _ in range(int(sys.argv[1])):
        out.write(b"\0" * (1 << 20))
        out.flush()
print("wrote it all", flush=True)
