"""Whether the kernel's out-of-memory killer ended a run, from the kernel's own counters, never a guess.

A run that dies of SIGKILL was killed by the OOM killer, by itself (a script that kills its parent), or by
someone outside. The kernel counts its OOM kills per memory cgroup (``memory.events`` on cgroup v2,
``memory.oom_control`` on v1: ``oom_kill``, any kind of OOM kill of a process in that group) and logs each one
(``Out of memory: Killed process PID``) where the kernel log is readable. The harness reads the counter of its
own memory cgroup, which its runs share, before and after each run, and the kernel log written meanwhile; with
neither it says it cannot tell. A cgroup is shared with whatever else runs in it (other runs with ``--jobs``),
so a rise with no log line naming the run is said as such; an OOM kill in the log of a process the harness did
not see in the run (sampled, ``run/watch.py``) leaves it unable to tell. An unconfined run that moves itself into
another cgroup escapes the counter (the sandbox's cgroup file system is read-only), not the log.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import os
import re
from collections.abc import Collection
from pathlib import Path
from typing import Literal

__all__ = ["KillCause", "OomWatch", "kill_cause", "memory_cgroup_counter", "oom_killed_pids"]

_CGROUP_ROOT = Path("/sys/fs/cgroup")
_KMSG = "/dev/kmsg"
_MAX_KMSG_RECORDS = 100_000  # read after one run at most; a kernel log that floods faster is cut there
_KILLED = re.compile(r"(?:Killed process |oom-kill:.*\bpid=)(\d+)")


@dataclasses.dataclass(frozen=True, kw_only=True)
class KillCause:
    """The OOM killer's part in a run's end: ``oom`` (it killed the run), ``not-oom`` or ``unknown``, with the
    evidence in words (``memory cgroup /x: oom_kill +1 during the run``)."""

    verdict: Literal["oom", "not-oom", "unknown"]
    evidence: str


def memory_cgroup_counter(proc_cgroup: str, root: Path = _CGROUP_ROOT) -> tuple[Path, str] | None:
    """The file that counts OOM kills in this process's memory cgroup, and the key in it (``oom_kill``); None
    where no memory controller is mounted readable. ``proc_cgroup`` is ``/proc/self/cgroup``'s text."""
    candidates = []
    for line in proc_cgroup.splitlines():
        _, controllers, path = [*line.split(":", 2), "", ""][:3]
        relative = path.lstrip("/")
        if "memory" in controllers.split(","):  # cgroup v1
            candidates.append(root / "memory" / relative / "memory.oom_control")
        elif controllers == "":  # cgroup v2 (unified), mounted at the root or, on a hybrid host, at unified/
            candidates += [root / relative / "memory.events", root / "unified" / relative / "memory.events"]
    for candidate in candidates:
        if _read_counter(candidate) is not None:
            return candidate, "oom_kill"
    return None


def _read_counter(path: Path) -> int | None:
    try:
        text = path.read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key == "oom_kill" and value.strip().isdigit():
            return int(value)
    return None


def oom_killed_pids(records: Collection[str]) -> set[int]:
    """The pids the kernel log's records name as killed by the OOM killer (``Killed process 123 (python)``,
    ``oom-kill:...,pid=123,...``)."""
    return {int(match[1]) for record in records for match in [_KILLED.search(record)] if match is not None}


def kill_cause(
    *, counter: str | None, rise: int | None, killed: set[int] | None, run_pids: Collection[int]
) -> KillCause:
    """Decide from the evidence: ``rise`` of the cgroup's ``oom_kill`` during the run (None: unreadable) in the
    group named ``counter``; ``killed``: the pids the kernel log named as OOM-killed meanwhile (None:
    unreadable); ``run_pids``: the run's processes the harness saw."""
    named = sorted(set(run_pids) & killed) if killed is not None else []
    if named:
        return KillCause(verdict="oom", evidence=f"the kernel log: OOM killer killed process {named[0]} of the run")
    if rise:
        other = " (the kernel log names no process of the run: it may have been another process in that group)"
        return KillCause(
            verdict="oom",
            evidence=f"memory cgroup {counter}: oom_kill +{rise} during the run"
            + (other if killed is not None else ""),
        )
    if killed:  # a process the harness did not see (it lived between two samples, or left the run's cgroup)
        pids = ", ".join(map(str, sorted(killed)[:5]))
        return KillCause(
            verdict="unknown",
            evidence=f"the kernel log names an OOM kill of process {pids} during the run, which the harness did not "
            "see among the run's processes",
        )
    if rise == 0 or killed is not None:
        said = [
            f"memory cgroup {counter}: oom_kill unchanged" if rise == 0 else "",
            "the kernel log names no OOM kill during the run" if killed is not None else "",
        ]
        return KillCause(verdict="not-oom", evidence="; ".join(s for s in said if s))
    return KillCause(verdict="unknown", evidence="no memory cgroup counter or kernel log readable here")


class OomWatch:
    """The OOM evidence around one run: the cgroup's counter and the end of the kernel log when it starts, what
    each says when it ends. Opened before the run starts; ``finish`` closes it."""

    def __init__(self) -> None:
        try:
            found = memory_cgroup_counter(Path("/proc/self/cgroup").read_text(encoding="ascii", errors="replace"))
        except OSError:
            found = None
        self.counter = found[0] if found is not None else None
        self.before = _read_counter(self.counter) if self.counter is not None else None
        self.kmsg = _open_kmsg()

    def finish(self, run_pids: Collection[int]) -> KillCause:
        """What the evidence says about a run whose processes were ``run_pids``; closes the kernel log."""
        after = _read_counter(self.counter) if self.counter is not None else None
        rise = after - self.before if after is not None and self.before is not None else None
        killed = None
        if self.kmsg is not None:
            killed = oom_killed_pids(_read_kmsg(self.kmsg))
            os.close(self.kmsg)
            self.kmsg = None
        group = str(self.counter.parent) if self.counter is not None else None
        return kill_cause(counter=group, rise=rise, killed=killed, run_pids=run_pids)

    def close(self) -> None:
        """Close the kernel log where ``finish`` never ran (the harness interrupted)."""
        if self.kmsg is not None:
            with contextlib.suppress(OSError):
                os.close(self.kmsg)
            self.kmsg = None


def _open_kmsg() -> int | None:
    """The kernel log, read from its end on (records written from now), or None where it is not readable."""
    try:
        fd = os.open(_KMSG, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        os.lseek(fd, 0, os.SEEK_END)
    except OSError:
        os.close(fd)
        return None
    return fd


def _read_kmsg(fd: int) -> list[str]:
    """The kernel log's records since the descriptor was opened (one per read), at most ``_MAX_KMSG_RECORDS``."""
    records: list[str] = []
    while len(records) < _MAX_KMSG_RECORDS:
        try:
            data = os.read(fd, 8192)
        except BlockingIOError:
            break
        except OSError as exc:
            if exc.errno == errno.EPIPE:  # records overwritten before we read them: go on with the next
                continue
            break
        if not data:
            break
        records.append(data.decode("utf-8", errors="replace").partition(";")[2])
    return records
