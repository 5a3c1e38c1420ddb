"""Passes on even calls and fails on odd ones (a counter in the file named by argv[1]): a flaky repro."""

import sys
from pathlib import Path

counter = Path(sys.argv[1])
calls = int(counter.read_text()) if counter.exists() else 0
counter.write_text(str(calls + 1))
if calls % 2:
    raise RuntimeError("flaky failure")
