"""Start the ranks of one run: ``python launch.py NPROC ARGV...`` runs ARGV NPROC times with torchrun's variables.

It runs inside the run's sandbox with the cell's python, standard library only (it is a child file, never
imported by the harness). Rank 0 writes to this process's output, which the harness logs and reads events
from, so a run of several ranks is watched as a run of one; every other rank writes to ``ranks/rank-N.log``
in the working folder, which the harness keeps beside the run's log.

The first rank to fail decides: the others get ``REPROBISECT_RANK_GRACE`` seconds (default 10) to finish or fail
on their own, as a rank blocked in a collective whose peer died would not, then SIGTERM, then SIGKILL. The
launcher exits as that rank did (the same code, or the same signal), and its last line is a ``ranks`` event
with every rank's exit status and which rank failed first. A rank that hangs without anyone failing is the
harness's timeout, which stops the whole process group, ranks included.
"""

import contextlib
import json
import os
import signal
import subprocess
import sys
import time

EVENT_MARK = "@@repro "
_POLL = 0.01  # ranks that fail within one poll are told apart by rank number only


def _rank_env(rank, nproc):
    env = dict(os.environ)
    env.pop("REPROBISECT_NPROC", None)
    env.update(
        {
            "RANK": str(rank),
            "LOCAL_RANK": str(rank),
            "WORLD_SIZE": str(nproc),
            "LOCAL_WORLD_SIZE": str(nproc),
            "GROUP_RANK": "0",
            "ROLE_RANK": str(rank),
            "TORCHELASTIC_RUN_ID": env.get("TORCHELASTIC_RUN_ID", "reprobisect"),
        }
    )
    return env


def _start(argv, nproc):
    os.makedirs("ranks", exist_ok=True)
    procs = []
    for rank in range(nproc):
        out = None
        if rank:
            out = open(os.path.join("ranks", f"rank-{rank}.log"), "wb")  # noqa: SIM115 - closed at exit
        procs.append(
            subprocess.Popen(argv, env=_rank_env(rank, nproc), stdout=out, stderr=subprocess.STDOUT if out else None)
        )
    return procs


def _stop(procs, grace):
    """The ranks still running after ``grace`` seconds: SIGTERM, then after 5 s SIGKILL."""
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(p.poll() is None for p in procs):
        time.sleep(_POLL)
    for sig, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 0.0)):
        alive = [p for p in procs if p.poll() is None]
        for p in alive:
            with contextlib.suppress(OSError):
                p.send_signal(sig)
        end = time.monotonic() + wait
        while time.monotonic() < end and any(p.poll() is None for p in alive):
            time.sleep(_POLL)
    for p in procs:
        p.wait()


def _watch(procs, grace):
    """Wait for every rank; returns the rank that failed first (None when all passed)."""
    first = None
    while any(p.poll() is None for p in procs):
        failed = [r for r, p in enumerate(procs) if p.poll() not in (None, 0)]
        if failed:
            first = failed[0]
            _stop(procs, grace)
            break
        time.sleep(_POLL)
    if first is None:
        failed = [r for r, p in enumerate(procs) if p.returncode != 0]
        first = failed[0] if failed else None
    return first


def _exit_as(code):
    sys.stdout.flush()
    if code < 0:  # the rank died of a signal: die of the same one, so the run is classified as that rank was
        with contextlib.suppress(OSError, ValueError):  # SIGKILL and SIGSTOP keep their default: nothing to reset
            signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
        time.sleep(1)
        code = 128 - code
    sys.exit(code)


def main():
    nproc = int(sys.argv[1])
    argv = sys.argv[2:]
    grace = float(os.environ.get("REPROBISECT_RANK_GRACE", "10"))
    procs = _start(argv, nproc)
    try:
        first = _watch(procs, grace)
    except KeyboardInterrupt:  # the harness's timeout: the ranks got the same SIGINT (one process group)
        _stop(procs, 3.0)
        first = None
    codes = [p.returncode for p in procs]
    event = {"event": "ranks", "nproc": nproc, "exit_codes": codes, "first_failed": first}
    print("\n" + EVENT_MARK + json.dumps(event), flush=True)
    if first is not None:
        _exit_as(codes[first])
    sys.exit(0 if all(c == 0 for c in codes) else 130)


if __name__ == "__main__":
    main()
