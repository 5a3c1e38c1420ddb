"""Run ARGV inside the sandbox and tell the harness how it ended: ``python -I -S waiter.py ARGV...``.

bubblewrap passes a death by signal on as exit status 128+N, the status a plain ``sys.exit(139)`` gives too, so
outside the sandbox the harness cannot tell a segfault from an exit. This waiter, the harness's own code and the
run's parent, reads the run's wait status and writes it as one JSON object, ``{"signal": N}`` or ``{"exit": N}``,
to the file descriptor named by ``REPROBISECT_STATUS_FD``, with the run's peak RSS as ``os.wait4`` measured it
(``"maxrss_kib"``) and the space left on the sandbox's private ``/tmp`` as the run ended (``"tmp_free"``, of
``"tmp_size"`` bytes: a run that filled it failed for that); the run gets neither that descriptor nor that variable. It exits as bubblewrap would report
the run (N, or 128+N), so a harness that reads nothing (the waiter killed) sees what it saw before. The harness trusts the message only where it agrees with that status: the
worst a forged one can do is swap a death by SIGSEGV for an ``exit(139)``, which the run could do itself.

It runs with the cell's python, standard library only (it is a child file, never imported by the harness).
"""

import json
import os
import signal
import subprocess
import sys

STATUS_FD = "REPROBISECT_STATUS_FD"
_SIGNAL_EXIT_BASE = 128


def _ignore(_signum, _frame):
    """The run's group gets the harness's SIGINT and SIGTERM too; the waiter outlives them to report."""


def main():
    fd = os.environ.pop(STATUS_FD, "")
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _ignore)  # a handler, not SIG_IGN: the run starts with the default (exec resets it)
    run = subprocess.Popen(sys.argv[1:])  # close_fds: the status descriptor stays the waiter's
    # wait4, not wait: its ru_maxrss is the run's peak RSS (its largest process), measured by the kernel for the
    # harness; the run cannot reach this pipe to say otherwise
    _, wait_status, usage = os.wait4(run.pid, 0)
    code = run.returncode = os.waitstatus_to_exitcode(wait_status)
    if fd.isdigit():
        status = {"signal": -code} if code < 0 else {"exit": code}
        status["maxrss_kib"] = usage.ru_maxrss
        status["pid"], status["waiter"] = run.pid, os.getpid()  # the run's pid, for the kernel log's OOM kills
        status.update(_tmp_space())
        try:
            os.write(int(fd), json.dumps(status).encode())
            os.close(int(fd))
        except OSError:
            pass
    return _SIGNAL_EXIT_BASE - code if code < 0 else code


def _tmp_space():
    """The bytes left on /tmp (the sandbox's own tmpfs) and its size; nothing where it cannot be read."""
    try:
        fs = os.statvfs("/tmp")
    except OSError:
        return {}
    return {"tmp_free": fs.f_bavail * fs.f_frsize, "tmp_size": fs.f_blocks * fs.f_frsize}


if __name__ == "__main__":
    sys.exit(main())
