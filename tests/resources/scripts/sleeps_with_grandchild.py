"""Starts a grandchild that sleeps, then sleeps itself past any test timeout; writes the grandchild's pid."""

import subprocess
import sys
import time

child = subprocess.Popen(
    [
        sys.executable,
        "-c",
        "import signal, time; signal.signal(signal.SIGINT, signal.SIG_IGN); signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)",
    ]
)
with open(sys.argv[1], "w") as handle:
    handle.write(str(child.pid))
print("grandchild started", flush=True)
time.sleep(600)
