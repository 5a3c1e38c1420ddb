"""Rendezvous ports: bindable, below the kernel's ephemeral range, never the same twice in a row of runs, and a
garbled or missing range file falls back to the kernel's choice instead of failing."""

from __future__ import annotations

import concurrent.futures
import random
import socket
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import reprobisect.run.ports as ports_module
from reprobisect.run.ports import EPHEMERAL_RANGE_FILE, LOWEST, RECENT, free_port, listen_range


def _bind(port: int) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", port))


def test_a_port_can_be_bound_and_lies_below_the_ephemeral_range() -> None:
    port = free_port()
    _bind(port)
    ports = listen_range()
    if ports is not None:  # Linux: the kernel never takes it as another connection's source port
        low = int(EPHEMERAL_RANGE_FILE.read_text().split()[0])
        assert LOWEST <= port < low


def test_runs_started_side_by_side_never_share_a_port() -> None:
    """The H200 map lost 2 of 144 runs (15 at a time) to EADDRINUSE with bind(0)'s ports."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=16) as pool:
        ports = list(pool.map(lambda _: free_port(), range(RECENT // 4)))
    assert len(set(ports)) == len(ports)


def test_only_a_port_that_can_be_bound_is_given(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ports of the range that another process holds are passed over; where the whole range is held, the kernel
    chooses (a port is always given)."""
    ports = listen_range()
    if ports is None:
        pytest.skip("no ephemeral range file here (not Linux)")
    the_free_one = ports[len(ports) // 2]
    monkeypatch.setattr(ports_module, "_bindable", lambda port: port == the_free_one)
    monkeypatch.setattr(ports_module, "_random", random.Random(0))
    monkeypatch.setattr(ports_module, "_ATTEMPTS", len(ports) * 20)  # enough random draws to meet it
    ports_module._recent.clear()
    assert free_port() == the_free_one
    fallback = free_port()  # given out just now: not again, and nothing else in the range can be bound
    assert fallback != the_free_one and fallback not in ports
    _bind(fallback)


@settings(max_examples=40, deadline=None)
@given(st.binary(max_size=64))
def test_a_garbled_range_file_falls_back_to_the_kernels_choice(content: bytes) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "range"
        path.write_bytes(content)
        port = free_port(path)
        _bind(port)
        ports = listen_range(path)
        assert ports is None or port in ports or port >= 1024


@pytest.mark.parametrize("content", ["", "x y", "32768", "60999 32768 1", "20500 60999", "-5 60999", "\x00"])
def test_a_range_too_small_or_unreadable_gives_none(tmp_path: Path, content: str) -> None:
    (tmp_path / "range").write_text(content)
    assert listen_range(tmp_path / "range") is None
    assert listen_range(tmp_path / "missing") is None
