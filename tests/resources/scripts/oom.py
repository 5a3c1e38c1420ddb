"""Moves itself into a memory cgroup limited to 256 MiB (argv[1]), then allocates until the kernel kills it."""

import sys
from pathlib import Path

Path(sys.argv[1], "cgroup.procs").write_text("0\n")  # "0" means this process
hoard = []
while True:
    hoard.append(bytearray(64 * 2**20))
