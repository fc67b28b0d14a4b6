"""Ports for the demo's servers: picked free and kept out of others' reach, and who holds them."""

from __future__ import annotations

import errno
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from advisor.demo.ports import free_ports, listeners
from testing.ports import held_port


def test_free_ports_are_distinct() -> None:
    ports = free_ports(12)
    assert len(set(ports)) == 12


def _time_wait_ports() -> set[int]:
    rows = Path("/proc/net/tcp").read_text().splitlines()[1:]
    return {int(r.split()[1].rsplit(":", 1)[1], 16) for r in rows if r.split()[3] == "06"}


def _never_given_to_port_0(ports: set[int], tries: int = 20_000) -> None:
    """Binds port 0 `tries` times, half with SO_REUSEADDR: none gets one of `ports` (20,000
    tries hit one of four plainly released ports about 6 times)."""
    for i in range(tries):
        with socket.socket() as other:
            if i % 2:
                other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            other.bind(("127.0.0.1", 0))
            assert other.getsockname()[1] not in ports


def _only_a_reuseaddr_server_binds(port: int) -> None:
    with socket.socket() as plain, pytest.raises(OSError) as info:
        plain.bind(("127.0.0.1", port))
    assert info.value.errno == errno.EADDRINUSE
    for _ in range(2):  # a server started, stopped and started again on it
        with socket.socket() as server:
            server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            server.bind(("127.0.0.1", port))
            server.listen()


def test_a_picked_port_waits_for_its_server_out_of_others_reach() -> None:
    """Left in TIME_WAIT, out of reach of port 0 and of binds without SO_REUSEADDR."""
    picked = set(free_ports(4))
    deadline = time.monotonic() + 2  # the closing handshake, on loopback at once
    while not picked <= _time_wait_ports() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert picked <= _time_wait_ports()
    _never_given_to_port_0(picked)
    _only_a_reuseaddr_server_binds(min(picked))


def test_a_held_port_is_the_tests_alone() -> None:
    with held_port() as port:
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=5).close()
        _never_given_to_port_0({port})
        _only_a_reuseaddr_server_binds(port)


def test_listeners_tells_a_process_own_port_from_anothers() -> None:
    with socket.socket() as mine, socket.socket() as idle:
        mine.bind(("127.0.0.1", 0))
        mine.listen()
        idle.bind(("127.0.0.1", 0))  # bound, not listening: nobody's listener
        ports = [mine.getsockname()[1], idle.getsockname()[1]]
        assert listeners(ports, os.getpid()) == ({ports[0]}, set())
        assert listeners(ports, None) == (set(), {ports[0]})
        other = subprocess.Popen(
            [sys.executable, "-c", "import socket, sys, time; s = socket.socket(); "
             "s.bind(('127.0.0.1', 0)); s.listen(); print(s.getsockname()[1], flush=True); "
             "time.sleep(30)"],
            stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            assert other.stdout is not None
            theirs = int(other.stdout.readline())
            assert listeners([*ports, theirs], os.getpid()) == ({ports[0]}, {theirs})
            assert listeners([theirs], other.pid) == ({theirs}, set())
        finally:
            other.kill()
            other.wait(timeout=10)
            assert other.stdout is not None
            other.stdout.close()
    deadline = time.monotonic() + 5
    while listeners([theirs], None) != (set(), set()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert listeners([theirs], None) == (set(), set())
