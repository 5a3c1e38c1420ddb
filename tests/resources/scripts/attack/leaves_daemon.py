"""Starts a double-forked setsid daemon (named by argv[1] on its command line), then exits 0 at once."""

import os
import sys

if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(300)", sys.argv[1]])
    os._exit(0)
os.wait()
print("daemon started", flush=True)
