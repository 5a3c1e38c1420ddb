"""Rendezvous ports (MASTER_PORT) for runs that start side by side.

Why not just ``bind(0)``: the kernel hands out a port from its ephemeral range, the socket is closed, and the port is
free again — for the next ``bind(0)`` of a run started a moment later (two runs, one port) and for the outgoing
connections of every run already going (gloo, NCCL, a pip download), which take their source ports from that same
range. On the H200, 15 GAN runs at a time lost 2 of 144 to ``EADDRINUSE``. So a port comes from *below* the
ephemeral range, where the kernel never picks a source port, at random (several harness processes on one host rarely
meet), never one this process handed out recently, and only if it can be bound now.
"""

from __future__ import annotations

import collections
import random
import socket
import threading
from pathlib import Path

__all__ = ["EPHEMERAL_RANGE_FILE", "LOWEST", "free_port", "listen_range"]

EPHEMERAL_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
LOWEST = 20000  # below: well-known and registered services' ports, left alone
RECENT = 4096  # ports handed out that are not handed out again before this many more
_ATTEMPTS = 64

_lock = threading.Lock()
_recent: collections.deque[int] = collections.deque(maxlen=RECENT)
_random = random.SystemRandom()


def listen_range(range_file: Path = EPHEMERAL_RANGE_FILE) -> range | None:
    """Ports from LOWEST up to the start of the kernel's ephemeral range; None where that range cannot be read (not
    Linux, an unreadable or garbled file) or leaves too little room below it."""
    try:
        low, _high = (int(part) for part in range_file.read_text(encoding="ascii").split())
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    if low - LOWEST < RECENT:
        return None
    return range(LOWEST, low)


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _any_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def free_port(range_file: Path = EPHEMERAL_RANGE_FILE) -> int:
    """A TCP port free on the loopback interface now, outside the ephemeral range where there is one, and not one
    this process gave out among its last RECENT; the kernel's choice (``bind(0)``) where no such port is found."""
    ports = listen_range(range_file) or ()
    with _lock:
        taken = set(_recent)
        below = (_random.choice(ports) for _ in range(_ATTEMPTS if ports else 0))
        kernels = (_any_port() for _ in range(_ATTEMPTS))
        port = next((p for p in below if p not in taken and _bindable(p)), None)
        if port is None:
            port = next((p for p in kernels if p not in taken), _any_port())
        _recent.append(port)
    return port
