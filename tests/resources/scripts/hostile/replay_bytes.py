"""Writes the bytes of the file given to its output, then ends as told: an exit status, or -N for signal N."""

import os
import sys
from pathlib import Path

sys.stdout.buffer.write(Path(sys.argv[1]).read_bytes())
sys.stdout.buffer.flush()
status = int(sys.argv[2])
if status < 0:
    os.kill(os.getpid(), -status)
os._exit(status)
