"""Issue #39: a SIGKILL that is no OOM kill. With an argument, kills its parent (in the sandbox, the harness's
waiter: bubblewrap then reports 137); without, kills itself."""

import os
import signal
import sys

os.kill(os.getppid() if sys.argv[1:] == ["parent"] else os.getpid(), signal.SIGKILL)
